// embedding's dense backward and embedding_renorm_.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/zeros.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <sstream>

#include <cstring>

#include <cmath>
#include <limits>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/indexing/index_checks.h"
#include "aten/kernel_helpers.h"

namespace tpu::ops {

namespace {

// ---- embedding backward ----

// ins = (grad [N, D], indices [N]); ints = (num_weights, padding_idx, scale)
VS LowerEmbeddingBackward(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t nw = a.ints[0], pad = a.ints[1];
  const DType acc = ir::IsFloat(out[0].dtype) && ir::BitWidth(out[0].dtype) < 32 ? DType::F32
                                                                                  : out[0].dtype;
  Value g = ir::Convert(b, in[0], acc);
  const ir::Dims gd = b.type(g).dims;  // [N, D]
  const int64_t n = gd[0];
  Value idx = ir::Convert(b, in[1], DType::S64);
  Value keep = ir::Compare(b, idx, ir::Full(b, ir::ConstantI(b, pad, DType::S64), {n}), ir::Cmp::NE);
  g = ir::Select(b, ir::BroadcastInDim(b, keep, gd, {0}), g,
                 ir::Full(b, ir::ConstantI(b, 0, acc), gd));
  if (a.ints[2]) {  // scale_grad_by_freq: divide each row by its index's count
    ir::ScatterDims cd;
    cd.inserted_window_dims = {0};
    cd.scatter_dims_to_operand_dims = {0};
    cd.index_vector_dim = 1;
    Value counts = ir::Scatter(b, ir::Full(b, ir::ConstantI(b, 0, acc), {nw}), idx,
                               ir::Full(b, ir::ConstantI(b, 1, acc), {n}), cd, "stablehlo.add");
    Value c = ir::Take(b, counts, idx);
    g = ir::Binary(b, "stablehlo.divide", g, ir::BroadcastInDim(b, c, gd, {0}));
  }
  ir::ScatterDims sd;
  sd.update_window_dims = {1};
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value r = ir::Scatter(b, ir::Full(b, ir::ConstantI(b, 0, acc), {nw, gd[1]}),
                        ir::Reshape(b, idx, {n, 1}), g, sd, "stablehlo.add");
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kEmbeddingBackward{"aten::embedding_dense_backward",
                                            &LowerEmbeddingBackward};

Tensor embedding_dense_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights,
                                int64_t padding_idx, bool scale_grad_by_freq) {
  CheckTpu("embedding_dense_backward", grad, "grad_output");
  CheckTpu("embedding_dense_backward", indices, "indices");
  const int64_t d = grad.size(-1);
  const int64_t n = indices.numel();
  if (n == 0) return at::zeros({num_weights, d}, grad.options());
  return Run1(kEmbeddingBackward, {{num_weights, padding_idx, scale_grad_by_freq}, {}, {}},
              {OperandOf(grad.reshape({n, d})), OperandOf(indices.reshape({n}))},
              TypeOf({num_weights, d}, grad.scalar_type()));
}


// ---- embedding_renorm_: rows at the indices scaled to at most max_norm ----

// ins = (weight [V, D], indices [L]); floats = (max_norm, norm_type).
VS LowerEmbeddingRenorm(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::Dims d = b.type(in[0]).dims;
  const DType ct = ir::BitWidth(out[0].dtype) < 32 ? DType::F32 : out[0].dtype;
  const int64_t v = d[0], l = b.type(in[1]).dims[0];
  const double max_norm = a.floats[0], p = a.floats[1];
  Value w = ir::Convert(b, in[0], ct);
  Value ab = ir::Unary(b, "stablehlo.abs", w);
  Value norm;
  if (std::isinf(p)) {
    norm = ir::Reduce(b, ab, ir::ConstantF(b, 0.0, ct), {1}, "stablehlo.maximum");
  } else if (p == 1) {
    norm = ir::Reduce(b, ab, ir::ConstantF(b, 0.0, ct), {1}, "stablehlo.add");
  } else {
    Value pw = ir::Binary(b, "stablehlo.power", ab, ir::Full(b, ir::ConstantF(b, p, ct), d));
    norm = ir::Reduce(b, pw, ir::ConstantF(b, 0.0, ct), {1}, "stablehlo.add");
    norm = ir::Binary(b, "stablehlo.power", norm, ir::Full(b, ir::ConstantF(b, 1.0 / p, ct), {v}));
  }
  Value touched = ir::ScatterAddAlong(b, ir::Full(b, ir::ConstantI(b, 1, DType::S64), {l}), 0,
                                      WrapIndex(b, in[1], v), v);
  Value over = ir::Binary(b, "stablehlo.and",
                          ir::Compare(b, touched, ir::Full(b, ir::ConstantI(b, 0, DType::S64), {v}), ir::Cmp::GT),
                          ir::Compare(b, norm, ir::Full(b, ir::ConstantF(b, max_norm, ct), {v}), ir::Cmp::GT));
  Value scale = ir::Binary(b, "stablehlo.divide", ir::Full(b, ir::ConstantF(b, max_norm, ct), {v}),
                           ir::Binary(b, "stablehlo.add", norm, ir::Full(b, ir::ConstantF(b, 1e-7, ct), {v})));
  scale = ir::Select(b, over, scale, ir::Full(b, ir::ConstantF(b, 1.0, ct), {v}));
  Value r = ir::Binary(b, "stablehlo.multiply", w, ir::BroadcastInDim(b, scale, d, {0}));
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kEmbeddingRenorm{"aten::embedding_renorm_", &LowerEmbeddingRenorm};

Tensor& embedding_renorm_tpu(Tensor& self, const Tensor& indices, double max_norm,
                             double norm_type) {
  CheckTpu("embedding_renorm_", self, "self");
  CheckTpu("embedding_renorm_", indices, "indices");
  TORCH_CHECK(self.dim() == 2, "embedding_renorm_: self must be 2-D");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_renorm_: expected indices of type Long or Int, got ",
              indices.scalar_type());
  if (indices.numel() == 0 || self.numel() == 0) return self;
  RunInto(kEmbeddingRenorm, {{}, {max_norm, norm_type}, {}},
          {OperandOf(self), OperandOf(indices.reshape({-1}))},
          {TypeOf(self.sizes(), self.scalar_type())}, {self});
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("embedding_renorm_", TORCH_FN(embedding_renorm_tpu));
  m.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
}

}  // namespace tpu::ops
