// Pointwise losses (mse, smooth_l1, huber, binary_cross_entropy) with their
// reductions and backward ops.
//
// Each is one lowering (aten/pointwise/broadcast_formula.h): the inputs are
// broadcast to a common shape and converted to the compute dtype, a formula
// gives the elementwise value, and the result is reduced (none / mean / sum)
// or converted back.
#include <torch/library.h>

#include <cmath>

#include "aten/pointwise/broadcast_formula.h"

namespace tpu::ops {

namespace {

using namespace broadcast_formula;

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

constexpr lazy::Lowering kMse{"aten::mse_loss", &LowerPointwise<Mse>};
constexpr lazy::Lowering kMseGrad{"aten::mse_loss_backward", &LowerPointwise<MseGrad>};
constexpr lazy::Lowering kSmoothL1{"aten::smooth_l1_loss", &LowerPointwise<SmoothL1>};
constexpr lazy::Lowering kSmoothL1Grad{"aten::smooth_l1_loss_backward", &LowerPointwise<SmoothL1Grad>};
constexpr lazy::Lowering kHuber{"aten::huber_loss", &LowerPointwise<Huber>};
constexpr lazy::Lowering kHuberGrad{"aten::huber_loss_backward", &LowerPointwise<HuberGrad>};
constexpr lazy::Lowering kBce{"aten::binary_cross_entropy", &LowerPointwise<Bce>};
constexpr lazy::Lowering kBceGrad{"aten::binary_cross_entropy_backward", &LowerPointwise<BceGrad>};

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
}

}  // namespace tpu::ops
