// More activations and elementwise functions, with their backward ops:
// softshrink, hardshrink, threshold, logit, _prelu_kernel; sinc, frac, erfc,
// nan_to_num.
//
// Each runs in the opmath dtype (float32 for half types); parameters that
// change the program (beta, lambd, ...) are Attrs floats.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <string_view>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"

namespace tpu::ops {

namespace {

Value Lt(Builder& b, Value x, double v) { return ir::Compare(b, x, C(b, v, x), ir::Cmp::LT); }
Value Le(Builder& b, Value x, double v) { return ir::Compare(b, x, C(b, v, x), ir::Cmp::LE); }
Value Gt(Builder& b, Value x, double v) { return ir::Compare(b, x, C(b, v, x), ir::Cmp::GT); }

// ---- forward: ins = (x); ints = (compute dtype); floats = parameters ----

using ActFn = Value (*)(Builder&, Value, const lazy::Attrs&);
template <ActFn F>
VS LowerAct(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  Value x = ir::Convert(b, in[0], static_cast<DType>(a.ints[0]));
  return {ir::Convert(b, F(b, x, a), out[0].dtype)};
}

Value Softshrink(Builder& b, Value x, const lazy::Attrs& a) {
  const double l = a.floats[0];
  Value r = ir::Select(b, Lt(b, x, -l), Add(b, x, C(b, l, x)), C(b, 0, x));
  r = ir::Select(b, Gt(b, x, l), Sub(b, x, C(b, l, x)), r);
  return ir::Select(b, ir::Compare(b, x, x, ir::Cmp::NE), x, r);  // NaN stays NaN
}
Value Hardshrink(Builder& b, Value x, const lazy::Attrs& a) {
  const double l = a.floats[0];
  Value keep = ir::Binary(b, "stablehlo.or", Lt(b, x, -l), Gt(b, x, l));
  keep = ir::Binary(b, "stablehlo.or", keep, ir::Compare(b, x, x, ir::Cmp::NE));
  return ir::Select(b, keep, x, C(b, 0, x));
}
// floats = (threshold, value)
Value Threshold(Builder& b, Value x, const lazy::Attrs& a) {
  return ir::Select(b, Le(b, x, a.floats[0]), C(b, a.floats[1], x), x);
}
// floats = (eps or -1): log(z / (1 - z)) with z clamped to [eps, 1 - eps].
Value Logit(Builder& b, Value x, const lazy::Attrs& a) {
  Value z = x;
  if (a.floats[0] >= 0)
    z = ir::Min(b, ir::Max(b, x, C(b, a.floats[0], x)), C(b, 1 - a.floats[0], x));
  return ir::Unary(b, "stablehlo.log", Div(b, z, Sub(b, C(b, 1, z), z)));
}
Value Sinc(Builder& b, Value x, const lazy::Attrs&) {
  Value px = Mul(b, x, C(b, M_PI, x));
  Value r = Div(b, ir::Unary(b, "stablehlo.sine", px), px);
  return ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::EQ), C(b, 1, x), r);
}
Value Frac(Builder& b, Value x, const lazy::Attrs&) {
  Value t = ir::Select(b, Lt(b, x, 0), ir::Unary(b, "stablehlo.ceil", x),
                       ir::Unary(b, "stablehlo.floor", x));
  return Sub(b, x, t);
}
Value Erfc(Builder& b, Value x, const lazy::Attrs&) { return b.Op1("chlo.erfc", {x}, b.type(x)); }
// floats = (nan, posinf, neginf)
Value NanToNum(Builder& b, Value x, const lazy::Attrs& a) {
  const ir::TensorType t = b.type(x);
  Value r = ir::Select(b, ir::Compare(b, x, x, ir::Cmp::NE), C(b, a.floats[0], x), x);
  r = ir::Select(b, ir::Compare(b, x, ir::Full(b, ir::MaxValue(b, t.dtype), t.dims), ir::Cmp::EQ),
                 C(b, a.floats[1], x), r);
  return ir::Select(b, ir::Compare(b, x, ir::Full(b, ir::MinValue(b, t.dtype), t.dims), ir::Cmp::EQ),
                    C(b, a.floats[2], x), r);
}

constexpr lazy::Lowering kSoftshrink{"aten::softshrink", &LowerAct<Softshrink>};
constexpr lazy::Lowering kHardshrink{"aten::hardshrink", &LowerAct<Hardshrink>};
constexpr lazy::Lowering kThreshold{"aten::threshold", &LowerAct<Threshold>};
constexpr lazy::Lowering kLogit{"aten::logit", &LowerAct<Logit>};
constexpr lazy::Lowering kSinc{"aten::sinc", &LowerAct<Sinc>};
constexpr lazy::Lowering kFrac{"aten::frac", &LowerAct<Frac>};
constexpr lazy::Lowering kErfc{"aten::erfc", &LowerAct<Erfc>};
constexpr lazy::Lowering kNanToNum{"aten::nan_to_num", &LowerAct<NanToNum>};

// ---- backward: ins = (grad, x); ints = (compute dtype); floats as forward ----

using ActGradFn = Value (*)(Builder&, Value g, Value x, const lazy::Attrs&);
template <ActGradFn F>
VS LowerActGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto ct = static_cast<DType>(a.ints[0]);
  Value g = ir::BroadcastTo(b, ir::Convert(b, in[0], ct), out[0].dims);
  Value x = ir::BroadcastTo(b, ir::Convert(b, in[1], ct), out[0].dims);
  return {ir::Convert(b, F(b, g, x, a), out[0].dtype)};
}

Value ShrinkGrad(Builder& b, Value g, Value x, const lazy::Attrs& a) {
  const double l = a.floats[0];
  Value keep = ir::Binary(b, "stablehlo.or", Lt(b, x, -l), Gt(b, x, l));
  return ir::Select(b, keep, g, C(b, 0, g));
}
Value LogitGrad(Builder& b, Value g, Value x, const lazy::Attrs& a) {
  Value r = Div(b, g, Mul(b, x, Sub(b, C(b, 1, x), x)));
  if (a.floats[0] >= 0) {
    Value out = ir::Binary(b, "stablehlo.or", Lt(b, x, a.floats[0]), Gt(b, x, 1 - a.floats[0]));
    r = ir::Select(b, out, C(b, 0, x), r);
  }
  return r;
}
constexpr lazy::Lowering kShrinkGrad{"aten::shrink_backward", &LowerActGrad<ShrinkGrad>};
constexpr lazy::Lowering kLogitGrad{"aten::logit_backward", &LowerActGrad<LogitGrad>};

// ---- kernels ----

// sinc also takes complex inputs, as on CPU.
at::ScalarType FloatResult(const char* op, const Tensor& x, bool int_to_float) {
  CheckTpu(op, x, "self");
  at::ScalarType t = x.scalar_type();
  if (int_to_float && at::isIntegralType(t, /*includeBool=*/true))
    return at::typeMetaToScalarType(at::get_default_dtype());
  TORCH_CHECK(at::isFloatingType(t) || (at::isComplexType(t) && std::string_view(op) == "sinc"),
              "\"", op, "\" not implemented for '", c10::toString(t), "'");
  return t;
}

// fn(x) into a new tensor (dst null), in place (dst == &x) or into out=.
Tensor Act(const lazy::Lowering& op, const char* name, const Tensor& x, std::vector<double> params,
           const Tensor* dst, bool int_to_float = false) {
  const auto rt = FloatResult(name, x, int_to_float);
  const lazy::Attrs attrs{{IrCode(OpMathType(rt))}, std::move(params), {}};
  if (!dst) return RunElementwise(op, attrs, Operands(OperandOf(x)), TypeOf(x.sizes(), rt), {&x});
  if (dst->is_same(x)) {
    TORCH_CHECK(rt == x.scalar_type(), name, ": result type ", rt,
                " can't be cast to the desired output type ", x.scalar_type());
  } else {
    PrepareOut(name, *dst, x.sizes(), rt);
  }
  RunInto(op, attrs, Operands(OperandOf(x)), {TypeOf(x.sizes(), rt)}, {*dst});
  return *dst;
}

Tensor ActGrad(const lazy::Lowering& op, const char* name, const Tensor& g, const Tensor& x,
               std::vector<double> params) {
  CheckTpu(name, g, "grad_output");
  CheckTpu(name, x, "self");
  const auto rt = at::result_type(g, x);
  auto sizes = at::infer_size(g.sizes(), x.sizes());
  return Run1(op, {{IrCode(OpMathType(rt))}, std::move(params), {}}, {OperandOf(g), OperandOf(x)},
              TypeOf(sizes, rt));
}

#define TPU_ACT3(name, op, params, i2f)                                                       \
  Tensor name##_tpu(const Tensor& x) { return Act(op, #name, x, params, nullptr, i2f); }       \
  Tensor& name##__tpu(Tensor& x) {                                                            \
    Act(op, #name, x, params, &x, i2f);                                                        \
    return x;                                                                                  \
  }                                                                                            \
  Tensor& name##_out_tpu(const Tensor& x, Tensor& o) {                                        \
    Act(op, #name, x, params, &o, i2f);                                                        \
    return o;                                                                                  \
  }
TPU_ACT3(sinc, kSinc, {}, true)
TPU_ACT3(frac, kFrac, {}, false)
TPU_ACT3(erfc, kErfc, {}, true)
#undef TPU_ACT3

void CheckLambd(const char* op, double l) {
  TORCH_CHECK(l >= 0, op, " lambda must be greater or equal to 0, but found to be ", l, ".");
}
// softshrink's lambda must fit the input's dtype (CPU's check and message).
void CheckSoftshrinkLambd(const Tensor& x, double l) {
  double top = std::numeric_limits<double>::infinity();
  switch (x.scalar_type()) {
    case at::kHalf: top = 65504.0; break;
    case at::kBFloat16: top = static_cast<double>(std::numeric_limits<c10::BFloat16>::max()); break;
    case at::kFloat: top = static_cast<double>(std::numeric_limits<float>::max()); break;
    case at::kDouble: top = std::numeric_limits<double>::max(); break;
    default: break;
  }
  TORCH_CHECK(l >= 0 && l <= top, "lambda must be in range [0, ", top, "] for input dtype ",
              x.scalar_type(), ", but found ", l);
}
Tensor softshrink_tpu(const Tensor& x, const c10::Scalar& l) {
  CheckSoftshrinkLambd(x, l.toDouble());
  return Act(kSoftshrink, "softshrink", x, {l.toDouble()}, nullptr);
}
Tensor& softshrink_out_tpu(const Tensor& x, const c10::Scalar& l, Tensor& o) {
  CheckSoftshrinkLambd(x, l.toDouble());
  Act(kSoftshrink, "softshrink", x, {l.toDouble()}, &o);
  return o;
}
Tensor hardshrink_tpu(const Tensor& x, const c10::Scalar& l) {
  return Act(kHardshrink, "hardshrink", x, {l.toDouble()}, nullptr);
}
Tensor& hardshrink_out_tpu(const Tensor& x, const c10::Scalar& l, Tensor& o) {
  Act(kHardshrink, "hardshrink", x, {l.toDouble()}, &o);
  return o;
}
Tensor shrink_backward_tpu(const Tensor& g, const Tensor& x, const c10::Scalar& l) {
  return ActGrad(kShrinkGrad, "shrink_backward", g, x, {l.toDouble()});
}

Tensor ThresholdAny(const Tensor& x, const c10::Scalar& th, const c10::Scalar& v,
                    const Tensor* dst) {
  CheckTpu("threshold", x, "self");
  const auto rt = x.scalar_type();
  const lazy::Attrs attrs{{IrCode(OpMathType(rt))}, {th.toDouble(), v.toDouble()}, {}};
  if (!dst) return RunElementwise(kThreshold, attrs, {OperandOf(x)}, TypeOf(x.sizes(), rt), {&x});
  if (!dst->is_same(x)) PrepareOut("threshold", *dst, x.sizes(), rt);
  // in place on an expanded tensor is fine, as on CPU: threshold is idempotent
  RunInto(kThreshold, attrs, {OperandOf(x)}, {TypeOf(x.sizes(), rt)}, {*dst},
          /*allow_overlap=*/dst->is_same(x));
  return *dst;
}
Tensor threshold_tpu(const Tensor& x, const c10::Scalar& th, const c10::Scalar& v) {
  return ThresholdAny(x, th, v, nullptr);
}
Tensor& threshold__tpu(Tensor& x, const c10::Scalar& th, const c10::Scalar& v) {
  ThresholdAny(x, th, v, &x);
  return x;
}
Tensor& threshold_out_tpu(const Tensor& x, const c10::Scalar& th, const c10::Scalar& v,
                          Tensor& o) {
  ThresholdAny(x, th, v, &o);
  return o;
}

std::vector<double> Eps(std::optional<double> eps) { return {eps.has_value() ? *eps : -1.0}; }
Tensor logit_tpu(const Tensor& x, std::optional<double> eps) {
  return Act(kLogit, "logit", x, Eps(eps), nullptr, true);
}
Tensor& logit__tpu(Tensor& x, std::optional<double> eps) {
  Act(kLogit, "logit", x, Eps(eps), &x, true);
  return x;
}
Tensor& logit_out_tpu(const Tensor& x, std::optional<double> eps, Tensor& o) {
  Act(kLogit, "logit", x, Eps(eps), &o, true);
  return o;
}
Tensor logit_backward_tpu(const Tensor& g, const Tensor& x, std::optional<double> eps) {
  return ActGrad(kLogitGrad, "logit_backward", g, x, Eps(eps));
}

std::vector<double> NanToNumParams(at::ScalarType t, std::optional<double> nan,
                                   std::optional<double> posinf, std::optional<double> neginf) {
  double hi = std::numeric_limits<float>::max(), lo = std::numeric_limits<float>::lowest();
  if (t == at::kDouble) {
    hi = std::numeric_limits<double>::max();
    lo = std::numeric_limits<double>::lowest();
  } else if (t == at::kHalf) {
    hi = 65504.0;
    lo = -65504.0;
  } else if (t == at::kBFloat16) {
    hi = 3.3895313892515355e38;
    lo = -3.3895313892515355e38;
  }
  return {nan.value_or(0.0), posinf.value_or(hi), neginf.value_or(lo)};
}
Tensor NanToNum(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                std::optional<double> neginf, const Tensor* dst) {
  CheckTpu("nan_to_num", x, "self");
  if (!at::isFloatingType(x.scalar_type())) {  // integers have no NaN or inf
    if (!dst) return x.clone();
    if (!dst->is_same(x)) {
      PrepareOut("nan_to_num", *dst, x.sizes(), x.scalar_type());
      dst->copy_(x);
    }
    return *dst;
  }
  // Computed in the tensor's own dtype, so its infinities are recognized.
  const auto rt = x.scalar_type();
  const lazy::Attrs attrs{{IrCode(rt)}, NanToNumParams(rt, nan, posinf, neginf), {}};
  if (!dst) return Run1(kNanToNum, attrs, {OperandOf(x)}, TypeOf(x.sizes(), rt));
  if (!dst->is_same(x)) PrepareOut("nan_to_num", *dst, x.sizes(), rt);
  RunInto(kNanToNum, attrs, {OperandOf(x)}, {TypeOf(x.sizes(), rt)}, {*dst});
  return *dst;
}
Tensor nan_to_num_tpu(const Tensor& x, std::optional<double> n, std::optional<double> p,
                      std::optional<double> m) {
  return NanToNum(x, n, p, m, nullptr);
}
Tensor& nan_to_num__tpu(Tensor& x, std::optional<double> n, std::optional<double> p,
                        std::optional<double> m) {
  NanToNum(x, n, p, m, &x);
  return x;
}
Tensor& nan_to_num_out_tpu(const Tensor& x, std::optional<double> n, std::optional<double> p,
                           std::optional<double> m, Tensor& o) {
  NanToNum(x, n, p, m, &o);
  return o;
}

// ---- _prelu_kernel: x where x > 0, else weight * x (weight broadcast) ----

// ins = (x, w); ints = (compute dtype)
VS LowerPrelu(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto ct = static_cast<DType>(a.ints[0]);
  Value x = ir::BroadcastTo(b, ir::Convert(b, in[0], ct), out[0].dims);
  Value w = ir::BroadcastTo(b, ir::Convert(b, in[1], ct), out[0].dims);
  return {ir::Convert(b, ir::Select(b, Gt(b, x, 0), x, Mul(b, w, x)), out[0].dtype)};
}
constexpr lazy::Lowering kPrelu{"aten::_prelu_kernel", &LowerPrelu};

// ins = (grad, x, w); out = (grad_input, grad_weight), both broadcast-shaped.
VS LowerPreluGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto ct = static_cast<DType>(a.ints[0]);
  auto bc = [&](Value v) { return ir::BroadcastTo(b, ir::Convert(b, v, ct), out[0].dims); };
  Value g = bc(in[0]), x = bc(in[1]), w = bc(in[2]);
  Value pos = Gt(b, x, 0);
  Value gi = ir::Select(b, pos, g, Mul(b, w, g));
  Value gw = ir::Select(b, pos, C(b, 0, g), Mul(b, x, g));
  return {ir::Convert(b, gi, out[0].dtype), ir::Convert(b, gw, out[1].dtype)};
}
constexpr lazy::Lowering kPreluGrad{"aten::_prelu_kernel_backward", &LowerPreluGrad};

Tensor prelu_kernel_tpu(const Tensor& x, const Tensor& w) {
  CheckTpu("_prelu_kernel", x, "self");
  CheckTpu("_prelu_kernel", w, "weight");
  const auto rt = at::result_type(x, w);
  auto sizes = at::infer_size(x.sizes(), w.sizes());
  return Run1(kPrelu, {{IrCode(OpMathType(rt))}, {}, {}}, {OperandOf(x), OperandOf(w)},
              TypeOf(sizes, rt));
}
std::tuple<Tensor, Tensor> prelu_kernel_backward_tpu(const Tensor& g, const Tensor& x,
                                                     const Tensor& w) {
  CheckTpu("_prelu_kernel_backward", g, "grad_output");
  const auto rt = at::result_type(x, w);
  auto sizes = at::infer_size(x.sizes(), w.sizes());
  auto r = Run(kPreluGrad, {{IrCode(OpMathType(rt))}, {}, {}},
               {OperandOf(g), OperandOf(x), OperandOf(w)},
               {TypeOf(sizes, x.scalar_type()), TypeOf(sizes, w.scalar_type())});
  return {r[0], r[1]};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define REG3(name)                                  \
  m.impl(#name, TORCH_FN(name##_tpu));              \
  m.impl(#name "_", TORCH_FN(name##__tpu));         \
  m.impl(#name ".out", TORCH_FN(name##_out_tpu));
  REG3(sinc) REG3(frac) REG3(erfc)
  REG3(logit) REG3(threshold) REG3(nan_to_num)
#undef REG3
  m.impl("softshrink", TORCH_FN(softshrink_tpu));
  m.impl("softshrink.out", TORCH_FN(softshrink_out_tpu));
  m.impl("softshrink_backward", TORCH_FN(shrink_backward_tpu));
  m.impl("hardshrink", TORCH_FN(hardshrink_tpu));
  m.impl("hardshrink.out", TORCH_FN(hardshrink_out_tpu));
  m.impl("hardshrink_backward", TORCH_FN(shrink_backward_tpu));
  m.impl("logit_backward", TORCH_FN(logit_backward_tpu));
  m.impl("_prelu_kernel", TORCH_FN(prelu_kernel_tpu));
  m.impl("_prelu_kernel_backward", TORCH_FN(prelu_kernel_backward_tpu));
}

}  // namespace tpu::ops
