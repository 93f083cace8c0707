#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/result_type.h>
// Unary math and activations with their backward ops.
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/complex.h"
#include "aten/formula.h"
#include "aten/pointwise/pointwise.h"

namespace tpu::ops {

namespace {


// ints[0] = compute dtype. The op runs in the compute dtype (float32 for
// half types, as PyTorch's opmath) and is converted to the result dtype.
using UnFn = Value (*)(Builder&, Value);
template <UnFn F>
VS LowerUnary(Builder& b, const VS& in, const lazy::Attrs& attrs, const TT& out) {
  const auto ct = static_cast<DType>(attrs.ints[0]);
  return {ir::Convert(b, F(b, ir::Convert(b, in[0], ct)), out[0].dtype)};
}

Value Neg(Builder& b, Value x) { return ir::Unary(b, "stablehlo.negate", x); }
Value Abs(Builder& b, Value x) {  // XLA's abs takes signed types only
  const DType t = b.type(x).dtype;
  return ir::IsUnsigned(t) || t == DType::PRED ? x : ir::Unary(b, "stablehlo.abs", x);
}
Value Exp(Builder& b, Value x) { return ir::Unary(b, "stablehlo.exponential", x); }
Value Expm1(Builder& b, Value x) { return ir::Unary(b, "stablehlo.exponential_minus_one", x); }
Value Log(Builder& b, Value x) { return ir::Unary(b, "stablehlo.log", x); }
Value Log1p(Builder& b, Value x) { return ir::Unary(b, "stablehlo.log_plus_one", x); }
Value Log2(Builder& b, Value x) {
  return ir::Binary(b, "stablehlo.divide", Log(b, x), C(b, std::log(2.0), x));
}
Value Log10(Builder& b, Value x) {
  return ir::Binary(b, "stablehlo.divide", Log(b, x), C(b, std::log(10.0), x));
}
Value Sqrt(Builder& b, Value x) { return ir::Unary(b, "stablehlo.sqrt", x); }
Value Rsqrt(Builder& b, Value x) { return ir::Unary(b, "stablehlo.rsqrt", x); }
Value Reciprocal(Builder& b, Value x) { return ir::Binary(b, "stablehlo.divide", C(b, 1, x), x); }
Value Tanh(Builder& b, Value x) { return ir::Unary(b, "stablehlo.tanh", x); }
Value Sigmoid(Builder& b, Value x) { return ir::Unary(b, "stablehlo.logistic", x); }
Value Sin(Builder& b, Value x) { return ir::Unary(b, "stablehlo.sine", x); }
Value Cos(Builder& b, Value x) { return ir::Unary(b, "stablehlo.cosine", x); }
Value Floor(Builder& b, Value x) {
  return ir::IsFloat(b.type(x).dtype) ? ir::Unary(b, "stablehlo.floor", x) : x;
}
Value Ceil(Builder& b, Value x) {
  return ir::IsFloat(b.type(x).dtype) ? ir::Unary(b, "stablehlo.ceil", x) : x;
}
Value Round(Builder& b, Value x) {
  return ir::IsFloat(b.type(x).dtype) ? ir::Unary(b, "stablehlo.round_nearest_even", x) : x;
}
Value Trunc(Builder& b, Value x) {
  if (!ir::IsFloat(b.type(x).dtype)) return x;
  return ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::LT),
                    ir::Unary(b, "stablehlo.ceil", x), ir::Unary(b, "stablehlo.floor", x));
}
// (x > 0) - (x < 0): 0 for NaN, as PyTorch's sign.
Value Sign(Builder& b, Value x) {
  const ir::TensorType t = b.type(x);
  if (t.dtype == DType::PRED) return x;
  if (ir::IsUnsigned(t.dtype)) return ir::Convert(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::GT), t.dtype);
  Value pos = ir::Convert(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::GT), t.dtype);
  Value neg = ir::Convert(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::LT), t.dtype);
  return ir::Binary(b, "stablehlo.subtract", pos, neg);
}
// sgn: sign for real inputs; z / |z| for complex ones (0 at 0), as CPU.
Value Sgn(Builder& b, Value x) {
  const ir::TensorType t = b.type(x);
  if (!ir::IsComplex(t.dtype)) return Sign(b, x);
  const DType rt = t.dtype == DType::C64 ? DType::F32 : DType::F64;
  Value mag = b.Op1("stablehlo.abs", {x}, ir::TensorType{rt, t.dims});
  Value zero_r = ir::Full(b, ir::ConstantF(b, 0.0, rt), t.dims);
  Value is_zero = ir::Compare(b, mag, zero_r, ir::Cmp::EQ);
  Value denom = b.Op1("stablehlo.complex", {mag, zero_r}, t);
  Value zero_c = b.Op1("stablehlo.complex", {zero_r, zero_r}, t);
  return ir::Select(b, is_zero, zero_c, ir::Binary(b, "stablehlo.divide", x, denom));
}
Value Relu(Builder& b, Value x) {
  if (b.type(x).dtype == DType::PRED) return x;
  return ir::Binary(b, "stablehlo.maximum", x, C(b, 0, x));
}
Value Silu(Builder& b, Value x) { return ir::Binary(b, "stablehlo.multiply", x, Sigmoid(b, x)); }
Value BitNot(Builder& b, Value x) { return ir::Unary(b, "stablehlo.not", x); }
Value LogicalNot(Builder& b, Value x) {
  return ir::Unary(b, "stablehlo.not", ir::Convert(b, x, DType::PRED));
}
Value IsNan(Builder& b, Value x) { return ir::Compare(b, x, x, ir::Cmp::NE); }

// Inverse and hyperbolic trigonometry, from primitives that keep precision
// near zero (expm1, log1p, atan2).
Value Tan(Builder& b, Value x) { return ir::Binary(b, "stablehlo.divide", Sin(b, x), Cos(b, x)); }
Value Atan(Builder& b, Value x) { return ir::Binary(b, "stablehlo.atan2", x, C(b, 1, x)); }
Value OneMinusSq(Builder& b, Value x) {  // sqrt(1 - x^2) as sqrt((1 - x)(1 + x))
  return Sqrt(b, Mul(b, ir::Binary(b, "stablehlo.subtract", C(b, 1, x), x),
                     ir::Binary(b, "stablehlo.add", C(b, 1, x), x)));
}
Value Asin(Builder& b, Value x) { return ir::Binary(b, "stablehlo.atan2", x, OneMinusSq(b, x)); }
Value Acos(Builder& b, Value x) { return ir::Binary(b, "stablehlo.atan2", OneMinusSq(b, x), x); }
Value Sinh(Builder& b, Value x) {
  return Mul(b, C(b, 0.5, x), ir::Binary(b, "stablehlo.subtract", Expm1(b, x), Expm1(b, Neg(b, x))));
}
Value Cosh(Builder& b, Value x) {
  return Mul(b, C(b, 0.5, x), ir::Binary(b, "stablehlo.add", Exp(b, x), Exp(b, Neg(b, x))));
}
Value Asinh(Builder& b, Value x) {  // sign(x) * log1p(|x| + x^2 / (1 + sqrt(1 + x^2)))
  if (ir::IsComplex(b.type(x).dtype)) return b.Op1("chlo.asinh", {x}, b.type(x));
  Value a = Abs(b, x);
  Value sq = Mul(b, a, a);
  Value r = Log1p(b, ir::Binary(b, "stablehlo.add", a,
                                ir::Binary(b, "stablehlo.divide", sq,
                                           ir::Binary(b, "stablehlo.add", C(b, 1, x),
                                                      Sqrt(b, ir::Binary(b, "stablehlo.add", C(b, 1, x), sq))))));
  return ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::LT), Neg(b, r), r);
}
Value Acosh(Builder& b, Value x) {  // log(x + sqrt(x^2 - 1)); NaN below 1
  Value s = Sqrt(b, Mul(b, ir::Binary(b, "stablehlo.subtract", x, C(b, 1, x)),
                        ir::Binary(b, "stablehlo.add", x, C(b, 1, x))));
  return Log(b, ir::Binary(b, "stablehlo.add", x, s));
}
Value Atanh(Builder& b, Value x) {  // 0.5 * log1p(2x / (1 - x))
  return Mul(b, C(b, 0.5, x),
             Log1p(b, ir::Binary(b, "stablehlo.divide", Mul(b, C(b, 2, x), x),
                                 ir::Binary(b, "stablehlo.subtract", C(b, 1, x), x))));
}
Value IsPosInf(Builder& b, Value x) {
  if (!ir::IsFloat(b.type(x).dtype)) return ir::Compare(b, x, x, ir::Cmp::NE);  // all false
  return ir::Compare(b, x, ir::Full(b, ir::MaxValue(b, b.type(x).dtype), b.type(x).dims),
                     ir::Cmp::EQ);
}
Value IsNegInf(Builder& b, Value x) {
  if (!ir::IsFloat(b.type(x).dtype)) return ir::Compare(b, x, x, ir::Cmp::NE);
  return ir::Compare(b, x, ir::Full(b, ir::MinValue(b, b.type(x).dtype), b.type(x).dims),
                     ir::Cmp::EQ);
}

// erf(x) by XLA's rational approximation for f32 (max error ~1 ulp in
// [-4, 4]; clamped outside, where erf is ±1 in f32).
Value Erf(Builder& b, Value x) {
  if (b.type(x).dtype == DType::F64) return b.Op1("chlo.erf", {x}, b.type(x));
  static const double alpha[] = {0.00022905065861350646, 0.0034082910107109506,
                                 0.050955695062380861, 0.18520832239976145, 1.128379143519084};
  static const double beta[] = {-1.1791602954361697e-7, 2.3547966471313185e-05,
                                0.0010179625278914885, 0.014070470171167667,
                                0.11098505178285362, 0.49746925110067538, 1.0};
  Value xc = ir::Binary(b, "stablehlo.maximum", ir::Binary(b, "stablehlo.minimum", x, C(b, 4, x)),
                        C(b, -4, x));
  Value x2 = ir::Binary(b, "stablehlo.multiply", xc, xc);
  Value p = C(b, alpha[0], x);
  for (int i = 1; i < 5; ++i)
    p = ir::Binary(b, "stablehlo.add", ir::Binary(b, "stablehlo.multiply", p, x2),
                   C(b, alpha[i], x));
  Value q = C(b, beta[0], x);
  for (int i = 1; i < 7; ++i)
    q = ir::Binary(b, "stablehlo.add", ir::Binary(b, "stablehlo.multiply", q, x2),
                   C(b, beta[i], x));
  Value r = ir::Binary(b, "stablehlo.divide", ir::Binary(b, "stablehlo.multiply", xc, p), q);
  // Past |x| = 3.9 erf rounds to ±1 in f32; the approximation falls short.
  Value big = ir::Compare(b, ir::Unary(b, "stablehlo.abs", x), C(b, 3.9, x), ir::Cmp::GE);
  Value one = ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::LT), C(b, -1, x), C(b, 1, x));
  return ir::Select(b, big, one, r);
}

// -x log x; 0 at 0, -inf below 0.
Value Entr(Builder& b, Value x) {
  Value r = Neg(b, Mul(b, x, Log(b, x)));
  r = ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::EQ), C(b, 0, x), r);
  return ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::LT), C(b, -INFINITY, x), r);
}
Value Exp2(Builder& b, Value x) { return ir::Binary(b, "stablehlo.power", C(b, 2, x), x); }
// The sign bit: set for -0.0 and negative NaN too (floats); x < 0 otherwise.
Value SignBit(Builder& b, Value x) {
  const ir::TensorType t = b.type(x);
  if (t.dtype == DType::PRED || ir::IsUnsigned(t.dtype)) return ir::Compare(b, x, x, ir::Cmp::NE);
  if (!ir::IsFloat(t.dtype)) return ir::Compare(b, x, C(b, 0, x), ir::Cmp::LT);
  const int bits = ir::BitWidth(t.dtype);
  const DType it = bits == 64 ? DType::S64 : bits == 32 ? DType::S32 : DType::S16;
  Value v = b.Op1("stablehlo.bitcast_convert", {x}, ir::TensorType{it, t.dims});
  return ir::Compare(b, v, ir::Full(b, ir::ConstantI(b, 0, it), t.dims), ir::Cmp::LT);
}

// Special functions from CHLO (expanded by XLA into polynomial/series code).
Value Lgamma(Builder& b, Value x) { return b.Op1("chlo.lgamma", {x}, b.type(x)); }
Value Erfinv(Builder& b, Value x) { return b.Op1("chlo.erf_inv", {x}, b.type(x)); }
// psi^(n)(x) with CHLO for x >= 0 and, below 0, the reflection formula
// psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot(pi x)), where
// d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x)) and P_{n+1}(c) = -(1 + c^2) P_n'(c).
// cot(pi x) is taken of x's fractional part, which keeps it accurate (CHLO's
// own reflection loses precision far below 0).
Value PolygammaReal(Builder& b, int64_t n, Value x) {
  auto psi = [&](Value v) {
    return n == 0 ? b.Op1("chlo.digamma", {v}, b.type(v))
                  : b.Op1("chlo.polygamma", {C(b, static_cast<double>(n), v), v}, b.type(v));
  };
  Value neg = ir::Compare(b, x, C(b, 0, x), ir::Cmp::LT);
  Value arg = ir::Select(b, neg, ir::Binary(b, "stablehlo.subtract", C(b, 1, x), x), x);
  Value base = psi(arg);
  std::vector<double> poly{0, 1};  // P_0(c) = c, coefficients of c^k
  for (int64_t k = 0; k < n; ++k) {
    std::vector<double> d(poly.size() > 1 ? poly.size() - 1 : 1, 0.0);
    for (size_t i = 1; i < poly.size(); ++i) d[i - 1] = poly[i] * static_cast<double>(i);
    std::vector<double> next(d.size() + 2, 0.0);
    for (size_t i = 0; i < d.size(); ++i) {
      next[i] -= d[i];
      next[i + 2] -= d[i];
    }
    poly = next;
  }
  Value frac = ir::Binary(b, "stablehlo.subtract", x, Trunc(b, x));
  Value pr = Mul(b, C(b, M_PI, x), frac);
  Value c = ir::Binary(b, "stablehlo.divide", Cos(b, pr), Sin(b, pr));
  Value pc = C(b, poly.back(), x);
  for (size_t i = poly.size() - 1; i-- > 0;)
    pc = ir::Binary(b, "stablehlo.add", Mul(b, pc, c), C(b, poly[i], x));
  Value refl = ir::Binary(b, "stablehlo.subtract", n % 2 ? Neg(b, base) : base,
                          Mul(b, C(b, std::pow(M_PI, static_cast<double>(n + 1)), x), pc));
  return ir::Select(b, neg, refl, base);
}

// digamma as on CPU: -inf at +0, +inf at -0, NaN at negative integers.
Value Digamma(Builder& b, Value x) {
  Value r = PolygammaReal(b, 0, x);
  Value zero = ir::Compare(b, x, C(b, 0, x), ir::Cmp::EQ);
  Value neg_zero = ir::Compare(
      b, b.Op1("stablehlo.bitcast_convert", {ir::Convert(b, x, DType::F64)},
               ir::TensorType{DType::S64, b.type(x).dims}),
      ir::Full(b, ir::ConstantI(b, 0, DType::S64), b.type(x).dims), ir::Cmp::LT);
  Value inf = ir::Select(b, neg_zero, C(b, INFINITY, x), C(b, -INFINITY, x));
  Value neg_int = ir::Binary(b, "stablehlo.and", ir::Compare(b, x, C(b, 0, x), ir::Cmp::LT),
                             ir::Compare(b, x, ir::Unary(b, "stablehlo.floor", x), ir::Cmp::EQ));
  r = ir::Select(b, neg_int, C(b, NAN, x), r);
  return ir::Select(b, zero, inf, r);
}

struct UnaryOp {
  lazy::Lowering lowering;
  bool to_float;  // integer inputs give a float result (exp, sqrt, ...)
};

#define TPU_UNARY(var, aten, fn, to_float) \
  constexpr UnaryOp var{{aten, &LowerUnary<fn>}, to_float};
TPU_UNARY(kNeg, "aten::neg", Neg, false)
TPU_UNARY(kAbs, "aten::abs", Abs, false)
TPU_UNARY(kExp, "aten::exp", Exp, true)
TPU_UNARY(kExpm1, "aten::expm1", Expm1, true)
TPU_UNARY(kLog, "aten::log", Log, true)
TPU_UNARY(kLog1p, "aten::log1p", Log1p, true)
TPU_UNARY(kLog2, "aten::log2", Log2, true)
TPU_UNARY(kLog10, "aten::log10", Log10, true)
TPU_UNARY(kSqrt, "aten::sqrt", Sqrt, true)
TPU_UNARY(kRsqrt, "aten::rsqrt", Rsqrt, true)
TPU_UNARY(kReciprocal, "aten::reciprocal", Reciprocal, true)
TPU_UNARY(kTanh, "aten::tanh", Tanh, true)
TPU_UNARY(kSigmoid, "aten::sigmoid", Sigmoid, true)
TPU_UNARY(kSin, "aten::sin", Sin, true)
TPU_UNARY(kCos, "aten::cos", Cos, true)
TPU_UNARY(kErf, "aten::erf", Erf, true)
TPU_UNARY(kFloor, "aten::floor", Floor, false)
TPU_UNARY(kCeil, "aten::ceil", Ceil, false)
TPU_UNARY(kRound, "aten::round", Round, false)
TPU_UNARY(kTrunc, "aten::trunc", Trunc, false)
TPU_UNARY(kSign, "aten::sign", Sign, false)
TPU_UNARY(kRelu, "aten::relu", Relu, false)
TPU_UNARY(kSilu, "aten::silu", Silu, false)
TPU_UNARY(kBitNot, "aten::bitwise_not", BitNot, false)
TPU_UNARY(kSgn, "aten::sgn", Sgn, false)
TPU_UNARY(kTan, "aten::tan", Tan, true)
TPU_UNARY(kAtan, "aten::atan", Atan, true)
TPU_UNARY(kAsin, "aten::asin", Asin, true)
TPU_UNARY(kAcos, "aten::acos", Acos, true)
TPU_UNARY(kSinh, "aten::sinh", Sinh, true)
TPU_UNARY(kCosh, "aten::cosh", Cosh, true)
TPU_UNARY(kAsinh, "aten::asinh", Asinh, true)
TPU_UNARY(kAcosh, "aten::acosh", Acosh, true)
TPU_UNARY(kAtanh, "aten::atanh", Atanh, true)
TPU_UNARY(kLgamma, "aten::lgamma", Lgamma, true)
TPU_UNARY(kDigamma, "aten::digamma", Digamma, true)
TPU_UNARY(kErfinv, "aten::erfinv", Erfinv, true)
TPU_UNARY(kExp2, "aten::exp2", Exp2, true)
TPU_UNARY(kEntr, "aten::special_entr", Entr, true)
#undef TPU_UNARY

ElementwiseMeta UnaryMeta(const UnaryOp& op, const Tensor& self) {
  CheckTpu(op.lowering.name, self, "self");
  if (self.is_complex()) {  // ATen's refusals, with its messages
    for (const UnaryOp* real_only : {&kFloor, &kCeil, &kTrunc, &kRound}) {
      TORCH_CHECK(&op != real_only, op.lowering.name + 6, " is not supported for complex inputs");
    }
    TORCH_CHECK(&op != &kSign, "Unlike NumPy, torch.sign is not intended to support complex "
                "numbers. Please use torch.sgn instead.");
  }
  ElementwiseMeta m;
  m.sizes = self.sizes().vec();
  m.result = self.scalar_type();
  if (op.to_float && at::isIntegralType(m.result, /*includeBool=*/true))
    m.result = at::typeMetaToScalarType(at::get_default_dtype());
  m.compute = OpMathType(m.result);
  return m;
}

lazy::Attrs Compute(const ElementwiseMeta& m) {
  return lazy::Attrs{{static_cast<int64_t>(ToIr(m.compute))}, {}, {}};
}

Tensor Unary(const UnaryOp& op, const Tensor& self) {
  ElementwiseMeta m = UnaryMeta(op, self);
  return RunElementwise(op.lowering, Compute(m), Operands(OperandOf(self)),
                        TypeOf(m.sizes, m.result), {&self});
}
Tensor& UnaryInplace(const UnaryOp& op, Tensor& self) {
  ElementwiseMeta m = UnaryMeta(op, self);
  CheckInplace(op.lowering.name, self, m);
  RunInto(op.lowering, Compute(m), Operands(OperandOf(self)), {TypeOf(m.sizes, m.result)}, {self});
  return self;
}
Tensor& UnaryOut(const UnaryOp& op, const Tensor& self, Tensor& out) {
  ElementwiseMeta m = UnaryMeta(op, self);
  // ATen builds the ops that keep their dtype (neg, floor, abs, ...) with
  // check_all_same_dtype: out= of another dtype is refused, not cast into.
  TORCH_CHECK(op.to_float || out.scalar_type() == m.result, "Found dtype ", out.scalar_type(),
              " but expected ", m.result);
  PrepareOut(op.lowering.name, out, m.sizes, m.result);
  RunInto(op.lowering, Compute(m), Operands(OperandOf(self)), {TypeOf(m.sizes, m.result)}, {out});
  return out;
}

#define TPU_UNARY_KERNELS(name, op)                                         \
  Tensor name##_fn(const Tensor& s) { return Unary(op, s); }                \
  Tensor& name##__fn(Tensor& s) { return UnaryInplace(op, s); }             \
  Tensor& name##_out_fn(const Tensor& s, Tensor& o) { return UnaryOut(op, s, o); }
TPU_UNARY_KERNELS(neg, kNeg)
// abs of a complex tensor is real (pointwise/complex.cc). CPU has no abs
// for bool and the unsigned types wider than a byte.
void CheckAbsDtype(const Tensor& s) {
  const at::ScalarType t = s.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(t != at::kBool && t != at::kUInt16 && t != at::kUInt32 &&
                                  t != at::kUInt64,
                              "\"abs_tpu\" not implemented for '", c10::toString(t), "'");
}
Tensor abs_fn(const Tensor& s) {
  CheckAbsDtype(s);
  return s.is_complex() ? ComplexToReal("abs", s) : Unary(kAbs, s);
}
Tensor& abs__fn(Tensor& s) {
  TORCH_CHECK(!s.is_complex(), "In-place abs is not supported for complex tensors.");
  CheckAbsDtype(s);
  return UnaryInplace(kAbs, s);
}
Tensor& abs_out_fn(const Tensor& s, Tensor& o) {
  CheckAbsDtype(s);
  if (!s.is_complex()) return UnaryOut(kAbs, s, o);
  Tensor r = ComplexToReal("abs", s);
  PrepareOut("abs", o, r.sizes(), r.scalar_type());
  return o.copy_(r);
}
TPU_UNARY_KERNELS(exp, kExp)
TPU_UNARY_KERNELS(expm1, kExpm1)
TPU_UNARY_KERNELS(log, kLog)
TPU_UNARY_KERNELS(log1p, kLog1p)
TPU_UNARY_KERNELS(log2, kLog2)
TPU_UNARY_KERNELS(log10, kLog10)
TPU_UNARY_KERNELS(sqrt, kSqrt)
TPU_UNARY_KERNELS(rsqrt, kRsqrt)
TPU_UNARY_KERNELS(reciprocal, kReciprocal)
TPU_UNARY_KERNELS(tanh, kTanh)
TPU_UNARY_KERNELS(sigmoid, kSigmoid)
TPU_UNARY_KERNELS(sin, kSin)
TPU_UNARY_KERNELS(cos, kCos)
TPU_UNARY_KERNELS(erf, kErf)
TPU_UNARY_KERNELS(floor, kFloor)
TPU_UNARY_KERNELS(ceil, kCeil)
TPU_UNARY_KERNELS(round, kRound)
TPU_UNARY_KERNELS(trunc, kTrunc)
TPU_UNARY_KERNELS(sign, kSign)
TPU_UNARY_KERNELS(relu, kRelu)
TPU_UNARY_KERNELS(silu, kSilu)
TPU_UNARY_KERNELS(bitwise_not, kBitNot)
TPU_UNARY_KERNELS(sgn, kSgn)
TPU_UNARY_KERNELS(tan, kTan)
TPU_UNARY_KERNELS(atan, kAtan)
TPU_UNARY_KERNELS(asin, kAsin)
TPU_UNARY_KERNELS(acos, kAcos)
TPU_UNARY_KERNELS(sinh, kSinh)
TPU_UNARY_KERNELS(cosh, kCosh)
TPU_UNARY_KERNELS(asinh, kAsinh)
TPU_UNARY_KERNELS(acosh, kAcosh)
TPU_UNARY_KERNELS(atanh, kAtanh)
TPU_UNARY_KERNELS(lgamma, kLgamma)
TPU_UNARY_KERNELS(digamma, kDigamma)
TPU_UNARY_KERNELS(erfinv, kErfinv)
TPU_UNARY_KERNELS(exp2, kExp2)
TPU_UNARY_KERNELS(special_entr, kEntr)

#undef TPU_UNARY_KERNELS

// Predicates: the input's own dtype, a bool result.
Tensor Predicate(const lazy::Lowering& op, const Tensor& s) {
  CheckTpu(op.name, s, "self");
  return Run1(op, {{IrCode(ComputableType(s.scalar_type()))}, {}, {}}, {OperandOf(s)},
              TypeOf(s.sizes(), at::kBool));
}
Tensor& PredicateOut(const lazy::Lowering& op, const Tensor& s, Tensor& out) {
  CheckTpu(op.name, s, "self");
  PrepareOut(op.name, out, s.sizes(), at::kBool);
  RunInto(op, {{IrCode(ComputableType(s.scalar_type()))}, {}, {}}, {OperandOf(s)},
          {TypeOf(s.sizes(), at::kBool)}, {out});
  return out;
}
constexpr lazy::Lowering kIsNan{"aten::isnan", &LowerUnary<IsNan>};
constexpr lazy::Lowering kIsPosInf{"aten::isposinf", &LowerUnary<IsPosInf>};
constexpr lazy::Lowering kIsNegInf{"aten::isneginf", &LowerUnary<IsNegInf>};
Tensor isnan_fn(const Tensor& s) { return Predicate(kIsNan, s); }
Tensor isposinf_fn(const Tensor& s) { return Predicate(kIsPosInf, s); }
Tensor isneginf_fn(const Tensor& s) { return Predicate(kIsNegInf, s); }
Tensor& isposinf_out(const Tensor& s, Tensor& o) { return PredicateOut(kIsPosInf, s, o); }
constexpr lazy::Lowering kSignBit{"aten::signbit", &LowerUnary<SignBit>};
Tensor signbit_fn(const Tensor& s) { return Predicate(kSignBit, s); }
Tensor& signbit_out(const Tensor& s, Tensor& o) { return PredicateOut(kSignBit, s, o); }
Tensor& isneginf_out(const Tensor& s, Tensor& o) { return PredicateOut(kIsNegInf, s, o); }

// logical_not: computed on the input's dtype, result bool (or out's dtype).
constexpr lazy::Lowering kLogicalNot{"aten::logical_not", &LowerUnary<LogicalNot>};
Tensor logical_not_fn(const Tensor& s) { return Predicate(kLogicalNot, s); }
Tensor& logical_not_out_fn(const Tensor& s, Tensor& o) {
  CheckTpu("logical_not", s, "self");
  at::native::resize_output(o, s.sizes());
  RunInto(kLogicalNot, {{static_cast<int64_t>(ToIr(s.scalar_type()))}, {}, {}}, {OperandOf(s)},
          {TypeOf(s.sizes(), at::kBool)}, {o});
  return o;
}
Tensor& logical_not__fn(Tensor& s) { return logical_not_out_fn(s, s); }

// ---- backward ops: ins = (grad, saved[, ...]); computed in opmath ----

using GradFn = Value (*)(Builder&, Value g, Value s, const lazy::Attrs&);
template <GradFn F>
VS LowerGrad(Builder& b, const VS& in, const lazy::Attrs& attrs, const TT& out) {
  const auto ct = static_cast<DType>(attrs.ints[0]);
  Value g = ir::BroadcastTo(b, ir::Convert(b, in[0], ct), out[0].dims);
  Value s = ir::BroadcastTo(b, ir::Convert(b, in[1], ct), out[0].dims);
  return {ir::Convert(b, F(b, g, s, attrs), out[0].dtype)};
}

// threshold_backward(grad, self, threshold): grad where self > threshold.
Value ThresholdGrad(Builder& b, Value g, Value s, const lazy::Attrs& a) {
  Value th = C(b, a.floats[0], s);
  return ir::Select(b, ir::Compare(b, s, th, ir::Cmp::LE), C(b, 0, g), g);
}
Value TanhGrad(Builder& b, Value g, Value y, const lazy::Attrs&) {
  Value one_minus = ir::Binary(b, "stablehlo.subtract", C(b, 1, y),
                               ir::Binary(b, "stablehlo.multiply", y, y));
  return ir::Binary(b, "stablehlo.multiply", g, one_minus);
}
Value SigmoidGrad(Builder& b, Value g, Value y, const lazy::Attrs&) {
  Value d = ir::Binary(b, "stablehlo.multiply", y, ir::Binary(b, "stablehlo.subtract", C(b, 1, y), y));
  return ir::Binary(b, "stablehlo.multiply", g, d);
}
Value SiluGrad(Builder& b, Value g, Value x, const lazy::Attrs&) {
  Value s = Sigmoid(b, x);
  Value d = ir::Binary(b, "stablehlo.multiply", s,
                       ir::Binary(b, "stablehlo.add", C(b, 1, x),
                                  ir::Binary(b, "stablehlo.multiply", x,
                                             ir::Binary(b, "stablehlo.subtract", C(b, 1, x), s))));
  return ir::Binary(b, "stablehlo.multiply", g, d);
}

// gelu, exact (erf) or tanh approximation; ints[1] = 1 for tanh.
Value GeluExact(Builder& b, Value x) {
  Value cdf = ir::Binary(b, "stablehlo.multiply", C(b, 0.5, x),
                         ir::Binary(b, "stablehlo.add", C(b, 1, x),
                                    Erf(b, ir::Binary(b, "stablehlo.multiply", x,
                                                      C(b, M_SQRT1_2, x)))));
  return ir::Binary(b, "stablehlo.multiply", x, cdf);
}
Value GeluTanhInner(Builder& b, Value x) {  // sqrt(2/pi) * (x + 0.044715 x^3)
  Value x3 = ir::Binary(b, "stablehlo.multiply", x, ir::Binary(b, "stablehlo.multiply", x, x));
  Value inner = ir::Binary(b, "stablehlo.add", x,
                           ir::Binary(b, "stablehlo.multiply", C(b, 0.044715, x), x3));
  return ir::Binary(b, "stablehlo.multiply", C(b, M_2_SQRTPI * M_SQRT1_2, x), inner);
}
VS LowerGelu(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  Value x = ir::Convert(b, in[0], static_cast<DType>(a.ints[0]));
  Value y;
  if (a.ints[1]) {
    Value t = Tanh(b, GeluTanhInner(b, x));
    y = ir::Binary(b, "stablehlo.multiply", ir::Binary(b, "stablehlo.multiply", C(b, 0.5, x), x),
                   ir::Binary(b, "stablehlo.add", C(b, 1, x), t));
  } else {
    y = GeluExact(b, x);
  }
  return {ir::Convert(b, y, out[0].dtype)};
}
Value GeluGrad(Builder& b, Value g, Value x, const lazy::Attrs& a) {
  if (a.ints[1]) {
    Value inner = GeluTanhInner(b, x);
    Value t = Tanh(b, inner);
    Value x2 = ir::Binary(b, "stablehlo.multiply", x, x);
    Value dinner = ir::Binary(b, "stablehlo.multiply", C(b, M_2_SQRTPI * M_SQRT1_2, x),
                              ir::Binary(b, "stablehlo.add", C(b, 1, x),
                                         ir::Binary(b, "stablehlo.multiply",
                                                    C(b, 3 * 0.044715, x), x2)));
    Value sech2 = ir::Binary(b, "stablehlo.subtract", C(b, 1, x),
                             ir::Binary(b, "stablehlo.multiply", t, t));
    Value left = ir::Binary(b, "stablehlo.multiply", C(b, 0.5, x),
                            ir::Binary(b, "stablehlo.add", C(b, 1, x), t));
    Value right = ir::Binary(b, "stablehlo.multiply",
                             ir::Binary(b, "stablehlo.multiply", C(b, 0.5, x), x),
                             ir::Binary(b, "stablehlo.multiply", sech2, dinner));
    return ir::Binary(b, "stablehlo.multiply", g, ir::Binary(b, "stablehlo.add", left, right));
  }
  Value cdf = ir::Binary(b, "stablehlo.multiply", C(b, 0.5, x),
                         ir::Binary(b, "stablehlo.add", C(b, 1, x),
                                    Erf(b, ir::Binary(b, "stablehlo.multiply", x,
                                                      C(b, M_SQRT1_2, x)))));
  Value pdf = ir::Binary(b, "stablehlo.multiply", C(b, 0.5 * M_2_SQRTPI * M_SQRT1_2, x),
                         Exp(b, ir::Binary(b, "stablehlo.multiply", C(b, -0.5, x),
                                           ir::Binary(b, "stablehlo.multiply", x, x))));
  Value d = ir::Binary(b, "stablehlo.add", cdf, ir::Binary(b, "stablehlo.multiply", x, pdf));
  return ir::Binary(b, "stablehlo.multiply", g, d);
}

constexpr lazy::Lowering kThresholdGrad{"aten::threshold_backward", &LowerGrad<ThresholdGrad>};
constexpr lazy::Lowering kTanhGrad{"aten::tanh_backward", &LowerGrad<TanhGrad>};
constexpr lazy::Lowering kSigmoidGrad{"aten::sigmoid_backward", &LowerGrad<SigmoidGrad>};
constexpr lazy::Lowering kSiluGrad{"aten::silu_backward", &LowerGrad<SiluGrad>};
constexpr lazy::Lowering kGeluGrad{"aten::gelu_backward", &LowerGrad<GeluGrad>};
constexpr lazy::Lowering kGelu{"aten::gelu", &LowerGelu};

Tensor Grad(const lazy::Lowering& op, const Tensor& g, const Tensor& s, lazy::Attrs attrs) {
  CheckTpu(op.name, g, "grad_output");
  CheckTpu(op.name, s, "self");
  const auto rt = at::result_type(g, s);
  attrs.ints.insert(attrs.ints.begin(), static_cast<int64_t>(ToIr(OpMathType(rt))));
  auto sizes = at::infer_size(g.sizes(), s.sizes());
  return Run1(op, attrs, {OperandOf(g), OperandOf(s)}, TypeOf(sizes, rt));
}

Tensor threshold_backward(const Tensor& g, const Tensor& s, const c10::Scalar& th) {
  return Grad(kThresholdGrad, g, s, {{}, {th.toDouble()}, {}});
}
Tensor tanh_backward(const Tensor& g, const Tensor& y) { return Grad(kTanhGrad, g, y, {}); }
Tensor sigmoid_backward(const Tensor& g, const Tensor& y) { return Grad(kSigmoidGrad, g, y, {}); }
Tensor silu_backward(const Tensor& g, const Tensor& x) { return Grad(kSiluGrad, g, x, {}); }

int64_t GeluMode(c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "approximate argument must be either none or tanh.");
  return approximate == "tanh" ? 1 : 0;
}
Tensor gelu(const Tensor& x, c10::string_view approximate) {
  CheckTpu("gelu", x, "self");
  const auto rt = x.scalar_type();
  return Run1(kGelu, {{static_cast<int64_t>(ToIr(OpMathType(rt))), GeluMode(approximate)}, {}, {}},
              {OperandOf(x)}, TypeOf(x.sizes(), rt));
}
Tensor& gelu_(Tensor& x, c10::string_view approximate) {
  const auto rt = x.scalar_type();
  RunInto(kGelu, {{static_cast<int64_t>(ToIr(OpMathType(rt))), GeluMode(approximate)}, {}, {}},
          {OperandOf(x)}, {TypeOf(x.sizes(), rt)}, {x});
  return x;
}
Tensor gelu_backward(const Tensor& g, const Tensor& x, c10::string_view approximate) {
  return Grad(kGeluGrad, g, x, {{GeluMode(approximate)}, {}, {}});
}

// ---- activations with constant parameters (attrs.floats) ----
// ints = (compute dtype); leaky_relu: (slope); hardtanh: (min, max);
// elu: (alpha, scale, input_scale).

Value LeakyRelu(Builder& b, Value x, const lazy::Attrs& a) {
  return ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::GT), x, Mul(b, x, C(b, a.floats[0], x)));
}
Value Hardtanh(Builder& b, Value x, const lazy::Attrs& a) {
  return ir::Min(b, ir::Max(b, x, C(b, a.floats[0], x)), C(b, a.floats[1], x));
}
Value Elu(Builder& b, Value x, const lazy::Attrs& a) {
  Value neg = Mul(b, C(b, a.floats[0] * a.floats[1], x), Expm1(b, Mul(b, x, C(b, a.floats[2], x))));
  return ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::GT), Mul(b, x, C(b, a.floats[1], x)), neg);
}
using ParamFn = Value (*)(Builder&, Value, const lazy::Attrs&);
template <ParamFn F>
VS LowerParam(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  Value x = ir::Convert(b, in[0], static_cast<DType>(a.ints[0]));
  return {ir::Convert(b, F(b, x, a), out[0].dtype)};
}
constexpr lazy::Lowering kLeakyRelu{"aten::leaky_relu", &LowerParam<LeakyRelu>};
constexpr lazy::Lowering kHardtanh{"aten::hardtanh", &LowerParam<Hardtanh>};
constexpr lazy::Lowering kElu{"aten::elu", &LowerParam<Elu>};

// Backward: ins = (grad, saved); for elu ints[1] says whether `saved` is the result.
Value LeakyReluGrad(Builder& b, Value g, Value x, const lazy::Attrs& a) {
  return ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::GT), g, Mul(b, g, C(b, a.floats[0], g)));
}
Value HardtanhGrad(Builder& b, Value g, Value x, const lazy::Attrs& a) {
  Value inside = ir::Binary(b, "stablehlo.and", ir::Compare(b, x, C(b, a.floats[0], x), ir::Cmp::GT),
                            ir::Compare(b, x, C(b, a.floats[1], x), ir::Cmp::LT));
  return ir::Select(b, inside, g, C(b, 0, g));
}
Value EluGrad(Builder& b, Value g, Value s, const lazy::Attrs& a) {
  const double alpha = a.floats[0], scale = a.floats[1], in_scale = a.floats[2];
  Value neg_slope;
  if (a.ints[1]) {  // s is the result: d = in_scale * (s + alpha * scale)
    neg_slope = Mul(b, C(b, in_scale, s), ir::Binary(b, "stablehlo.add", s, C(b, alpha * scale, s)));
  } else {          // s is the input: d = in_scale * alpha * scale * exp(in_scale * s)
    neg_slope = Mul(b, C(b, in_scale * alpha * scale, s), Exp(b, Mul(b, s, C(b, in_scale, s))));
  }
  Value pos = ir::Compare(b, s, C(b, 0, s), ir::Cmp::GT);
  return Mul(b, g, ir::Select(b, pos, C(b, scale, s), neg_slope));
}
constexpr lazy::Lowering kLeakyReluGrad{"aten::leaky_relu_backward", &LowerGrad<LeakyReluGrad>};
constexpr lazy::Lowering kHardtanhGrad{"aten::hardtanh_backward", &LowerGrad<HardtanhGrad>};
constexpr lazy::Lowering kEluGrad{"aten::elu_backward", &LowerGrad<EluGrad>};

// ---- polygamma, round(decimals), log_sigmoid ----

// floats = (n)
Value Polygamma(Builder& b, Value x, const lazy::Attrs& a) {
  const int64_t n = static_cast<int64_t>(a.floats[0]);
  if (n == 0) return Digamma(b, x);
  return PolygammaReal(b, n, x);
}
// floats = (decimals): CPU's nearbyint(x * 10^d) / 10^d, or for d < 0
// nearbyint(x / 10^-d) * 10^-d.
Value RoundDecimals(Builder& b, Value x, const lazy::Attrs& a) {
  const int64_t d = static_cast<int64_t>(a.floats[0]);
  Value p = C(b, std::pow(10.0, static_cast<double>(d > 0 ? d : -d)), x);
  if (d > 0)
    return ir::Binary(b, "stablehlo.divide",
                      Round(b, ir::Binary(b, "stablehlo.multiply", x, p)), p);
  return ir::Binary(b, "stablehlo.multiply", Round(b, ir::Binary(b, "stablehlo.divide", x, p)), p);
}
// min(x, 0) - log1p(exp(-|x|))
Value LogSigmoid(Builder& b, Value x, const lazy::Attrs&) {
  return ir::Binary(b, "stablehlo.subtract", ir::Binary(b, "stablehlo.minimum", x, C(b, 0, x)),
                    Log1p(b, Exp(b, Neg(b, Abs(b, x)))));
}
constexpr lazy::Lowering kPolygamma{"aten::polygamma", &LowerParam<Polygamma>};
constexpr lazy::Lowering kRoundDecimals{"aten::round.decimals", &LowerParam<RoundDecimals>};
constexpr lazy::Lowering kLogSigmoid{"aten::log_sigmoid_forward", &LowerParam<LogSigmoid>};
// d/dx log_sigmoid(x) = sigmoid(-x)
Value LogSigmoidGrad(Builder& b, Value g, Value x, const lazy::Attrs&) {
  return Mul(b, g, Sigmoid(b, Neg(b, x)));
}
constexpr lazy::Lowering kLogSigmoidGrad{"aten::log_sigmoid_backward", &LowerGrad<LogSigmoidGrad>};

Tensor Param(const lazy::Lowering& op, const Tensor& x, std::vector<double> params,
             const Tensor* dst, bool out_form) {
  CheckTpu(op.name, x, "self");
  TORCH_CHECK(at::isFloatingType(x.scalar_type()), "\"", op.name, "\" not implemented for '",
              c10::toString(x.scalar_type()), "'");
  const lazy::Attrs attrs{{IrCode(OpMathType(x.scalar_type()))}, std::move(params), {}};
  if (!dst) return RunElementwise(op, attrs, {OperandOf(x)}, TypeOf(x.sizes(), x.scalar_type()), {&x});
  if (out_form) PrepareOut(op.name, *dst, x.sizes(), x.scalar_type());
  RunInto(op, attrs, {OperandOf(x)}, {TypeOf(x.sizes(), x.scalar_type())}, {*dst});
  return *dst;
}

Tensor leaky_relu(const Tensor& x, const c10::Scalar& s) {
  return Param(kLeakyRelu, x, {s.toDouble()}, nullptr, false);
}
Tensor& leaky_relu_(Tensor& x, const c10::Scalar& s) {
  Param(kLeakyRelu, x, {s.toDouble()}, &x, false);
  return x;
}
Tensor& leaky_relu_out(const Tensor& x, const c10::Scalar& s, Tensor& o) {
  Param(kLeakyRelu, x, {s.toDouble()}, &o, true);
  return o;
}
Tensor leaky_relu_backward(const Tensor& g, const Tensor& x, const c10::Scalar& s, bool) {
  return Grad(kLeakyReluGrad, g, x, {{}, {s.toDouble()}, {}});
}
// hardtanh is a clamp, for integer types too (CPU's checks and messages).
Tensor HardtanhInto(const Tensor& x, const c10::Scalar& lo, const c10::Scalar& hi,
                    const Tensor* dst, bool out_form) {
  const at::ScalarType t = x.scalar_type();
  TORCH_CHECK(t != at::kBool, "Bool inputs not supported for hardtanh");
  if (at::isIntegralType(t, /*includeBool=*/false)) {
    TORCH_CHECK(c10::isSignedType(t) || (lo.toDouble() >= 0 && hi.toDouble() >= 0),
                "cannot do hardtanh on an unsigned type with negative limits");
    if (!dst) return at::clamp(x, lo, hi);
    if (dst->is_same(x)) return at::clamp_(const_cast<Tensor&>(*dst), lo, hi);
    return at::clamp_out(const_cast<Tensor&>(*dst), x, lo, hi);
  }
  return Param(kHardtanh, x, {lo.toDouble(), hi.toDouble()}, dst, out_form);
}
Tensor hardtanh(const Tensor& x, const c10::Scalar& lo, const c10::Scalar& hi) {
  return HardtanhInto(x, lo, hi, nullptr, false);
}
Tensor& hardtanh_(Tensor& x, const c10::Scalar& lo, const c10::Scalar& hi) {
  HardtanhInto(x, lo, hi, &x, false);
  return x;
}
Tensor& hardtanh_out(const Tensor& x, const c10::Scalar& lo, const c10::Scalar& hi, Tensor& o) {
  HardtanhInto(x, lo, hi, &o, true);
  return o;
}
Tensor hardtanh_backward(const Tensor& g, const Tensor& x, const c10::Scalar& lo,
                         const c10::Scalar& hi) {
  return Grad(kHardtanhGrad, g, x, {{}, {lo.toDouble(), hi.toDouble()}, {}});
}
Tensor elu(const Tensor& x, const c10::Scalar& a, const c10::Scalar& s, const c10::Scalar& is) {
  return Param(kElu, x, {a.toDouble(), s.toDouble(), is.toDouble()}, nullptr, false);
}
Tensor& elu_(Tensor& x, const c10::Scalar& a, const c10::Scalar& s, const c10::Scalar& is) {
  Param(kElu, x, {a.toDouble(), s.toDouble(), is.toDouble()}, &x, false);
  return x;
}
Tensor& elu_out(const Tensor& x, const c10::Scalar& a, const c10::Scalar& s,
                const c10::Scalar& is, Tensor& o) {
  Param(kElu, x, {a.toDouble(), s.toDouble(), is.toDouble()}, &o, true);
  return o;
}
// Integer inputs are computed in the default float dtype, as the structured
// CPU kernels do for these ops.
Tensor FloatParam(const lazy::Lowering& op, const Tensor& x, double param, const Tensor* dst,
                  bool out_form) {
  if (at::isFloatingType(x.scalar_type())) return Param(op, x, {param}, dst, out_form);
  CheckTpu(op.name, x, "self");
  const auto rt = at::typeMetaToScalarType(at::get_default_dtype());
  TORCH_CHECK(dst == nullptr || out_form, op.name, ": result type Float can't be cast to the "
              "desired output type ", x.scalar_type());
  return Param(op, x.to(rt), {param}, dst, out_form);
}
Tensor polygamma_fn(int64_t n, const Tensor& x) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  return FloatParam(kPolygamma, x, static_cast<double>(n), nullptr, false);
}
Tensor& polygamma_out_fn(int64_t n, const Tensor& x, Tensor& o) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  FloatParam(kPolygamma, x, static_cast<double>(n), &o, true);
  return o;
}
Tensor& polygamma__fn(Tensor& x, int64_t n) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  FloatParam(kPolygamma, x, static_cast<double>(n), &x, false);
  return x;
}
Tensor round_decimals(const Tensor& x, int64_t d) {
  if (d == 0) return round_fn(x);
  return Param(kRoundDecimals, x, {static_cast<double>(d)}, nullptr, false);
}
Tensor& round_decimals_(Tensor& x, int64_t d) {
  if (d == 0) return round__fn(x);
  Param(kRoundDecimals, x, {static_cast<double>(d)}, &x, false);
  return x;
}
Tensor& round_decimals_out(const Tensor& x, int64_t d, Tensor& o) {
  if (d == 0) return round_out_fn(x, o);
  Param(kRoundDecimals, x, {static_cast<double>(d)}, &o, true);
  return o;
}
std::tuple<Tensor, Tensor> log_sigmoid_forward(const Tensor& x) {
  // The buffer CPU saves is optional for the backward (CUDA leaves it empty).
  return {Param(kLogSigmoid, x, {}, nullptr, false), EmptyTpu({0}, x.scalar_type())};
}
Tensor log_sigmoid_backward(const Tensor& g, const Tensor& x, const Tensor&) {
  return Grad(kLogSigmoidGrad, g, x, {});
}

Tensor elu_backward(const Tensor& g, const c10::Scalar& a, const c10::Scalar& s,
                    const c10::Scalar& is, bool is_result, const Tensor& self_or_result) {
  return Grad(kEluGrad, g, self_or_result,
              {{is_result ? 1 : 0}, {a.toDouble(), s.toDouble(), is.toDouble()}, {}});
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define REG(name)                               \
  m.impl(#name, TORCH_FN(name##_fn));           \
  m.impl(#name "_", TORCH_FN(name##__fn));      \
  m.impl(#name ".out", TORCH_FN(name##_out_fn));
  REG(neg) REG(abs) REG(exp) REG(expm1) REG(log) REG(log1p) REG(log2) REG(log10)
  REG(sqrt) REG(rsqrt) REG(reciprocal) REG(tanh) REG(sigmoid) REG(sin) REG(cos) REG(erf)
  REG(floor) REG(ceil) REG(round) REG(trunc) REG(sign) REG(silu) REG(bitwise_not) REG(sgn)
  REG(logical_not)
  REG(tan) REG(atan) REG(asin) REG(acos) REG(sinh) REG(cosh) REG(asinh) REG(acosh) REG(atanh)
  REG(lgamma) REG(digamma) REG(erfinv) REG(exp2)
#undef REG
  m.impl("relu", TORCH_FN(relu_fn));
  m.impl("relu_", TORCH_FN(relu__fn));
  m.impl("isnan", TORCH_FN(isnan_fn));
  m.impl("isposinf", TORCH_FN(isposinf_fn));
  m.impl("isposinf.out", TORCH_FN(isposinf_out));
  m.impl("isneginf", TORCH_FN(isneginf_fn));
  m.impl("isneginf.out", TORCH_FN(isneginf_out));
  m.impl("signbit", TORCH_FN(signbit_fn));
  m.impl("special_entr", TORCH_FN(special_entr_fn));
  m.impl("special_entr.out", TORCH_FN(special_entr_out_fn));
  m.impl("signbit.out", TORCH_FN(signbit_out));
  m.impl("threshold_backward", TORCH_FN(threshold_backward));
  m.impl("tanh_backward", TORCH_FN(tanh_backward));
  m.impl("sigmoid_backward", TORCH_FN(sigmoid_backward));
  m.impl("silu_backward", TORCH_FN(silu_backward));
  m.impl("gelu", TORCH_FN(gelu));
  m.impl("gelu_", TORCH_FN(gelu_));
  m.impl("gelu_backward", TORCH_FN(gelu_backward));
  m.impl("leaky_relu", TORCH_FN(leaky_relu));
  m.impl("leaky_relu_", TORCH_FN(leaky_relu_));
  m.impl("leaky_relu.out", TORCH_FN(leaky_relu_out));
  m.impl("leaky_relu_backward", TORCH_FN(leaky_relu_backward));
  m.impl("hardtanh", TORCH_FN(hardtanh));
  m.impl("hardtanh_", TORCH_FN(hardtanh_));
  m.impl("hardtanh.out", TORCH_FN(hardtanh_out));
  m.impl("hardtanh_backward", TORCH_FN(hardtanh_backward));
  m.impl("elu", TORCH_FN(elu));
  m.impl("elu_", TORCH_FN(elu_));
  m.impl("elu.out", TORCH_FN(elu_out));
  m.impl("elu_backward", TORCH_FN(elu_backward));
  m.impl("polygamma", TORCH_FN(polygamma_fn));
  m.impl("polygamma.out", TORCH_FN(polygamma_out_fn));
  m.impl("polygamma_", TORCH_FN(polygamma__fn));
  m.impl("round.decimals", TORCH_FN(round_decimals));
  m.impl("round_.decimals", TORCH_FN(round_decimals_));
  m.impl("round.decimals_out", TORCH_FN(round_decimals_out));
  m.impl("log_sigmoid_forward", TORCH_FN(log_sigmoid_forward));
  m.impl("log_sigmoid_backward", TORCH_FN(log_sigmoid_backward));
}

}  // namespace tpu::ops
