// linalg_cross: the cross product of 3-vectors along a dim.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"

namespace tpu::ops {

namespace {

// ---- linalg_cross ----

// ins = (a, b) broadcast to the output; ints = (dim). The cross product of
// the 3-vectors along dim.
VS LowerCross(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t dim = a.ints[0];
  const ir::Dims& d = out[0].dims;
  Value x = ir::BroadcastTo(b, ir::Convert(b, in[0], out[0].dtype), d);
  Value y = ir::BroadcastTo(b, ir::Convert(b, in[1], out[0].dtype), d);
  auto comp = [&](Value v, int64_t k) {
    ir::Dims start(d.size(), 0), limit = d, one(d.size(), 1);
    start[dim] = k;
    limit[dim] = k + 1;
    return ir::Slice(b, v, start, limit, one);
  };
  auto term = [&](int64_t i, int64_t j) {  // x_i y_j - x_j y_i
    return ir::Binary(b, "stablehlo.subtract", ir::Binary(b, "stablehlo.multiply", comp(x, i), comp(y, j)),
                      ir::Binary(b, "stablehlo.multiply", comp(x, j), comp(y, i)));
  };
  return {ir::Concatenate(b, {term(1, 2), term(2, 0), term(0, 1)}, dim)};
}
constexpr lazy::Lowering kCross{"aten::linalg_cross", &LowerCross};

Tensor& linalg_cross_out_tpu(const Tensor& self, const Tensor& other, int64_t dim, Tensor& out) {
  CheckTpu("linalg.cross", self, "input");
  CheckTpu("linalg.cross", other, "other");
  TORCH_CHECK(self.dim() == other.dim(), "linalg.cross: inputs must have the same number of "
              "dimensions.");
  TORCH_CHECK(self.size(dim) == 3 && other.size(dim) == 3, "linalg.cross: inputs dimension ", dim,
              " must have length 3. Got ", self.size(dim), " and ", other.size(dim));
  auto sizes = at::infer_size(self.sizes(), other.sizes());
  const int64_t d = at::maybe_wrap_dim(dim, static_cast<int64_t>(sizes.size()));
  const auto rt = at::result_type(self, other);
  PrepareOut("linalg.cross", out, sizes, rt);
  if (out.numel() == 0) return out;
  RunInto(kCross, {{d}, {}, {}}, {OperandOf(self), OperandOf(other)}, {TypeOf(sizes, rt)}, {out});
  return out;
}
Tensor linalg_cross_tpu(const Tensor& self, const Tensor& other, int64_t dim) {
  Tensor out = EmptyTpu({0}, at::result_type(self, other));
  return linalg_cross_out_tpu(self, other, dim, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_cross", TORCH_FN(linalg_cross_tpu));
  m.impl("linalg_cross.out", TORCH_FN(linalg_cross_out_tpu));
}

}  // namespace tpu::ops
