// Fractional max pooling (FractionalMaxPool2d/3d): windows of a fixed size
// whose start positions follow a pseudo-random sequence per plane, drawn
// from `random_samples` exactly as PyTorch's CPU kernel draws them, so the
// same samples pick the same windows. Forward and backward, one program each.
#include <ATen/ops/fractional_max_pool2d.h>
#include <ATen/ops/fractional_max_pool3d.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <limits>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/kernel_helpers.h"
#include "aten/formula.h"

namespace tpu::ops {

namespace {

// Attrs: ints = (nd, input sizes[nd], kernel[nd], output sizes[nd], sample
// slot[nd]); the slot is which of a plane's samples drives each dim (CPU:
// W then H for 2-D, T, H, W for 3-D).
struct Geometry {
  int64_t nd;
  std::vector<int64_t> in, k, out, slot;
  explicit Geometry(const lazy::Attrs& a) : nd(a.ints[0]) {
    std::vector<int64_t>* parts[] = {&in, &k, &out, &slot};
    for (int64_t p = 0; p < 4; ++p)
      parts[p]->assign(a.ints.begin() + 1 + p * nd, a.ints.begin() + 1 + (p + 1) * nd);
  }
  int64_t stride(int64_t d) const {
    int64_t s = 1;
    for (int64_t e = d + 1; e < nd; ++e) s *= in[e];
    return s;
  }
};

// ins = (x [N, C, prod(in)], samples [N, C, nd]) -> (values, indices), each
// [N, C, prod(out)]; an index is the flat position in the input plane.
VS LowerFractionalMaxPool(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const Geometry g(a);
  const ir::TensorType st = b.type(in[1]);
  const int64_t n = st.dims[0], c = st.dims[1];
  const DType ct = st.dtype == DType::F64 ? DType::F64 : DType::F32;
  ir::Dims grid{n, c};
  for (int64_t o : g.out) grid.push_back(o);
  const DType s64 = DType::S64;
  // The window starts of each dim, as PyTorch's generate_intervals:
  // int((i + u) * alpha) - int(u * alpha), the last one input - kernel.
  Value base = ir::Full(b, ir::ConstantI(b, 0, s64), grid);
  for (int64_t d = 0; d < g.nd; ++d) {
    const int64_t o = g.out[d], last = g.in[d] - g.k[d];
    Value seq;
    if (o > 1) {
      Value u = ir::Slice(b, in[1], {0, 0, g.slot[d]}, {n, c, g.slot[d] + 1}, {1, 1, 1});
      u = ir::BroadcastTo(b, ir::Convert(b, u, ct), {n, c, o});
      // alpha in the samples' own dtype, as the CPU kernel computes it.
      Value alpha = Div(b, ir::ConstantF(b, static_cast<double>(last), st.dtype),
                        ir::ConstantF(b, static_cast<double>(o - 1), st.dtype));
      alpha = ir::Full(b, ir::Convert(b, alpha, ct), {n, c, o});
      Value i = ir::Iota(b, {n, c, o}, 2, ct);
      Value hi = ir::Convert(b, ir::Convert(b, Mul(b, Add(b, i, u), alpha), DType::S32), s64);
      Value lo = ir::Convert(b, ir::Convert(b, Mul(b, u, alpha), DType::S32), s64);
      seq = Sub(b, hi, lo);
      Value is_last = ir::Compare(b, ir::Iota(b, {n, c, o}, 2, s64),
                                  ir::Full(b, ir::ConstantI(b, o - 1, s64), {n, c, o}), ir::Cmp::EQ);
      seq = ir::Select(b, is_last, ir::Full(b, ir::ConstantI(b, last, s64), {n, c, o}), seq);
    } else {
      seq = ir::Full(b, ir::ConstantI(b, last, s64), {n, c, o});
    }
    seq = Mul(b, seq, ir::Full(b, ir::ConstantI(b, g.stride(d), s64), {n, c, o}));
    base = Add(b, base, ir::BroadcastInDim(b, seq, grid, {0, 1, 2 + d}));
  }
  const int64_t m = out[0].dims[2];
  base = ir::Reshape(b, base, {n, c, m});
  const ir::TensorType xt = b.type(in[0]);
  const int64_t plane = xt.dims[2];
  Value flat = ir::Reshape(b, in[0], {n * c * plane});
  // Each plane's first element in the flat input.
  Value row = Add(b, Mul(b, ir::Iota(b, {n, c, m}, 0, s64),
                         ir::Full(b, ir::ConstantI(b, c * plane, s64), {n, c, m})),
                  Mul(b, ir::Iota(b, {n, c, m}, 1, s64),
                      ir::Full(b, ir::ConstantI(b, plane, s64), {n, c, m})));
  Value best = ir::Full(b, ir::MinValue(b, xt.dtype), {n, c, m});
  Value best_i = base;
  // Every offset inside the window, in row-major order; the first strict
  // maximum wins, and a NaN wins over anything before it (as on CPU).
  std::vector<int64_t> off(g.nd, 0);
  while (true) {
    int64_t delta = 0;
    for (int64_t d = 0; d < g.nd; ++d) delta += off[d] * g.stride(d);
    Value pos = Add(b, base, ir::Full(b, ir::ConstantI(b, delta, s64), {n, c, m}));
    Value v = ir::Take(b, flat, Add(b, row, pos));
    Value take = ir::Binary(b, "stablehlo.or", ir::Compare(b, v, best, ir::Cmp::GT),
                            ir::Compare(b, v, v, ir::Cmp::NE));
    best = ir::Select(b, take, v, best);
    best_i = ir::Select(b, take, pos, best_i);
    int64_t d = g.nd - 1;
    while (d >= 0 && ++off[d] == g.k[d]) off[d--] = 0;
    if (d < 0) break;
  }
  return {best, best_i};
}
constexpr lazy::Lowering kFractionalMaxPool{"aten::fractional_max_pool", &LowerFractionalMaxPool};

// ins = (grad [N, C, prod(out)], indices [N, C, prod(out)]); ints = (plane
// size) -> grad_input [N, C, plane]: each gradient added at its argmax.
VS LowerFractionalMaxPoolBackward(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType dt = b.type(in[0]).dtype;
  const DType ct = dt == DType::BF16 || dt == DType::F16 ? DType::F32 : dt;
  const ir::TensorType gt = b.type(in[0]);
  const int64_t planes = gt.dims[1], m = gt.dims[2], plane = a.ints[0];
  const DType s64 = DType::S64;
  Value row = Mul(b, ir::Iota(b, {planes, m}, 0, s64),
                  ir::Full(b, ir::ConstantI(b, plane, s64), {planes, m}));
  Value idx = ir::Reshape(b, Add(b, row, ir::Reshape(b, in[1], {planes, m})), {planes * m});
  Value g = ir::Reshape(b, ir::Convert(b, in[0], ct), {planes * m});
  g = ir::ScatterAddAlong(b, g, 0, idx, planes * plane);
  return {ir::Convert(b, ir::Reshape(b, g, out[0].dims), out[0].dtype)};
}
constexpr lazy::Lowering kFractionalMaxPoolBackward{"aten::fractional_max_pool_backward",
                                                    &LowerFractionalMaxPoolBackward};

std::tuple<Tensor, Tensor> FractionalMaxPool(const char* op, const Tensor& self, int64_t nd,
                                             at::IntArrayRef k, at::IntArrayRef o,
                                             const Tensor& samples, at::IntArrayRef out_sizes) {
  CheckTpu(op, self, "self");
  CheckTpu(op, samples, "random_samples");
  const bool batched = self.dim() == nd + 2;
  Tensor x = batched ? self : self.unsqueeze(0);
  const int64_t n = x.size(0), c = x.size(1);
  TORCH_CHECK(samples.dim() == 3 && samples.size(0) == n && samples.size(1) == c &&
                  samples.size(2) == nd,
              op, "(): expected random_samples of size [", n, ", ", c, ", ", nd, "], got ",
              samples.sizes());
  TORCH_CHECK(samples.scalar_type() == self.scalar_type(), op,
              "(): expected random_samples to have the dtype of the input, ", self.scalar_type(),
              ", got ", samples.scalar_type());
  Tensor values = EmptyTpu(out_sizes, self.scalar_type());
  Tensor indices = EmptyTpu(out_sizes, at::kLong);
  if (values.numel() == 0) return {values, indices};
  std::vector<int64_t> ints{nd};
  int64_t plane = 1, m = 1;
  for (int64_t d = 0; d < nd; ++d) ints.push_back(x.size(2 + d)), plane *= x.size(2 + d);
  for (int64_t d = 0; d < nd; ++d) ints.push_back(k[d]);
  for (int64_t d = 0; d < nd; ++d) ints.push_back(o[d]), m *= o[d];
  for (int64_t d = 0; d < nd; ++d) ints.push_back(nd == 2 ? 1 - d : d);
  auto r = Run(kFractionalMaxPool, {ints, {}, {}},
               Operands(OperandOf(x.reshape({n, c, plane})), OperandOf(samples)),
               {TypeOf({n, c, m}, self.scalar_type()), TypeOf({n, c, m}, at::kLong)});
  return {r[0].view(out_sizes), r[1].view(out_sizes)};
}

Tensor FractionalMaxPoolBackward(const char* op, const Tensor& grad, const Tensor& self,
                                 int64_t nd, const Tensor& indices) {
  CheckTpu(op, grad, "grad_output");
  CheckTpu(op, indices, "indices");
  TORCH_CHECK(grad.sizes() == indices.sizes(), op, "(): grad_output ", grad.sizes(),
              " and indices ", indices.sizes(), " must have the same size");
  const int64_t lead = self.dim() - nd;  // 1 (C) or 2 (N, C)
  int64_t planes = 1, plane = 1, m = 1;
  for (int64_t d = 0; d < self.dim(); ++d) (d < lead ? planes : plane) *= self.size(d);
  for (int64_t d = lead; d < grad.dim(); ++d) m *= grad.size(d);
  if (self.numel() == 0) return at::zeros_like(self);
  if (grad.numel() == 0) return at::zeros_like(self);
  Tensor r = Run1(kFractionalMaxPoolBackward, {{plane}, {}, {}},
                  Operands(OperandOf(grad.reshape({1, planes, m})),
                           OperandOf(indices.reshape({1, planes, m}))),
                  TypeOf({1, planes, plane}, grad.scalar_type()));
  return r.view(self.sizes());
}

std::tuple<Tensor, Tensor> fmp2d(const Tensor& self, at::IntArrayRef k, at::IntArrayRef o,
                                 const Tensor& samples) {
  auto meta = at::fractional_max_pool2d(MetaOf(self), k, o, MetaOf(samples));
  return FractionalMaxPool("fractional_max_pool2d", self, 2, k, o, samples,
                           std::get<0>(meta).sizes());
}
std::tuple<Tensor, Tensor> fmp3d(const Tensor& self, at::IntArrayRef k, at::IntArrayRef o,
                                 const Tensor& samples) {
  auto meta = at::fractional_max_pool3d(MetaOf(self), k, o, MetaOf(samples));
  return FractionalMaxPool("fractional_max_pool3d", self, 3, k, o, samples,
                           std::get<0>(meta).sizes());
}
// The .output variants: the functional result copied into out and indices.
template <std::tuple<Tensor, Tensor> (*F)(const Tensor&, at::IntArrayRef, at::IntArrayRef,
                                          const Tensor&)>
std::tuple<Tensor&, Tensor&> fmp_out(const Tensor& self, at::IntArrayRef k, at::IntArrayRef o,
                                     const Tensor& samples, Tensor& out, Tensor& idx) {
  auto [v, i] = F(self, k, o, samples);
  PrepareOut("fractional_max_pool", out, v.sizes(), v.scalar_type());
  PrepareOut("fractional_max_pool", idx, i.sizes(), at::kLong);
  out.copy_(v);
  idx.copy_(i);
  return {out, idx};
}
Tensor fmp2d_backward(const Tensor& grad, const Tensor& self, at::IntArrayRef, at::IntArrayRef,
                      const Tensor& indices) {
  return FractionalMaxPoolBackward("fractional_max_pool2d_backward", grad, self, 2, indices);
}
Tensor fmp3d_backward(const Tensor& grad, const Tensor& self, at::IntArrayRef, at::IntArrayRef,
                      const Tensor& indices) {
  return FractionalMaxPoolBackward("fractional_max_pool3d_backward", grad, self, 3, indices);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fractional_max_pool2d", TORCH_FN(fmp2d));
  m.impl("fractional_max_pool2d.output", TORCH_FN(fmp_out<fmp2d>));
  m.impl("fractional_max_pool3d", TORCH_FN(fmp3d));
  m.impl("fractional_max_pool3d.output", TORCH_FN(fmp_out<fmp3d>));
  m.impl("fractional_max_pool2d_backward", TORCH_FN(fmp2d_backward));
  m.impl("fractional_max_pool3d_backward", TORCH_FN(fmp3d_backward));
}

}  // namespace tpu::ops
