// mode: the most frequent value along a dim (the smallest among ties) and
// the index of its last occurrence, from a sort.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/complex.h"
#include "aten/kernel_helpers.h"
#include "aten/indexing/index_checks.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

namespace {

// ---- mode: the most frequent value along dim (the smallest among ties)
// and the index of its last occurrence in sorted order ----

// in = (x (R, n)); out = (values (R), indices (R) s64).
VS LowerMode(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType xt = b.type(in[0]);
  const int64_t R = xt.dims[0], n = xt.dims[1];
  const ir::Dims d{R, n};
  Value iota = ir::Iota(b, d, 1, DType::S64);
  ir::TensorType sv{xt.dtype, {}}, si{DType::S64, {}};
  VS sorted = ir::Sort(b, {in[0], iota}, 1, /*stable=*/true, [](Builder& rb, const VS& a) {
    return VS{ir::Compare(rb, a[0], a[1], ir::Cmp::LT)};
  });
  Value v = sorted[0], idx = sorted[1];
  auto shifted = [&](Value x, bool right, Value fill) {  // x[i - 1] or x[i + 1]
    Value f = ir::Full(b, fill, {R, 1});
    if (n == 1) return ir::Full(b, fill, d);
    return right ? ir::Concatenate(b, {f, ir::Slice(b, x, {0, 0}, {R, n - 1}, {1, 1})}, 1)
                 : ir::Concatenate(b, {ir::Slice(b, x, {0, 1}, {R, n}, {1, 1}), f}, 1);
  };
  Value first = ir::Compare(b, iota, ir::Full(b, ir::ConstantI(b, 0, DType::S64), d), ir::Cmp::EQ);
  Value last = ir::Compare(b, iota, ir::Full(b, ir::ConstantI(b, n - 1, DType::S64), d), ir::Cmp::EQ);
  Value zero_v = ir::ConstantI(b, 0, xt.dtype);
  Value start = ir::Binary(b, "stablehlo.or", first,
                           ir::Compare(b, v, shifted(v, true, zero_v), ir::Cmp::NE));
  Value end = ir::Binary(b, "stablehlo.or", last,
                         ir::Compare(b, v, shifted(v, false, zero_v), ir::Cmp::NE));
  Value start_pos = ir::CumReduce(b, ir::Select(b, start, iota, ir::Full(b, ir::ConstantI(b, 0, DType::S64), d)),
                                  ir::ConstantI(b, 0, DType::S64), 1, "stablehlo.maximum");
  Value len = Add(b, ir::Binary(b, "stablehlo.subtract", iota, start_pos),
                      ir::Full(b, ir::ConstantI(b, 1, DType::S64), d));
  len = ir::Select(b, end, len, ir::Full(b, ir::ConstantI(b, 0, DType::S64), d));
  Value pos = ir::ArgReduce(b, len, 1, /*is_max=*/true).second;  // first longest run
  Value pos2 = ir::Reshape(b, pos, {R, 1});
  Value pick = ir::Compare(b, iota, ir::BroadcastInDim(b, pos, d, {0}), ir::Cmp::EQ);
  (void)pos2;
  Value vals = ir::Reduce(b, ir::Select(b, pick, v, ir::Full(b, zero_v, d)), zero_v, {1}, "stablehlo.add");
  Value inds = ir::Reduce(b, ir::Select(b, pick, idx, ir::Full(b, ir::ConstantI(b, 0, DType::S64), d)),
                          ir::ConstantI(b, 0, DType::S64), {1}, "stablehlo.add");
  return {ir::Convert(b, vals, out[0].dtype), inds};
}
constexpr lazy::Lowering kMode{"aten::mode", &LowerMode};

std::tuple<Tensor, Tensor> mode_tpu(const Tensor& self, int64_t dim, bool keepdim) {
  CheckTpu("mode", self, "self");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK(self.dim() == 0 || self.size(d) > 0, "mode(): Expected reduction dim ", d,
              " to have non-zero size.");
  if (self.dim() == 0) return {self.clone(), at::zeros({}, TpuOptions(at::kLong))};
  Tensor x = self.movedim(d, -1);
  std::vector<int64_t> rest(x.sizes().begin(), x.sizes().end() - 1);
  const int64_t n = x.size(-1), R = c10::multiply_integers(rest);
  Tensor vals, inds;
  if (R == 0) {
    vals = EmptyTpu(rest, self.scalar_type());
    inds = EmptyTpu(rest, at::kLong);
  } else {
    auto r = Run(kMode, {}, {OperandOf(x.reshape({R, n}))},
                 {TypeOf({R}, self.scalar_type()), TypeOf({R}, at::kLong)});
    vals = r[0].reshape(rest);
    inds = r[1].reshape(rest);
  }
  if (keepdim) {
    vals = vals.unsqueeze(d);
    inds = inds.unsqueeze(d);
  }
  return {vals, inds};
}

std::tuple<Tensor&, Tensor&> mode_out_tpu(const Tensor& self, int64_t dim, bool keepdim,
                                          Tensor& values, Tensor& indices) {
  TORCH_CHECK(self.scalar_type() == values.scalar_type(), "mode(): expected scalar type ",
              self.scalar_type(), " but got ", values.scalar_type(), " for values");
  TORCH_CHECK(indices.scalar_type() == at::kLong,
              "mode(): expected scalar type Long but got ", indices.scalar_type(), " for indices");
  auto [v, i] = mode_tpu(self, dim, keepdim);
  CopyInto("mode", v, values);
  CopyInto("mode", i, indices);
  return {values, indices};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mode", TORCH_FN(mode_tpu));
  m.impl("mode.values", TORCH_FN(mode_out_tpu));
}

}  // namespace tpu::ops
