// Elementwise ops: broadcasting, PyTorch type promotion, and one lowering
// per op; the functional, in-place and out= forms share it. Also rsub
// with a tensor (other - alpha * self).
#include <ATen/MemoryOverlap.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include <string_view>

#include <cmath>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/sub.h>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/pointwise.h"
#include "aten/pointwise/complex.h"
#include "aten/kernel_helpers.h"
#include "aten/indexing/index_checks.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

void CheckInplace(const char* op, const Tensor& self, const ElementwiseMeta& m) {
  TORCH_CHECK(self.sizes().vec() == m.sizes, "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", at::IntArrayRef(m.sizes));
  TORCH_CHECK(c10::canCast(m.result, self.scalar_type()), "result type ", m.result,
              " can't be cast to the desired output type ", self.scalar_type());
}

namespace {

enum class Kind { kArith, kTrueDiv, kCompare, kLogical, kBitwise, kFloatOnly };

ElementwiseMeta BinaryMeta(const char* name, const Tensor& a, const Tensor& b, Kind kind) {
  CheckTpu(name, a, "self");
  CheckTpu(name, b, "other");
  ElementwiseMeta m;
  m.sizes = at::infer_size(a.sizes(), b.sizes());
  at::ScalarType common = at::result_type(a, b);
  if (a.is_complex() || b.is_complex()) {  // CPU's check and message
    const std::string_view op(name);
    for (const char* ordered : {"aten::maximum", "aten::minimum", "aten::fmax", "aten::fmin"})
      TORCH_CHECK(op != ordered, op.substr(6), " not implemented for complex tensors.");
  }
  switch (kind) {
    case Kind::kArith:
      m.result = common;
      m.compute = OpMathType(common);
      break;
    case Kind::kTrueDiv:
    case Kind::kFloatOnly:
      m.result = at::isIntegralType(common, /*includeBool=*/true)
                     ? at::typeMetaToScalarType(at::get_default_dtype())
                     : common;
      m.compute = OpMathType(m.result);
      break;
    case Kind::kCompare:
      m.result = at::kBool;
      m.compute = ComputableType(common);
      break;
    case Kind::kLogical:
      m.result = at::kBool;
      m.compute = at::kBool;
      break;
    case Kind::kBitwise:
      TORCH_CHECK(at::isIntegralType(common, /*includeBool=*/true), "\"", name,
                  "\" not implemented for '", c10::toString(common), "'");
      m.result = common;
      m.compute = common;
      break;
  }
  return m;
}

// ---- binary lowerings: ins = (a, b[, alpha]); ints = (compute dtype) ----

using BinFn = Value (*)(Builder&, Value, Value);

template <BinFn F>
VS LowerBinary(Builder& b, const VS& in, const lazy::Attrs& attrs, const TT& out) {
  const auto ct = static_cast<DType>(attrs.ints[0]);
  Value x = ir::BroadcastTo(b, ir::Convert(b, in[0], ct), out[0].dims);
  Value y = ir::BroadcastTo(b, ir::Convert(b, in[1], ct), out[0].dims);
  if (in.size() > 2) {  // alpha scales the second operand
    Value alpha = ir::BroadcastTo(b, ir::Convert(b, in[2], ct), out[0].dims);
    y = ir::Binary(b, ct == DType::PRED ? "stablehlo.and" : "stablehlo.multiply", y, alpha);
  }
  return {ir::Convert(b, F(b, x, y), out[0].dtype)};
}

Value Add(Builder& b, Value x, Value y) {
  return ir::Binary(b, b.type(x).dtype == DType::PRED ? "stablehlo.or" : "stablehlo.add", x, y);
}
Value Sub(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.subtract", x, y); }
Value Mul(Builder& b, Value x, Value y) {
  return ir::Binary(b, b.type(x).dtype == DType::PRED ? "stablehlo.and" : "stablehlo.multiply",
                    x, y);
}
Value Div(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.divide", x, y); }
Value Max(Builder& b, Value x, Value y) { return ir::Max(b, x, y); }
Value Min(Builder& b, Value x, Value y) { return ir::Min(b, x, y); }
Value Pow(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.power", x, y); }
Value Atan2(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.atan2", x, y); }
// max(x, y) + log1p(exp(-|x - y|)) (base 2: exp2 and a 1/ln 2 factor); x
// itself where x == y is infinite, as on CPU.
// Shifts as PyTorch: amounts >= the bit width (or negative) shift everything
// out (0, or the sign for a right shift of a negative signed value).
Value ShiftLeft(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.shift_left", x, y); }
Value ShiftRight(Builder& b, Value x, Value y) {
  const DType t = b.type(x).dtype;
  return ir::Binary(b, ir::IsSigned(t) ? "stablehlo.shift_right_arithmetic"
                                      : "stablehlo.shift_right_logical", x, y);
}
// x == 0 ? values : (x > 0)
Value Heaviside(Builder& b, Value x, Value y) {
  const ir::TensorType t = b.type(x);
  Value zero = ir::Full(b, ir::ConstantI(b, 0, t.dtype), t.dims);
  Value pos = ir::Convert(b, ir::Compare(b, x, zero, ir::Cmp::GT), t.dtype);
  return ir::Select(b, ir::Compare(b, x, zero, ir::Cmp::EQ), y, pos);
}
// x * log1p(y), 0 where x == 0 (unless y is NaN).
Value Xlog1py(Builder& b, Value x, Value y) {
  const ir::TensorType t = b.type(x);
  Value zero = ir::Full(b, ir::ConstantI(b, 0, t.dtype), t.dims);
  Value r = ir::Binary(b, "stablehlo.multiply", x, ir::Unary(b, "stablehlo.log_plus_one", y));
  Value x0 = ir::Binary(b, "stablehlo.and", ir::Compare(b, x, zero, ir::Cmp::EQ),
                        ir::Compare(b, y, y, ir::Cmp::EQ));
  return ir::Select(b, x0, zero, r);
}
// Hurwitz zeta(x, q)
Value Zeta(Builder& b, Value x, Value q) { return b.Op1("chlo.zeta", {x, q}, b.type(x)); }
// The next float after x towards y.
Value NextAfter(Builder& b, Value x, Value y) {
  const ir::TensorType t = b.type(x);
  const int bits = ir::BitWidth(t.dtype);
  const DType it = bits == 64 ? DType::S64 : bits == 32 ? DType::S32 : DType::S16;
  const ir::TensorType itt{it, t.dims};
  auto ic = [&](int64_t v) { return ir::Full(b, ir::ConstantI(b, v, it), t.dims); };
  Value zero = ir::Full(b, ir::ConstantF(b, 0.0, t.dtype), t.dims);
  Value xb = b.Op1("stablehlo.bitcast_convert", {x}, itt);
  // Moving away from zero adds one to the bits, towards zero subtracts one.
  Value up = ir::Compare(b, y, x, ir::Cmp::GT);
  Value xpos = ir::Compare(b, x, zero, ir::Cmp::GT);
  Value away = ir::Compare(b, up, xpos, ir::Cmp::EQ);
  Value r = b.Op1("stablehlo.bitcast_convert",
                  {ir::Select(b, away, ir::Binary(b, "stablehlo.add", xb, ic(1)),
                              ir::Binary(b, "stablehlo.subtract", xb, ic(1)))},
                  t);
  // From zero: the smallest subnormal with y's sign.
  Value tiny = b.Op1("stablehlo.bitcast_convert", {ic(1)}, t);
  Value from0 = ir::Select(b, up, tiny, ir::Unary(b, "stablehlo.negate", tiny));
  r = ir::Select(b, ir::Compare(b, x, zero, ir::Cmp::EQ), from0, r);
  r = ir::Select(b, ir::Compare(b, x, y, ir::Cmp::EQ), y, r);
  Value nan = ir::Binary(b, "stablehlo.or", ir::Compare(b, x, x, ir::Cmp::NE),
                         ir::Compare(b, y, y, ir::Cmp::NE));
  return ir::Select(b, nan, ir::Binary(b, "stablehlo.add", x, y), r);
}

// sqrt(x^2 + y^2), scaled by max(|x|, |y|) so that it does not overflow.
Value Hypot(Builder& b, Value x, Value y) {
  const ir::TensorType t = b.type(x);
  Value ax = ir::Unary(b, "stablehlo.abs", x), ay = ir::Unary(b, "stablehlo.abs", y);
  Value m = ir::Binary(b, "stablehlo.maximum", ax, ay);
  Value n = ir::Binary(b, "stablehlo.minimum", ax, ay);
  Value zero = ir::Full(b, ir::ConstantF(b, 0.0, t.dtype), t.dims);
  Value one = ir::Full(b, ir::ConstantF(b, 1.0, t.dtype), t.dims);
  Value q = ir::Binary(b, "stablehlo.divide", n, m);
  q = ir::Select(b, ir::Compare(b, m, zero, ir::Cmp::EQ), zero, q);
  Value r = ir::Binary(b, "stablehlo.multiply", m,
                       ir::Unary(b, "stablehlo.sqrt",
                                 ir::Binary(b, "stablehlo.add", one, ir::Binary(b, "stablehlo.multiply", q, q))));
  // An infinite operand gives inf, even with a NaN one (as C's hypot).
  Value inf = ir::Full(b, ir::MaxValue(b, t.dtype), t.dims);
  Value any_inf = ir::Binary(b, "stablehlo.or", ir::Compare(b, ax, inf, ir::Cmp::EQ),
                             ir::Compare(b, ay, inf, ir::Cmp::EQ));
  return ir::Select(b, any_inf, inf, r);
}
// |x| with the sign bit of y.
Value Copysign(Builder& b, Value x, Value y) {
  const ir::TensorType t = b.type(x);
  const int bits = ir::BitWidth(t.dtype);
  const DType it = bits == 64 ? DType::U64 : bits == 32 ? DType::U32 : DType::U16;
  const ir::TensorType ut{it, t.dims};
  const int64_t sign = bits == 64 ? static_cast<int64_t>(0x8000000000000000ULL)
                                  : (int64_t{1} << (bits - 1));
  Value mask = ir::Full(b, ir::ConstantI(b, sign, it), t.dims);
  Value xb = b.Op1("stablehlo.bitcast_convert", {x}, ut);
  Value yb = b.Op1("stablehlo.bitcast_convert", {y}, ut);
  Value mag = ir::Binary(b, "stablehlo.and", xb, ir::Unary(b, "stablehlo.not", mask));
  Value r = ir::Binary(b, "stablehlo.or", mag, ir::Binary(b, "stablehlo.and", yb, mask));
  return b.Op1("stablehlo.bitcast_convert", {r}, t);
}
// max/min that ignore a NaN operand (NaN only when both are).
Value Fmax(Builder& b, Value x, Value y) {
  if (!ir::IsFloat(b.type(x).dtype)) return ir::Binary(b, "stablehlo.maximum", x, y);
  Value r = ir::Binary(b, "stablehlo.maximum", x, y);
  r = ir::Select(b, ir::Compare(b, x, x, ir::Cmp::NE), y, r);
  return ir::Select(b, ir::Compare(b, y, y, ir::Cmp::NE), x, r);
}
Value Fmin(Builder& b, Value x, Value y) {
  if (!ir::IsFloat(b.type(x).dtype)) return ir::Binary(b, "stablehlo.minimum", x, y);
  Value r = ir::Binary(b, "stablehlo.minimum", x, y);
  r = ir::Select(b, ir::Compare(b, x, x, ir::Cmp::NE), y, r);
  return ir::Select(b, ir::Compare(b, y, y, ir::Cmp::NE), x, r);
}
template <bool kBase2>
Value LogAddExp(Builder& b, Value x, Value y) {
  const ir::TensorType t = b.type(x);
  auto c = [&](double v) { return ir::Full(b, ir::ConstantF(b, v, t.dtype), t.dims); };
  Value m = ir::Max(b, x, y);
  Value d = ir::Unary(b, "stablehlo.negate",
                      ir::Unary(b, "stablehlo.abs", ir::Binary(b, "stablehlo.subtract", x, y)));
  if (kBase2) d = ir::Binary(b, "stablehlo.multiply", d, c(M_LN2));
  Value l = ir::Unary(b, "stablehlo.log_plus_one", ir::Unary(b, "stablehlo.exponential", d));
  if (kBase2) l = ir::Binary(b, "stablehlo.multiply", l, c(1.0 / M_LN2));
  Value r = ir::Binary(b, "stablehlo.add", m, l);
  Value inf = ir::Compare(b, ir::Unary(b, "stablehlo.abs", x), c(INFINITY), ir::Cmp::EQ);
  Value same = ir::Binary(b, "stablehlo.and", inf, ir::Compare(b, x, y, ir::Cmp::EQ));
  return ir::Select(b, same, x, r);
}
Value And(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.and", x, y); }
Value Or(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.or", x, y); }
Value Xor(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.xor", x, y); }
Value Fmod(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.remainder", x, y); }
// Python's modulo: the result takes the divisor's sign.
Value Remainder(Builder& b, Value x, Value y) {
  Value r = ir::Binary(b, "stablehlo.remainder", x, y);
  const ir::TensorType& t = b.type(r);
  Value zero = ir::Full(b, ir::ConstantI(b, 0, t.dtype), t.dims);
  Value nonzero = ir::Compare(b, r, zero, ir::Cmp::NE);
  Value sign_differs = ir::Compare(b, ir::Compare(b, r, zero, ir::Cmp::LT),
                                   ir::Compare(b, y, zero, ir::Cmp::LT), ir::Cmp::NE);
  Value fix = ir::Binary(b, "stablehlo.and", nonzero, sign_differs);
  return ir::Select(b, fix, ir::Binary(b, "stablehlo.add", r, y), r);
}
Value Eq(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::EQ); }
Value Ne(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::NE); }
Value Lt(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::LT); }
Value Le(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::LE); }
Value Gt(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::GT); }
Value Ge(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::GE); }

// Rounds a float quotient toward zero or down (div's rounding_mode).
Value Trunc(Builder& b, Value x) {
  const ir::TensorType& t = b.type(x);
  Value zero = ir::Full(b, ir::ConstantI(b, 0, t.dtype), t.dims);
  return ir::Select(b, ir::Compare(b, x, zero, ir::Cmp::LT), ir::Unary(b, "stablehlo.ceil", x),
                    ir::Unary(b, "stablehlo.floor", x));
}
Value DivTrunc(Builder& b, Value x, Value y) {
  if (ir::IsInteger(b.type(x).dtype)) return ir::Binary(b, "stablehlo.divide", x, y);
  return Trunc(b, ir::Binary(b, "stablehlo.divide", x, y));
}
Value DivFloor(Builder& b, Value x, Value y) {
  const ir::TensorType& t = b.type(x);
  if (!ir::IsInteger(t.dtype)) return ir::Unary(b, "stablehlo.floor", Div(b, x, y));
  Value q = ir::Binary(b, "stablehlo.divide", x, y);
  Value r = ir::Binary(b, "stablehlo.remainder", x, y);
  Value zero = ir::Full(b, ir::ConstantI(b, 0, t.dtype), t.dims);
  Value one = ir::Full(b, ir::ConstantI(b, 1, t.dtype), t.dims);
  Value adjust = ir::Binary(
      b, "stablehlo.and", ir::Compare(b, r, zero, ir::Cmp::NE),
      ir::Compare(b, ir::Compare(b, r, zero, ir::Cmp::LT), ir::Compare(b, y, zero, ir::Cmp::LT),
                  ir::Cmp::NE));
  return ir::Select(b, adjust, ir::Binary(b, "stablehlo.subtract", q, one), q);
}

struct BinaryOp {
  lazy::Lowering lowering;
  Kind kind;
};

#define TPU_BINARY(var, aten, fn, kind) \
  constexpr BinaryOp var{{aten, &LowerBinary<fn>}, Kind::kind};
TPU_BINARY(kAdd, "aten::add", Add, kArith)
TPU_BINARY(kSub, "aten::sub", Sub, kArith)
TPU_BINARY(kMul, "aten::mul", Mul, kArith)
TPU_BINARY(kDiv, "aten::div", Div, kTrueDiv)
TPU_BINARY(kDivTrunc, "aten::div.trunc", DivTrunc, kArith)
TPU_BINARY(kDivFloor, "aten::div.floor", DivFloor, kArith)
TPU_BINARY(kMaximum, "aten::maximum", Max, kArith)
TPU_BINARY(kMinimum, "aten::minimum", Min, kArith)
TPU_BINARY(kPow, "aten::pow", Pow, kArith)
TPU_BINARY(kAtan2, "aten::atan2", Atan2, kFloatOnly)
TPU_BINARY(kLogAddExp, "aten::logaddexp", LogAddExp<false>, kFloatOnly)
TPU_BINARY(kHypot, "aten::hypot", Hypot, kArith)
TPU_BINARY(kShiftLeft, "aten::bitwise_left_shift", ShiftLeft, kBitwise)
TPU_BINARY(kShiftRight, "aten::bitwise_right_shift", ShiftRight, kBitwise)
TPU_BINARY(kHeaviside, "aten::heaviside", Heaviside, kArith)
TPU_BINARY(kXlog1py, "aten::special_xlog1py", Xlog1py, kFloatOnly)
TPU_BINARY(kZeta, "aten::special_zeta", Zeta, kFloatOnly)
TPU_BINARY(kNextAfter, "aten::nextafter", NextAfter, kArith)
TPU_BINARY(kCopysign, "aten::copysign", Copysign, kFloatOnly)
TPU_BINARY(kFmax, "aten::fmax", Fmax, kArith)
TPU_BINARY(kFmin, "aten::fmin", Fmin, kArith)
TPU_BINARY(kLogAddExp2, "aten::logaddexp2", LogAddExp<true>, kFloatOnly)
TPU_BINARY(kFmod, "aten::fmod", Fmod, kArith)
TPU_BINARY(kRemainder, "aten::remainder", Remainder, kArith)
TPU_BINARY(kBitAnd, "aten::bitwise_and", And, kBitwise)
TPU_BINARY(kBitOr, "aten::bitwise_or", Or, kBitwise)
TPU_BINARY(kBitXor, "aten::bitwise_xor", Xor, kBitwise)
TPU_BINARY(kLogicalAnd, "aten::logical_and", And, kLogical)
TPU_BINARY(kLogicalOr, "aten::logical_or", Or, kLogical)
TPU_BINARY(kLogicalXor, "aten::logical_xor", Xor, kLogical)
TPU_BINARY(kEq, "aten::eq", Eq, kCompare)
TPU_BINARY(kNe, "aten::ne", Ne, kCompare)
TPU_BINARY(kLt, "aten::lt", Lt, kCompare)
TPU_BINARY(kLe, "aten::le", Le, kCompare)
TPU_BINARY(kGt, "aten::gt", Gt, kCompare)
TPU_BINARY(kGe, "aten::ge", Ge, kCompare)
#undef TPU_BINARY

std::vector<lazy::Operand> BinaryInputs(const Tensor& a, const Tensor& b, const ElementwiseMeta& m,
                                        const c10::Scalar* alpha) {
  std::vector<lazy::Operand> in = Operands(OperandOf(a), OperandOf(b));
  if (alpha) {  // the checks of ATen's alpha_check, with its messages
    const at::ScalarType t = m.result;
    TORCH_CHECK(!alpha->isBoolean() || t == at::kBool,
                "Boolean alpha only supported for Boolean results.");
    TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t) || alpha->isIntegral(true),
                "For integral input tensors, argument alpha must not be a floating point number.");
    TORCH_CHECK(at::isComplexType(t) || !alpha->isComplex(),
                "For non-complex input tensors, argument alpha must not be a complex number.");
  }
  if (alpha && !(alpha->isIntegral(true) && alpha->toLong() == 1) &&
      !(alpha->isFloatingPoint() && alpha->toDouble() == 1.0)) {
    in.push_back(ScalarOperand(*alpha, m.compute));
  }
  return in;
}

lazy::Attrs ComputeAttrs(const ElementwiseMeta& m) {
  return lazy::Attrs{{static_cast<int64_t>(ToIr(m.compute))}, {}, {}};
}

Tensor Binary(const BinaryOp& op, const Tensor& a, const Tensor& b,
              const c10::Scalar* alpha = nullptr) {
  ElementwiseMeta m = BinaryMeta(op.lowering.name, a, b, op.kind);
  return RunElementwise(op.lowering, ComputeAttrs(m), BinaryInputs(a, b, m, alpha),
                        TypeOf(m.sizes, m.result), {&a, &b});
}

Tensor& BinaryInplace(const BinaryOp& op, Tensor& self, const Tensor& other,
                      const c10::Scalar* alpha = nullptr) {
  ElementwiseMeta m = BinaryMeta(op.lowering.name, self, other, op.kind);
  CheckInplace(op.lowering.name, self, m);
  RunInto(op.lowering, ComputeAttrs(m), BinaryInputs(self, other, m, alpha),
          {TypeOf(m.sizes, m.result)}, {self});
  return self;
}

Tensor& BinaryOut(const BinaryOp& op, const Tensor& a, const Tensor& b, Tensor& out,
                  const c10::Scalar* alpha = nullptr) {
  ElementwiseMeta m = BinaryMeta(op.lowering.name, a, b, op.kind);
  PrepareOut(op.lowering.name, out, m.sizes, m.result);
  RunInto(op.lowering, ComputeAttrs(m), BinaryInputs(a, b, m, alpha),
          {TypeOf(m.sizes, m.result)}, {out});
  return out;
}

Tensor ScalarTensor(const c10::Scalar& s) {
  Tensor t = at::scalar_to_tensor(s);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

const BinaryOp& DivOp(std::optional<c10::string_view> mode) {
  if (!mode.has_value()) return kDiv;
  if (*mode == "trunc") return kDivTrunc;
  TORCH_CHECK(*mode == "floor", "div expected rounding_mode to be one of None, 'trunc', or "
              "'floor' but found '", *mode, "'");
  return kDivFloor;
}

// ---- registration of the three forms ----

#define TPU_BINARY_ALPHA_KERNELS(name, op)                                                   \
  Tensor name##_tensor(const Tensor& a, const Tensor& b, const c10::Scalar& alpha) {         \
    return Binary(op, a, b, &alpha);                                                         \
  }                                                                                          \
  Tensor& name##__tensor(Tensor& a, const Tensor& b, const c10::Scalar& alpha) {             \
    return BinaryInplace(op, a, b, &alpha);                                                  \
  }                                                                                          \
  Tensor& name##_out(const Tensor& a, const Tensor& b, const c10::Scalar& alpha, Tensor& o) { \
    return BinaryOut(op, a, b, o, &alpha);                                                   \
  }
TPU_BINARY_ALPHA_KERNELS(add, kAdd)
TPU_BINARY_ALPHA_KERNELS(sub, kSub)
#undef TPU_BINARY_ALPHA_KERNELS

#define TPU_BINARY_KERNELS(name, op)                                                       \
  Tensor name##_tensor(const Tensor& a, const Tensor& b) { return Binary(op, a, b); }      \
  Tensor& name##__tensor(Tensor& a, const Tensor& b) { return BinaryInplace(op, a, b); }  \
  Tensor& name##_out(const Tensor& a, const Tensor& b, Tensor& o) {                        \
    return BinaryOut(op, a, b, o);                                                         \
  }                                                                                        \
  Tensor name##_scalar(const Tensor& a, const c10::Scalar& b) {                            \
    return Binary(op, a, ScalarTensor(b));                                                 \
  }                                                                                        \
  Tensor& name##__scalar(Tensor& a, const c10::Scalar& b) {                                \
    return BinaryInplace(op, a, ScalarTensor(b));                                          \
  }                                                                                        \
  Tensor& name##_scalar_out(const Tensor& a, const c10::Scalar& b, Tensor& o) {            \
    return BinaryOut(op, a, ScalarTensor(b), o);                                           \
  }
TPU_BINARY_KERNELS(mul, kMul)
TPU_BINARY_KERNELS(maximum, kMaximum)
TPU_BINARY_KERNELS(minimum, kMinimum)
TPU_BINARY_KERNELS(pow, kPow)
TPU_BINARY_KERNELS(atan2, kAtan2)
TPU_BINARY_KERNELS(logaddexp, kLogAddExp)
TPU_BINARY_KERNELS(logaddexp2, kLogAddExp2)
TPU_BINARY_KERNELS(hypot, kHypot)
TPU_BINARY_KERNELS(bitwise_left_shift, kShiftLeft)
TPU_BINARY_KERNELS(bitwise_right_shift, kShiftRight)
TPU_BINARY_KERNELS(heaviside, kHeaviside)
TPU_BINARY_KERNELS(special_xlog1py, kXlog1py)
TPU_BINARY_KERNELS(special_zeta, kZeta)
TPU_BINARY_KERNELS(nextafter, kNextAfter)
TPU_BINARY_KERNELS(copysign, kCopysign)
TPU_BINARY_KERNELS(fmax, kFmax)
TPU_BINARY_KERNELS(fmin, kFmin)
TPU_BINARY_KERNELS(fmod, kFmod)
TPU_BINARY_KERNELS(remainder, kRemainder)
TPU_BINARY_KERNELS(bitwise_and, kBitAnd)
TPU_BINARY_KERNELS(bitwise_or, kBitOr)
TPU_BINARY_KERNELS(bitwise_xor, kBitXor)
TPU_BINARY_KERNELS(logical_and, kLogicalAnd)
TPU_BINARY_KERNELS(logical_or, kLogicalOr)
TPU_BINARY_KERNELS(logical_xor, kLogicalXor)
TPU_BINARY_KERNELS(eq, kEq)
TPU_BINARY_KERNELS(ne, kNe)
TPU_BINARY_KERNELS(lt, kLt)
TPU_BINARY_KERNELS(le, kLe)
TPU_BINARY_KERNELS(gt, kGt)
TPU_BINARY_KERNELS(ge, kGe)
TPU_BINARY_KERNELS(div, kDiv)
TPU_BINARY_KERNELS(floor_divide, kDivFloor)
#undef TPU_BINARY_KERNELS

Tensor div_mode(const Tensor& a, const Tensor& b, std::optional<c10::string_view> mode) {
  return Binary(DivOp(mode), a, b);
}
Tensor& div__mode(Tensor& a, const Tensor& b, std::optional<c10::string_view> mode) {
  return BinaryInplace(DivOp(mode), a, b);
}
Tensor& div_mode_out(const Tensor& a, const Tensor& b, std::optional<c10::string_view> mode,
                     Tensor& o) {
  return BinaryOut(DivOp(mode), a, b, o);
}
Tensor pow_scalar_self(const c10::Scalar& a, const Tensor& b) {
  return Binary(kPow, ScalarTensor(a), b);
}
Tensor& pow_scalar_self_out(const c10::Scalar& a, const Tensor& b, Tensor& out) {
  return BinaryOut(kPow, ScalarTensor(a), b, out);
}

// ---- ternary: lerp, addcmul, addcdiv ----
// ins = (a, b, c[, scalar]); ints = (compute dtype).

using TerFn = Value (*)(Builder&, Value, Value, Value, Value);
template <TerFn F>
VS LowerTernary(Builder& b, const VS& in, const lazy::Attrs& attrs, const TT& out) {
  const auto ct = static_cast<DType>(attrs.ints[0]);
  auto arg = [&](size_t i) { return ir::BroadcastTo(b, ir::Convert(b, in[i], ct), out[0].dims); };
  Value s = in.size() > 3 ? arg(3) : Value{};
  return {ir::Convert(b, F(b, arg(0), arg(1), arg(2), s), out[0].dtype)};
}

// PyTorch's lerp: exact at weight 0 and 1 by switching the formula at 0.5.
Value Lerp(Builder& b, Value a, Value e, Value w, Value) {
  const ir::TensorType& t = b.type(a);
  Value diff = ir::Binary(b, "stablehlo.subtract", e, a);
  Value half = ir::Full(b, ir::ConstantF(b, 0.5, t.dtype), t.dims);
  Value one = ir::Full(b, ir::ConstantF(b, 1.0, t.dtype), t.dims);
  Value low = ir::Binary(b, "stablehlo.add", a, ir::Binary(b, "stablehlo.multiply", w, diff));
  Value high = ir::Binary(b, "stablehlo.subtract", e,
                          ir::Binary(b, "stablehlo.multiply", diff,
                                     ir::Binary(b, "stablehlo.subtract", one, w)));
  return ir::Select(b, ir::Compare(b, ir::Unary(b, "stablehlo.abs", w), half, ir::Cmp::LT), low,
                    high);
}
Value Addcmul(Builder& b, Value a, Value x, Value y, Value s) {
  Value p = ir::Binary(b, "stablehlo.multiply", x, y);
  if (s.valid()) p = ir::Binary(b, "stablehlo.multiply", s, p);
  return ir::Binary(b, "stablehlo.add", a, p);
}
Value Addcdiv(Builder& b, Value a, Value x, Value y, Value s) {
  Value q = ir::Binary(b, "stablehlo.divide", x, y);
  if (s.valid()) q = ir::Binary(b, "stablehlo.multiply", s, q);
  return ir::Binary(b, "stablehlo.add", a, q);
}
constexpr lazy::Lowering kLerp{"aten::lerp", &LowerTernary<Lerp>};
constexpr lazy::Lowering kAddcmul{"aten::addcmul", &LowerTernary<Addcmul>};
constexpr lazy::Lowering kAddcdiv{"aten::addcdiv", &LowerTernary<Addcdiv>};

ElementwiseMeta TernaryMeta(const char* name, const Tensor& a, const Tensor& b, const Tensor& c) {
  CheckTpu(name, a, "self");
  CheckTpu(name, b, "tensor1");
  CheckTpu(name, c, "tensor2");
  ElementwiseMeta m;
  m.sizes = at::infer_size(a.sizes(), at::infer_size(b.sizes(), c.sizes()));
  at::native::ResultTypeState st{};
  for (const Tensor* t : {&a, &b, &c}) st = at::native::update_result_type_state(*t, st);
  m.result = at::native::result_type(st);
  m.compute = OpMathType(m.result);
  return m;
}

// Runs a ternary op as functional (dst == nullptr), in-place or out=.
Tensor Ternary(const lazy::Lowering& op, const Tensor& a, const Tensor& b, const Tensor& c,
               const c10::Scalar* s, const Tensor* dst, bool inplace) {
  ElementwiseMeta m = TernaryMeta(op.name, a, b, c);
  std::vector<lazy::Operand> in{OperandOf(a), OperandOf(b), OperandOf(c)};
  if (s && !(s->toComplexDouble() == c10::complex<double>(1, 0)))
    in.push_back(ScalarOperand(*s, m.compute));
  const lazy::Attrs attrs{{static_cast<int64_t>(ToIr(m.compute))}, {}, {}};
  if (!dst) return RunElementwise(op, attrs, in, TypeOf(m.sizes, m.result), {&a, &b, &c});
  if (inplace) {
    CheckInplace(op.name, *dst, m);
  } else {
    PrepareOut(op.name, *dst, m.sizes, m.result);
  }
  RunInto(op, attrs, in, {TypeOf(m.sizes, m.result)}, {*dst});
  return *dst;
}

void CheckLerp(const Tensor& self, const Tensor& end) {
  TORCH_CHECK(self.scalar_type() == end.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `end` but got dtype ", end.scalar_type());
}
Tensor lerp_scalar(const Tensor& a, const Tensor& e, const c10::Scalar& w) {
  CheckLerp(a, e);
  return Ternary(kLerp, a, e, ScalarTensor(w), nullptr, nullptr, false);
}
Tensor& lerp__scalar(Tensor& a, const Tensor& e, const c10::Scalar& w) {
  CheckLerp(a, e);
  Ternary(kLerp, a, e, ScalarTensor(w), nullptr, &a, true);
  return a;
}
Tensor& lerp_scalar_out(const Tensor& a, const Tensor& e, const c10::Scalar& w, Tensor& o) {
  CheckLerp(a, e);
  Ternary(kLerp, a, e, ScalarTensor(w), nullptr, &o, false);
  return o;
}
Tensor lerp_tensor(const Tensor& a, const Tensor& e, const Tensor& w) {
  CheckLerp(a, e);
  return Ternary(kLerp, a, e, w, nullptr, nullptr, false);
}
Tensor& lerp__tensor(Tensor& a, const Tensor& e, const Tensor& w) {
  CheckLerp(a, e);
  Ternary(kLerp, a, e, w, nullptr, &a, true);
  return a;
}
Tensor& lerp_tensor_out(const Tensor& a, const Tensor& e, const Tensor& w, Tensor& o) {
  CheckLerp(a, e);
  Ternary(kLerp, a, e, w, nullptr, &o, false);
  return o;
}

// ATen's refusal of integer division in addcdiv (its message).
void CheckAddc(const lazy::Lowering& op, const Tensor& x, const Tensor& y) {
  if (&op != &kAddcdiv || !at::isIntegralType(x.scalar_type(), /*includeBool=*/true) ||
      !at::isIntegralType(y.scalar_type(), /*includeBool=*/true))
    return;
  TORCH_CHECK(false, "Integer division with addcdiv is no longer supported, and in a future  ",
              "release addcdiv will perform a true division of tensor1 and tensor2. ",
              "The historic addcdiv behavior can be implemented as ",
              "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) ",
              "for integer inputs and as ", "(input + value * tensor1 / tensor2) for float inputs. ",
              "The future addcdiv behavior is just the latter implementation: ",
              "(input + value * tensor1 / tensor2), for all dtypes.");
}

#define TPU_ADDC_KERNELS(name, op)                                                        \
  Tensor name(const Tensor& a, const Tensor& x, const Tensor& y, const c10::Scalar& v) {  \
    CheckAddc(op, x, y);                                                                  \
    return Ternary(op, a, x, y, &v, nullptr, false);                                      \
  }                                                                                       \
  Tensor& name##_(Tensor& a, const Tensor& x, const Tensor& y, const c10::Scalar& v) {    \
    CheckAddc(op, x, y);                                                                  \
    Ternary(op, a, x, y, &v, &a, true);                                                   \
    return a;                                                                             \
  }                                                                                       \
  Tensor& name##_out(const Tensor& a, const Tensor& x, const Tensor& y,                   \
                     const c10::Scalar& v, Tensor& o) {                                   \
    CheckAddc(op, x, y);                                                                  \
    Ternary(op, a, x, y, &v, &o, false);                                                  \
    return o;                                                                             \
  }
TPU_ADDC_KERNELS(addcmul, kAddcmul)
TPU_ADDC_KERNELS(addcdiv, kAddcdiv)
#undef TPU_ADDC_KERNELS

// ---- where(cond, a, b) ----

VS LowerWhere(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  Value c = ir::BroadcastTo(b, ir::Convert(b, in[0], DType::PRED), out[0].dims);
  Value x = ir::BroadcastTo(b, ir::Convert(b, in[1], out[0].dtype), out[0].dims);
  Value y = ir::BroadcastTo(b, ir::Convert(b, in[2], out[0].dtype), out[0].dims);
  return {ir::Select(b, c, x, y)};
}
constexpr lazy::Lowering kWhere{"aten::where", &LowerWhere};

ElementwiseMeta WhereMeta(const Tensor& c, const Tensor& a, const Tensor& b) {
  CheckTpu("where", c, "condition");
  CheckTpu("where", a, "self");
  CheckTpu("where", b, "other");
  TORCH_CHECK(c.scalar_type() == at::kBool || c.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              c.scalar_type());
  ElementwiseMeta m;
  m.sizes = at::infer_size(c.sizes(), at::infer_size(a.sizes(), b.sizes()));
  m.result = at::result_type(a, b);
  m.compute = m.result;
  return m;
}

Tensor where_self(const Tensor& c, const Tensor& a, const Tensor& b) {
  ElementwiseMeta m = WhereMeta(c, a, b);
  return RunElementwise(kWhere, {}, Operands(OperandOf(c), OperandOf(a), OperandOf(b)),
                        TypeOf(m.sizes, m.result), {&c, &a, &b});
}
Tensor& where_self_out(const Tensor& c, const Tensor& a, const Tensor& b, Tensor& out) {
  ElementwiseMeta m = WhereMeta(c, a, b);
  PrepareOut("where", out, m.sizes, m.result);
  RunInto(kWhere, {}, Operands(OperandOf(c), OperandOf(a), OperandOf(b)), {TypeOf(m.sizes, m.result)},
          {out});
  return out;
}

// masked_fill_(mask, value): self = where(mask, value, self).
Tensor& masked_fill__scalar(Tensor& self, const Tensor& mask, const c10::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but "
              "got mask with dtype ", mask.scalar_type());
  ElementwiseMeta m{self.sizes().vec(), self.scalar_type(), self.scalar_type()};
  at::infer_size(self.sizes(), mask.sizes());
  const bool expanded = WarnIfExpandedWrite(self, "masked_fill_", "tensor[mask] = scalar");
  at::assert_no_partial_overlap(self, mask);
  RunInto(kWhere, {}, {OperandOf(mask), ScalarOperand(value, self.scalar_type()),
                       OperandOf(self)},
          {TypeOf(m.sizes, m.result)}, {self}, expanded);
  return self;
}
Tensor& masked_fill__tensor(Tensor& self, const Tensor& mask, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but "
              "got tensor with ", value.dim(), " dimension(s).");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but "
              "got mask with dtype ", mask.scalar_type());
  const bool expanded = WarnIfExpandedWrite(self, "masked_fill_", "tensor[mask] = scalar");
  at::assert_no_partial_overlap(self, mask);
  RunInto(kWhere, {}, {OperandOf(mask), OperandOf(value), OperandOf(self)},
          {TypeOf(self.sizes(), self.scalar_type())}, {self}, expanded);
  return self;
}

// ---- fill ----

VS LowerFill(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  return {ir::Full(b, ir::Convert(b, in[0], out[0].dtype), out[0].dims)};
}
constexpr lazy::Lowering kFill{"aten::fill_", &LowerFill};

// fill_ may write an overlapping (expanded) tensor, as on CPU: every
// element gets the same value.
Tensor& fill__scalar(Tensor& self, const c10::Scalar& v) {
  RunInto(kFill, {}, {ScalarOperand(v, self.scalar_type())},
          {TypeOf(self.sizes(), self.scalar_type())}, {self}, /*allow_overlap=*/true);
  return self;
}
Tensor& fill__tensor(Tensor& self, const Tensor& v) {
  TORCH_CHECK(v.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              v.dim(), " dimensions.");
  RunInto(kFill, {}, {OperandOf(v)}, {TypeOf(self.sizes(), self.scalar_type())}, {self},
          /*allow_overlap=*/true);
  return self;
}
Tensor& zero_(Tensor& self) { return fill__scalar(self, 0); }


// ---- rsub ----

Tensor rsub_tensor_tpu(const Tensor& self, const Tensor& other, const c10::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define REG3(name, out)                               \
  m.impl(#name ".Tensor", TORCH_FN(name##_tensor));   \
  m.impl(#name "_.Tensor", TORCH_FN(name##__tensor)); \
  m.impl(#name out, TORCH_FN(name##_out));
  REG3(add, ".out")
  REG3(sub, ".out")
  REG3(mul, ".out")
  REG3(div, ".out")
#undef REG3
#define REG3(name) \
  m.impl(#name ".Tensor", TORCH_FN(name##_tensor));   \
  m.impl(#name "_.Tensor", TORCH_FN(name##__tensor)); \
  m.impl(#name ".Tensor_out", TORCH_FN(name##_out));
  REG3(eq)
  REG3(ne)
  REG3(lt)
  REG3(le)
  REG3(gt)
  REG3(ge)
  REG3(fmod)
  REG3(remainder)
  REG3(bitwise_and)
  REG3(bitwise_or)
  REG3(bitwise_xor)
#undef REG3
#define REG_SCALAR(name)                                   \
  m.impl(#name ".Scalar", TORCH_FN(name##_scalar));        \
  m.impl(#name "_.Scalar", TORCH_FN(name##__scalar));      \
  m.impl(#name ".Scalar_out", TORCH_FN(name##_scalar_out));
  REG_SCALAR(eq)
  REG_SCALAR(ne)
  REG_SCALAR(lt)
  REG_SCALAR(le)
  REG_SCALAR(gt)
  REG_SCALAR(ge)
  REG_SCALAR(fmod)
  REG_SCALAR(remainder)
#undef REG_SCALAR
#define REG_PLAIN(name)                              \
  m.impl(#name, TORCH_FN(name##_tensor));            \
  m.impl(#name ".out", TORCH_FN(name##_out));
  REG_PLAIN(maximum)
  REG_PLAIN(minimum)
  REG_PLAIN(atan2)
  REG_PLAIN(logaddexp)
  REG_PLAIN(logaddexp2)
  REG_PLAIN(hypot)
  m.impl("hypot_", TORCH_FN(hypot__tensor));
  m.impl("bitwise_left_shift.Tensor", TORCH_FN(bitwise_left_shift_tensor));
  m.impl("bitwise_left_shift_.Tensor", TORCH_FN(bitwise_left_shift__tensor));
  m.impl("bitwise_left_shift.Tensor_out", TORCH_FN(bitwise_left_shift_out));
  m.impl("bitwise_right_shift.Tensor", TORCH_FN(bitwise_right_shift_tensor));
  m.impl("bitwise_right_shift_.Tensor", TORCH_FN(bitwise_right_shift__tensor));
  m.impl("bitwise_right_shift.Tensor_out", TORCH_FN(bitwise_right_shift_out));
  m.impl("__lshift__.Tensor", TORCH_FN(bitwise_left_shift_tensor));
  m.impl("__lshift__.Scalar", TORCH_FN(bitwise_left_shift_scalar));
  m.impl("__ilshift__.Tensor", TORCH_FN(bitwise_left_shift__tensor));
  m.impl("__ilshift__.Scalar", TORCH_FN(bitwise_left_shift__scalar));
  m.impl("__rshift__.Tensor", TORCH_FN(bitwise_right_shift_tensor));
  m.impl("__rshift__.Scalar", TORCH_FN(bitwise_right_shift_scalar));
  m.impl("__irshift__.Tensor", TORCH_FN(bitwise_right_shift__tensor));
  m.impl("__irshift__.Scalar", TORCH_FN(bitwise_right_shift__scalar));
  m.impl("heaviside", TORCH_FN(heaviside_tensor));
  m.impl("heaviside_", TORCH_FN(heaviside__tensor));
  m.impl("heaviside.out", TORCH_FN(heaviside_out));
  m.impl("special_xlog1py", TORCH_FN(special_xlog1py_tensor));
  m.impl("special_xlog1py.out", TORCH_FN(special_xlog1py_out));
  m.impl("special_zeta", TORCH_FN(special_zeta_tensor));
  m.impl("special_zeta.out", TORCH_FN(special_zeta_out));
  m.impl("nextafter", TORCH_FN(nextafter_tensor));
  m.impl("nextafter_", TORCH_FN(nextafter__tensor));
  m.impl("nextafter.out", TORCH_FN(nextafter_out));
  REG_PLAIN(fmax)
  REG_PLAIN(fmin)
  m.impl("copysign.Tensor", TORCH_FN(copysign_tensor));
  m.impl("copysign.out", TORCH_FN(copysign_out));
  m.impl("copysign.Scalar", TORCH_FN(copysign_scalar));
  m.impl("copysign_.Tensor", TORCH_FN(copysign__tensor));
  m.impl("copysign_.Scalar", TORCH_FN(copysign__scalar));
  REG_PLAIN(logical_and)
  REG_PLAIN(logical_or)
  REG_PLAIN(logical_xor)
#undef REG_PLAIN
  m.impl("atan2_", TORCH_FN(atan2__tensor));
  m.impl("logical_and_", TORCH_FN(logical_and__tensor));
  m.impl("logical_or_", TORCH_FN(logical_or__tensor));
  m.impl("logical_xor_", TORCH_FN(logical_xor__tensor));
  m.impl("floor_divide", TORCH_FN(floor_divide_tensor));
  m.impl("floor_divide_.Tensor", TORCH_FN(floor_divide__tensor));
  m.impl("floor_divide.out", TORCH_FN(floor_divide_out));
  m.impl("floor_divide.Scalar", TORCH_FN(floor_divide_scalar));
  m.impl("floor_divide_.Scalar", TORCH_FN(floor_divide__scalar));
  m.impl("div.Tensor_mode", TORCH_FN(div_mode));
  m.impl("div_.Tensor_mode", TORCH_FN(div__mode));
  m.impl("div.out_mode", TORCH_FN(div_mode_out));
  m.impl("pow.Tensor_Tensor", TORCH_FN(pow_tensor));
  m.impl("pow_.Tensor", TORCH_FN(pow__tensor));
  m.impl("pow.Tensor_Tensor_out", TORCH_FN(pow_out));
  m.impl("pow.Tensor_Scalar", TORCH_FN(pow_scalar));
  m.impl("pow_.Scalar", TORCH_FN(pow__scalar));
  m.impl("pow.Tensor_Scalar_out", TORCH_FN(pow_scalar_out));
  m.impl("pow.Scalar", TORCH_FN(pow_scalar_self));
  m.impl("pow.Scalar_out", TORCH_FN(pow_scalar_self_out));
  m.impl("lerp.Scalar", TORCH_FN(lerp_scalar));
  m.impl("lerp_.Scalar", TORCH_FN(lerp__scalar));
  m.impl("lerp.Scalar_out", TORCH_FN(lerp_scalar_out));
  m.impl("lerp.Tensor", TORCH_FN(lerp_tensor));
  m.impl("lerp_.Tensor", TORCH_FN(lerp__tensor));
  m.impl("lerp.Tensor_out", TORCH_FN(lerp_tensor_out));
  m.impl("addcmul", TORCH_FN(addcmul));
  m.impl("addcmul_", TORCH_FN(addcmul_));
  m.impl("addcmul.out", TORCH_FN(addcmul_out));
  m.impl("addcdiv", TORCH_FN(addcdiv));
  m.impl("addcdiv_", TORCH_FN(addcdiv_));
  m.impl("addcdiv.out", TORCH_FN(addcdiv_out));
  m.impl("where.self", TORCH_FN(where_self));
  m.impl("where.self_out", TORCH_FN(where_self_out));
  m.impl("masked_fill_.Scalar", TORCH_FN(masked_fill__scalar));
  m.impl("masked_fill_.Tensor", TORCH_FN(masked_fill__tensor));
  m.impl("fill_.Scalar", TORCH_FN(fill__scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill__tensor));
  m.impl("zero_", TORCH_FN(zero_));
  m.impl("rsub.Tensor", TORCH_FN(rsub_tensor_tpu));
}

}  // namespace tpu::ops
