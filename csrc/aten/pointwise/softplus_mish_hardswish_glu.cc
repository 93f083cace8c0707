// Activations written as formulas of their input, with their backward ops:
// softplus, mish, hardswish, hardsigmoid, glu, and xlogy.
//
// Each is one lowering over broadcast inputs in the opmath dtype
// (aten/pointwise/broadcast_formula.h); in-place and out= variants copy the
// result into the given tensor.
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>
#include <utility>

#include "aten/pointwise/broadcast_formula.h"

namespace tpu::ops {

namespace {

using namespace broadcast_formula;

// ---- activations: v = (x) forward, (g, x) backward ----
Value SoftplusF(Builder& b, const VS& v, const std::vector<double>& p) {
  return Softplus(b, v[0], p[0], p[1]);
}
Value SoftplusGrad(Builder& b, const VS& v, const std::vector<double>& p) {
  Value g = v[0], x = v[1];
  Value bx = Mul(b, x, C(b, p[0], x));
  Value z = ir::Unary(b, "stablehlo.exponential", bx);
  return ir::Select(b, Gt(b, bx, C(b, p[1], x)), g, Mul(b, g, Div(b, z, Add(b, z, C(b, 1, z)))));
}
Value Mish(Builder& b, const VS& v, const std::vector<double>&) {
  return Mul(b, v[0], ir::Unary(b, "stablehlo.tanh", Softplus(b, v[0], 1, 20)));
}
Value MishGrad(Builder& b, const VS& v, const std::vector<double>&) {
  Value g = v[0], x = v[1];
  Value t = ir::Unary(b, "stablehlo.tanh", Softplus(b, x, 1, 20));
  Value d = Add(b, t, Mul(b, Mul(b, x, Sigmoid(b, x)), Sub(b, C(b, 1, t), Mul(b, t, t))));
  return Mul(b, g, d);
}
Value Hardswish(Builder& b, const VS& v, const std::vector<double>&) {
  Value x = v[0];
  return Div(b, Mul(b, x, Clamp(b, Add(b, x, C(b, 3, x)), 0, 6)), C(b, 6, x));
}
Value HardswishGrad(Builder& b, const VS& v, const std::vector<double>&) {
  Value g = v[0], x = v[1];
  Value mid = Mul(b, g, Add(b, Div(b, x, C(b, 3, x)), C(b, 0.5, x)));
  // at the corners as CPU: 0 at -3, the gradient itself at 3
  return ir::Select(b, Le(b, x, C(b, -3, x)), C(b, 0, x),
                    ir::Select(b, Lt(b, x, C(b, 3, x)), mid, g));
}
Value Hardsigmoid(Builder& b, const VS& v, const std::vector<double>&) {
  return Div(b, Clamp(b, Add(b, v[0], C(b, 3, v[0])), 0, 6), C(b, 6, v[0]));
}
Value HardsigmoidGrad(Builder& b, const VS& v, const std::vector<double>&) {
  Value g = v[0], x = v[1];
  Value inside = ir::Binary(b, "stablehlo.and", Gt(b, x, C(b, -3, x)), Lt(b, x, C(b, 3, x)));
  return ir::Select(b, inside, Div(b, g, C(b, 6, g)), C(b, 0, g));
}
// x * log(y), 0 where x == 0 (unless y is NaN), as CPU.
Value Xlogy(Builder& b, const VS& v, const std::vector<double>&) {
  Value x = v[0], y = v[1];
  Value r = ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::EQ), C(b, 0, x),
                       Mul(b, x, ir::Unary(b, "stablehlo.log", y)));
  return ir::Select(b, ir::Compare(b, y, y, ir::Cmp::NE), y, r);
}
// glu on the two halves (a, b) given as separate operands.
Value Glu(Builder& b, const VS& v, const std::vector<double>&) { return Mul(b, v[0], Sigmoid(b, v[1])); }
Value GluGradA(Builder& b, const VS& v, const std::vector<double>&) { return Mul(b, v[0], Sigmoid(b, v[2])); }
Value GluGradB(Builder& b, const VS& v, const std::vector<double>&) {
  Value s = Sigmoid(b, v[2]);
  return Mul(b, Mul(b, v[0], v[1]), Mul(b, s, Sub(b, C(b, 1, s), s)));
}

constexpr lazy::Lowering kSoftplus{"aten::softplus", &LowerPointwise<SoftplusF>};
constexpr lazy::Lowering kSoftplusGrad{"aten::softplus_backward", &LowerPointwise<SoftplusGrad>};
constexpr lazy::Lowering kMish{"aten::mish", &LowerPointwise<Mish>};
constexpr lazy::Lowering kMishGrad{"aten::mish_backward", &LowerPointwise<MishGrad>};
constexpr lazy::Lowering kHardswish{"aten::hardswish", &LowerPointwise<Hardswish>};
constexpr lazy::Lowering kHardswishGrad{"aten::hardswish_backward", &LowerPointwise<HardswishGrad>};
constexpr lazy::Lowering kHardsigmoid{"aten::hardsigmoid", &LowerPointwise<Hardsigmoid>};
constexpr lazy::Lowering kHardsigmoidGrad{"aten::hardsigmoid_backward", &LowerPointwise<HardsigmoidGrad>};
constexpr lazy::Lowering kXlogy{"aten::xlogy", &LowerPointwise<Xlogy>};
constexpr lazy::Lowering kGlu{"aten::glu", &LowerPointwise<Glu>};
constexpr lazy::Lowering kGluGradA{"aten::glu_backward(a)", &LowerPointwise<GluGradA>};
constexpr lazy::Lowering kGluGradB{"aten::glu_backward(b)", &LowerPointwise<GluGradB>};

Tensor Act(const lazy::Lowering& op, const Tensor& x, std::vector<double> p = {}) {
  return Pointwise(op, {x}, std::move(p), at::Reduction::None, x.scalar_type());
}
Tensor ActGrad(const lazy::Lowering& op, const Tensor& g, const Tensor& x, std::vector<double> p = {}) {
  return Pointwise(op, {g, x}, std::move(p), at::Reduction::None, x.scalar_type());
}
Tensor& InPlace(const char* op, Tensor& x, const Tensor& r) {
  TORCH_CHECK(r.sizes() == x.sizes(), op, ": result shape ", r.sizes(), " does not match ", x.sizes());
  x.copy_(r);
  return x;
}

Tensor softplus_tpu(const Tensor& x, const c10::Scalar& beta, const c10::Scalar& th) {
  return Act(kSoftplus, x, {beta.toDouble(), th.toDouble()});
}
Tensor& softplus_out_tpu(const Tensor& x, const c10::Scalar& beta, const c10::Scalar& th, Tensor& out) {
  return CopyInto("softplus", softplus_tpu(x, beta, th), out);
}
Tensor softplus_backward_tpu(const Tensor& g, const Tensor& x, const c10::Scalar& beta,
                         const c10::Scalar& th) {
  return ActGrad(kSoftplusGrad, g, x, {beta.toDouble(), th.toDouble()});
}
Tensor mish_tpu(const Tensor& x) { return Act(kMish, x); }
Tensor& mish__tpu(Tensor& x) { return InPlace("mish_", x, mish_tpu(x)); }
Tensor& mish_out_tpu(const Tensor& x, Tensor& out) { return CopyInto("mish", mish_tpu(x), out); }
Tensor mish_backward_tpu(const Tensor& g, const Tensor& x) { return ActGrad(kMishGrad, g, x); }
Tensor hardswish_tpu(const Tensor& x) { return Act(kHardswish, x); }
Tensor& hardswish__tpu(Tensor& x) { return InPlace("hardswish_", x, hardswish_tpu(x)); }
Tensor& hardswish_out_tpu(const Tensor& x, Tensor& out) { return CopyInto("hardswish", hardswish_tpu(x), out); }
Tensor hardswish_backward_tpu(const Tensor& g, const Tensor& x) { return ActGrad(kHardswishGrad, g, x); }
Tensor hardsigmoid_tpu(const Tensor& x) { return Act(kHardsigmoid, x); }
Tensor& hardsigmoid__tpu(Tensor& x) { return InPlace("hardsigmoid_", x, hardsigmoid_tpu(x)); }
Tensor& hardsigmoid_out_tpu(const Tensor& x, Tensor& out) { return CopyInto("hardsigmoid", hardsigmoid_tpu(x), out); }
Tensor hardsigmoid_backward_tpu(const Tensor& g, const Tensor& x) {
  return ActGrad(kHardsigmoidGrad, g, x);
}

at::ScalarType XlogyType(const Tensor& x, const Tensor& y) {
  auto t = at::result_type(x, y);
  return at::isIntegralType(t, true) ? at::typeMetaToScalarType(at::get_default_dtype()) : t;
}
Tensor xlogy_tpu(const Tensor& x, const Tensor& y) {
  return Pointwise(kXlogy, {x, y}, {}, at::Reduction::None, XlogyType(x, y));
}
Tensor& xlogy__tpu(Tensor& x, const Tensor& y) { return InPlace("xlogy_", x, xlogy_tpu(x, y)); }
Tensor& xlogy_out_tpu(const Tensor& x, const Tensor& y, Tensor& out) {
  return CopyInto("xlogy", xlogy_tpu(x, y), out);
}

std::pair<Tensor, Tensor> Halves(const char* op, const Tensor& x, int64_t dim) {
  TORCH_CHECK(x.dim() > 0, op, " does not support scalars because halving size must be even");
  dim = c10::maybe_wrap_dim(dim, x.dim());
  const int64_t n = x.size(dim);
  TORCH_CHECK(n % 2 == 0, "Halving dimension must be even, but dimension ", dim, " is size ", n);
  return {x.narrow(dim, 0, n / 2), x.narrow(dim, n / 2, n / 2)};
}
Tensor glu_tpu(const Tensor& x, int64_t dim) {
  auto [a, bb] = Halves("glu", x, dim);
  return Pointwise(kGlu, {a, bb}, {}, at::Reduction::None, x.scalar_type());
}
Tensor& glu_out_tpu(const Tensor& x, int64_t dim, Tensor& out) { return CopyInto("glu", glu_tpu(x, dim), out); }
Tensor glu_backward_tpu(const Tensor& g, const Tensor& x, int64_t dim) {
  auto [a, bb] = Halves("glu_backward", x, dim);
  Tensor ga = Pointwise(kGluGradA, {g, a, bb}, {}, at::Reduction::None, x.scalar_type());
  Tensor gb = Pointwise(kGluGradB, {g, a, bb}, {}, at::Reduction::None, x.scalar_type());
  return at::cat({ga, gb}, c10::maybe_wrap_dim(dim, x.dim()));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("softplus", TORCH_FN(softplus_tpu));
  m.impl("softplus.out", TORCH_FN(softplus_out_tpu));
  m.impl("softplus_backward", TORCH_FN(softplus_backward_tpu));
  m.impl("mish", TORCH_FN(mish_tpu));
  m.impl("mish_", TORCH_FN(mish__tpu));
  m.impl("mish.out", TORCH_FN(mish_out_tpu));
  m.impl("mish_backward", TORCH_FN(mish_backward_tpu));
  m.impl("hardswish", TORCH_FN(hardswish_tpu));
  m.impl("hardswish_", TORCH_FN(hardswish__tpu));
  m.impl("hardswish.out", TORCH_FN(hardswish_out_tpu));
  m.impl("hardswish_backward", TORCH_FN(hardswish_backward_tpu));
  m.impl("hardsigmoid", TORCH_FN(hardsigmoid_tpu));
  m.impl("hardsigmoid_", TORCH_FN(hardsigmoid__tpu));
  m.impl("hardsigmoid.out", TORCH_FN(hardsigmoid_out_tpu));
  m.impl("hardsigmoid_backward", TORCH_FN(hardsigmoid_backward_tpu));
  m.impl("xlogy.Tensor", TORCH_FN(xlogy_tpu));
  m.impl("xlogy_.Tensor", TORCH_FN(xlogy__tpu));
  m.impl("xlogy.OutTensor", TORCH_FN(xlogy_out_tpu));
  m.impl("glu", TORCH_FN(glu_tpu));
  m.impl("glu.out", TORCH_FN(glu_out_tpu));
  m.impl("glu_backward", TORCH_FN(glu_backward_tpu));
}

}  // namespace tpu::ops
