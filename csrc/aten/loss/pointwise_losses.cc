// Pointwise losses (mse, smooth_l1, huber, binary_cross_entropy) with their
// reductions and backward ops, and the activations that are formulas of
// their input (softplus, mish, hardswish, hardsigmoid, glu, xlogy).
//
// Each is one lowering: the inputs are broadcast to a common shape and
// converted to the compute dtype, a formula gives the elementwise value,
// and the result is reduced (none / mean / sum) or converted back.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"

namespace tpu::ops {

using at::Tensor;
using ir::Builder;
using ir::DType;
using ir::Value;
using VS = std::vector<Value>;
using TT = std::vector<ir::TensorType>;

namespace {

// ---- formula helpers (C, Add, Sub, Mul, Div: aten/formula.h) ----
Value Abs(Builder& b, Value x) { return ir::Unary(b, "stablehlo.abs", x); }
Value Sign(Builder& b, Value x) { return ir::Unary(b, "stablehlo.sign", x); }
Value Sigmoid(Builder& b, Value x) { return ir::Unary(b, "stablehlo.logistic", x); }
Value Lt(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::LT); }
Value Le(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::LE); }
Value Gt(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::GT); }
Value Clamp(Builder& b, Value x, double lo, double hi) {
  return ir::Min(b, ir::Max(b, x, C(b, lo, x)), C(b, hi, x));
}
// softplus with PyTorch's threshold: x where beta*x > threshold.
Value Softplus(Builder& b, Value x, double beta, double threshold) {
  Value bx = Mul(b, x, C(b, beta, x));
  Value soft = Div(b, ir::Unary(b, "stablehlo.log_plus_one", ir::Unary(b, "stablehlo.exponential", bx)),
                   C(b, beta, x));
  return ir::Select(b, Gt(b, bx, C(b, threshold, x)), x, soft);
}

// A formula of the (broadcast, compute-dtype) inputs and the float params.
using Formula = Value (*)(Builder&, const VS&, const std::vector<double>&);

// ints = (compute dtype, reduction, broadcast dims...); floats = params.
// reduction: 0 none (the value in the output dtype), 1 mean, 2 sum.
template <Formula F>
VS LowerPointwise(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto ct = static_cast<DType>(a.ints[0]);
  const int64_t reduction = a.ints[1];
  const ir::Dims dims(a.ints.begin() + 2, a.ints.end());
  VS xs;
  for (Value v : in) xs.push_back(ir::BroadcastTo(b, ir::Convert(b, v, ct), dims));
  Value r = F(b, xs, a.floats);
  if (reduction != at::Reduction::None) {
    ir::Dims all;
    for (size_t i = 0; i < dims.size(); ++i) all.push_back(static_cast<int64_t>(i));
    Value s = ir::Reduce(b, r, ir::ConstantI(b, 0, ct), all, "stablehlo.add");
    if (reduction == at::Reduction::Mean) s = Div(b, s, ir::CountOver(b, r, all));
    r = s;
  }
  return {ir::Reshape(b, ir::Convert(b, r, out[0].dtype), out[0].dims)};
}

// Backward formulas get (g, x, t, [w]) and scale by 1/N for a mean: the
// count comes from the broadcast x, so it follows dynamic sizes too.
Value MeanScale(Builder& b, Value v, Value x, bool mean) {
  if (!mean) return v;
  ir::Dims all;
  for (int64_t i = 0; i < b.type(x).rank(); ++i) all.push_back(i);
  return Div(b, v, ir::Full(b, ir::CountOver(b, x, all), b.type(v).dims));
}

// ---- losses (params: [0] = reduction == mean as 0/1 in backward) ----
Value Mse(Builder& b, const VS& v, const std::vector<double>&) {
  Value d = Sub(b, v[0], v[1]);
  return Mul(b, d, d);
}
Value MseGrad(Builder& b, const VS& v, const std::vector<double>& p) {
  Value d = Sub(b, v[1], v[2]);
  return MeanScale(b, Mul(b, Mul(b, C(b, 2, d), d), v[0]), v[1], p[0] != 0);
}
Value SmoothL1(Builder& b, const VS& v, const std::vector<double>& p) {
  const double beta = p[0];
  Value ad = Abs(b, Sub(b, v[0], v[1]));
  if (beta == 0) return ad;
  Value quad = Div(b, Mul(b, Mul(b, C(b, 0.5, ad), ad), ad), C(b, beta, ad));
  return ir::Select(b, Lt(b, ad, C(b, beta, ad)), quad, Sub(b, ad, C(b, 0.5 * beta, ad)));
}
Value SmoothL1Grad(Builder& b, const VS& v, const std::vector<double>& p) {
  const double beta = p[1];
  Value d = Sub(b, v[1], v[2]);
  Value r = Sign(b, d);
  if (beta != 0) r = ir::Select(b, Lt(b, Abs(b, d), C(b, beta, d)), Div(b, d, C(b, beta, d)), r);
  return MeanScale(b, Mul(b, r, v[0]), v[1], p[0] != 0);
}
Value Huber(Builder& b, const VS& v, const std::vector<double>& p) {
  const double delta = p[0];
  Value ad = Abs(b, Sub(b, v[0], v[1]));
  Value quad = Mul(b, Mul(b, C(b, 0.5, ad), ad), ad);
  Value lin = Mul(b, C(b, delta, ad), Sub(b, ad, C(b, 0.5 * delta, ad)));
  return ir::Select(b, Lt(b, ad, C(b, delta, ad)), quad, lin);
}
Value HuberGrad(Builder& b, const VS& v, const std::vector<double>& p) {
  Value d = Clamp(b, Sub(b, v[1], v[2]), -p[1], p[1]);
  return MeanScale(b, Mul(b, d, v[0]), v[1], p[0] != 0);
}
// -w (t log x + (1 - t) log(1 - x)), each log clamped at -100 as on CPU.
Value Bce(Builder& b, const VS& v, const std::vector<double>&) {
  Value x = v[0], t = v[1];
  Value lx = ir::Max(b, ir::Unary(b, "stablehlo.log", x), C(b, -100, x));
  Value l1x = ir::Max(b, ir::Unary(b, "stablehlo.log", Sub(b, C(b, 1, x), x)), C(b, -100, x));
  Value r = ir::Unary(b, "stablehlo.negate",
                      Add(b, Mul(b, t, lx), Mul(b, Sub(b, C(b, 1, t), t), l1x)));
  return v.size() > 2 ? Mul(b, r, v[2]) : r;
}
// w (x - t) / max(x (1 - x), 1e-12), as CPU.
Value BceGrad(Builder& b, const VS& v, const std::vector<double>& p) {
  Value g = v[0], x = v[1], t = v[2];
  Value denom = ir::Max(b, Mul(b, Sub(b, C(b, 1, x), x), x), C(b, 1e-12, x));
  Value r = Mul(b, Div(b, Sub(b, x, t), denom), g);
  if (v.size() > 3) r = Mul(b, r, v[3]);
  return MeanScale(b, r, x, p[0] != 0);
}

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
  return ir::Select(b, Lt(b, x, C(b, -3, x)), C(b, 0, x),
                    ir::Select(b, Le(b, x, C(b, 3, x)), mid, g));
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

constexpr lazy::Lowering kMse{"aten::mse_loss", &LowerPointwise<Mse>};
constexpr lazy::Lowering kMseGrad{"aten::mse_loss_backward", &LowerPointwise<MseGrad>};
constexpr lazy::Lowering kSmoothL1{"aten::smooth_l1_loss", &LowerPointwise<SmoothL1>};
constexpr lazy::Lowering kSmoothL1Grad{"aten::smooth_l1_loss_backward", &LowerPointwise<SmoothL1Grad>};
constexpr lazy::Lowering kHuber{"aten::huber_loss", &LowerPointwise<Huber>};
constexpr lazy::Lowering kHuberGrad{"aten::huber_loss_backward", &LowerPointwise<HuberGrad>};
constexpr lazy::Lowering kBce{"aten::binary_cross_entropy", &LowerPointwise<Bce>};
constexpr lazy::Lowering kBceGrad{"aten::binary_cross_entropy_backward", &LowerPointwise<BceGrad>};
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

// Runs a pointwise lowering: the inputs broadcast together, computed in
// the opmath type of `dtype`, reduced by `reduction`.
Tensor Pointwise(const lazy::Lowering& op, const std::vector<Tensor>& ins, std::vector<double> params,
                 int64_t reduction, at::ScalarType dtype) {
  std::vector<lazy::Operand> operands;
  std::vector<int64_t> shape;
  for (const Tensor& t : ins) {
    CheckTpu(op.name, t, "input");
    shape = shape.empty() && &t == &ins[0] ? t.sizes().vec() : at::infer_size(shape, t.sizes());
    operands.push_back(OperandOf(t));
  }
  TORCH_CHECK(at::isFloatingType(dtype), op.name, ": expected a floating point tensor, got ", dtype);
  TORCH_CHECK(reduction >= 0 && reduction <= 2, op.name, ": invalid reduction ", reduction);
  lazy::Attrs attrs{{IrCode(OpMathType(dtype)), reduction}, std::move(params), {}};
  attrs.ints.insert(attrs.ints.end(), shape.begin(), shape.end());
  const std::vector<int64_t> out = reduction == at::Reduction::None ? shape : std::vector<int64_t>{};
  return Run1(op, attrs, operands, TypeOf(out, dtype));
}

// A backward result at the broadcast shape, summed to `like`'s shape.
Tensor SumTo(const Tensor& r, const Tensor& like) {
  return r.sizes() == like.sizes() ? r : at::sum_to(r, like.sizes());
}

at::ScalarType LossType(const Tensor& x, const Tensor& t) { return at::result_type(x, t); }

Tensor mse_loss_tpu(const Tensor& x, const Tensor& t, int64_t red) {
  return Pointwise(kMse, {x, t}, {}, red, LossType(x, t));
}
Tensor& mse_loss_out_tpu(const Tensor& x, const Tensor& t, int64_t red, Tensor& out) {
  return CopyInto("mse_loss", mse_loss_tpu(x, t, red), out);
}
Tensor mse_loss_backward_tpu(const Tensor& g, const Tensor& x, const Tensor& t, int64_t red) {
  return SumTo(Pointwise(kMseGrad, {g, x, t}, {red == at::Reduction::Mean ? 1.0 : 0.0},
                         at::Reduction::None, x.scalar_type()), x);
}
Tensor smooth_l1_loss_tpu(const Tensor& x, const Tensor& t, int64_t red, double beta) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return Pointwise(kSmoothL1, {x, t}, {beta}, red, LossType(x, t));
}
Tensor& smooth_l1_loss_out_tpu(const Tensor& x, const Tensor& t, int64_t red, double beta, Tensor& out) {
  return CopyInto("smooth_l1_loss", smooth_l1_loss_tpu(x, t, red, beta), out);
}
Tensor smooth_l1_loss_backward_tpu(const Tensor& g, const Tensor& x, const Tensor& t, int64_t red,
                               double beta) {
  return SumTo(Pointwise(kSmoothL1Grad, {g, x, t}, {red == at::Reduction::Mean ? 1.0 : 0.0, beta},
                         at::Reduction::None, x.scalar_type()), x);
}
Tensor huber_loss_tpu(const Tensor& x, const Tensor& t, int64_t red, double delta) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return Pointwise(kHuber, {x, t}, {delta}, red, LossType(x, t));
}
Tensor& huber_loss_out_tpu(const Tensor& x, const Tensor& t, int64_t red, double delta, Tensor& out) {
  return CopyInto("huber_loss", huber_loss_tpu(x, t, red, delta), out);
}
Tensor huber_loss_backward_tpu(const Tensor& g, const Tensor& x, const Tensor& t, int64_t red,
                           double delta) {
  return SumTo(Pointwise(kHuberGrad, {g, x, t}, {red == at::Reduction::Mean ? 1.0 : 0.0, delta},
                         at::Reduction::None, x.scalar_type()), x);
}
Tensor binary_cross_entropy_tpu(const Tensor& x, const Tensor& t, const std::optional<Tensor>& w,
                            int64_t red) {
  TORCH_CHECK(x.sizes() == t.sizes(), "Using a target size (", t.sizes(),
              ") that is different to the input size (", x.sizes(), ") is deprecated. "
              "Please ensure they have the same size.");
  std::vector<Tensor> ins{x, t};
  if (w.has_value() && w->defined()) ins.push_back(*w);
  return Pointwise(kBce, ins, {}, red, x.scalar_type());
}
Tensor& binary_cross_entropy_out_tpu(const Tensor& x, const Tensor& t, const std::optional<Tensor>& w,
                                 int64_t red, Tensor& out) {
  return CopyInto("binary_cross_entropy", binary_cross_entropy_tpu(x, t, w, red), out);
}
Tensor binary_cross_entropy_backward_tpu(const Tensor& g, const Tensor& x, const Tensor& t,
                                     const std::optional<Tensor>& w, int64_t red) {
  std::vector<Tensor> ins{g, x, t};
  if (w.has_value() && w->defined()) ins.push_back(*w);
  return SumTo(Pointwise(kBceGrad, ins, {red == at::Reduction::Mean ? 1.0 : 0.0},
                         at::Reduction::None, x.scalar_type()), x);
}

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
  m.impl("mse_loss", TORCH_FN(mse_loss_tpu));
  m.impl("mse_loss.out", TORCH_FN(mse_loss_out_tpu));
  m.impl("mse_loss_backward", TORCH_FN(mse_loss_backward_tpu));
  m.impl("smooth_l1_loss", TORCH_FN(smooth_l1_loss_tpu));
  m.impl("smooth_l1_loss.out", TORCH_FN(smooth_l1_loss_out_tpu));
  m.impl("smooth_l1_loss_backward", TORCH_FN(smooth_l1_loss_backward_tpu));
  m.impl("huber_loss", TORCH_FN(huber_loss_tpu));
  m.impl("huber_loss.out", TORCH_FN(huber_loss_out_tpu));
  m.impl("huber_loss_backward", TORCH_FN(huber_loss_backward_tpu));
  m.impl("binary_cross_entropy", TORCH_FN(binary_cross_entropy_tpu));
  m.impl("binary_cross_entropy.out", TORCH_FN(binary_cross_entropy_out_tpu));
  m.impl("binary_cross_entropy_backward", TORCH_FN(binary_cross_entropy_backward_tpu));
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
