// gcd / lcm (Euclid's algorithm in a stablehlo.while) and frexp (from the
// floating-point bits): lowerings of their own.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/result_type.h>
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

// ---- gcd / lcm: Euclid's algorithm, all elements in one while loop ----

// ins = (a, b) in the result dtype and shape; ints = (lcm?).
VS LowerGcd(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const ir::Dims& d = out[0].dims;
  const DType t = out[0].dtype;
  Value a0 = ir::Unary(b, "stablehlo.abs", ir::BroadcastTo(b, ir::Convert(b, in[0], t), d));
  Value b0 = ir::Unary(b, "stablehlo.abs", ir::BroadcastTo(b, ir::Convert(b, in[1], t), d));
  ir::Dims all;
  for (size_t i = 0; i < d.size(); ++i) all.push_back(static_cast<int64_t>(i));
  auto zero = [&](Builder& bb) { return ir::Full(bb, ir::ConstantI(bb, 0, t), d); };
  VS r = loop::While(
      b, {a0, b0},
      [&](Builder& bb, const VS& v) {
        Value nz = ir::Compare(bb, v[0], zero(bb), ir::Cmp::NE);
        return ir::Reduce(bb, nz, ir::ConstantI(bb, 0, DType::PRED), all, "stablehlo.or");
      },
      [&](Builder& bb, const VS& v) {
        Value nz = ir::Compare(bb, v[0], zero(bb), ir::Cmp::NE);
        Value safe = ir::Select(bb, nz, v[0], ir::Full(bb, ir::ConstantI(bb, 1, t), d));
        Value rem = ir::Binary(bb, "stablehlo.remainder", v[1], safe);
        return VS{ir::Select(bb, nz, rem, zero(bb)), ir::Select(bb, nz, v[0], v[1])};
      });
  Value g = r[1];
  if (!at.ints[0]) return {g};
  Value gz = ir::Compare(b, g, zero(b), ir::Cmp::EQ);
  Value safe = ir::Select(b, gz, ir::Full(b, ir::ConstantI(b, 1, t), d), g);
  Value l = ir::Unary(b, "stablehlo.abs",
                      Mul(b, ir::Binary(b, "stablehlo.divide",
                                        ir::BroadcastTo(b, ir::Convert(b, in[0], t), d), safe),
                          ir::BroadcastTo(b, ir::Convert(b, in[1], t), d)));
  return {ir::Select(b, gz, zero(b), l)};
}
constexpr lazy::Lowering kGcd{"aten::gcd", &LowerGcd};

Tensor Gcd(const char* op, const Tensor& a, const Tensor& bb, bool lcm) {
  CheckTpu(op, a, "self");
  CheckTpu(op, bb, "other");
  const auto rt = at::result_type(a, bb);
  TORCH_CHECK(at::isIntegralType(rt, /*includeBool=*/false), "\"", op, "_cpu\" not implemented for '",
              c10::toString(rt), "'");
  auto shape = at::infer_size(a.sizes(), bb.sizes());
  if (c10::multiply_integers(shape) == 0) return EmptyTpu(shape, rt);
  return Run1(kGcd, {{lcm ? 1 : 0}, {}, {}}, {OperandOf(a), OperandOf(bb)}, TypeOf(shape, rt));
}
Tensor gcd_tpu(const Tensor& a, const Tensor& b) { return Gcd("gcd", a, b, false); }
Tensor& gcd_out_tpu(const Tensor& a, const Tensor& b, Tensor& out) {
  return CopyInto("gcd", Gcd("gcd", a, b, false), out);
}
Tensor& gcd__tpu(Tensor& a, const Tensor& b) { return a.copy_(Gcd("gcd", a, b, false)); }
Tensor lcm_tpu(const Tensor& a, const Tensor& b) { return Gcd("lcm", a, b, true); }
Tensor& lcm_out_tpu(const Tensor& a, const Tensor& b, Tensor& out) {
  return CopyInto("lcm", Gcd("lcm", a, b, true), out);
}
Tensor& lcm__tpu(Tensor& a, const Tensor& b) { return a.copy_(Gcd("lcm", a, b, true)); }

// ---- frexp: mantissa in [0.5, 1) and exponent, from the bits ----

// ins = (x); out = (mantissa (x's dtype), exponent (s32)). Computed in f32
// for 16-bit floats (exact), f64 for f64.
VS LowerFrexp(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const DType ft = out[0].dtype == DType::F64 ? DType::F64 : DType::F32;
  const bool dbl = ft == DType::F64;
  const DType it = dbl ? DType::S64 : DType::S32;
  const int mbits = dbl ? 52 : 23;
  const int64_t emask = dbl ? 0x7ff : 0xff;
  const int64_t bias_m1 = dbl ? 1022 : 126;
  const ir::Dims& d = out[0].dims;
  auto I = [&](int64_t v) { return ir::Full(b, ir::ConstantI(b, v, it), d); };
  Value x = ir::Convert(b, in[0], ft);
  // Subnormals scaled into the normal range first.
  const int sub_shift = dbl ? 54 : 25;
  Value ax = ir::Unary(b, "stablehlo.abs", x);
  Value tiny = ir::Compare(b, ax, C(b, dbl ? 2.2250738585072014e-308 : 1.1754943508222875e-38, ax),
                           ir::Cmp::LT);
  Value xs = ir::Select(b, tiny, Mul(b, x, C(b, std::ldexp(1.0, sub_shift), x)), x);
  Value bits = b.Op1("stablehlo.bitcast_convert", {xs}, ir::TensorType{it, d});
  Value ebits = ir::Binary(b, "stablehlo.and",
                           ir::Binary(b, "stablehlo.shift_right_logical", bits, I(mbits)), I(emask));
  Value e = Sub(b, ebits, I(bias_m1));
  e = ir::Select(b, tiny, Sub(b, e, I(sub_shift)), e);
  // Mantissa: the exponent field replaced by bias - 1 (value in [0.5, 1)).
  Value keep = ir::Unary(b, "stablehlo.not", ir::Binary(b, "stablehlo.shift_left", I(emask), I(mbits)));
  Value mb = ir::Binary(b, "stablehlo.or", ir::Binary(b, "stablehlo.and", bits, keep),
                        ir::Binary(b, "stablehlo.shift_left", I(bias_m1), I(mbits)));
  Value m = b.Op1("stablehlo.bitcast_convert", {mb}, ir::TensorType{ft, d});
  // Zero, inf and NaN: the value itself and exponent 0.
  Value special = ir::Binary(
      b, "stablehlo.or", ir::Compare(b, x, C(b, 0, x), ir::Cmp::EQ),
      ir::Unary(b, "stablehlo.not", b.Op1("stablehlo.is_finite", {x}, ir::TensorType{DType::PRED, d})));
  m = ir::Select(b, special, x, m);
  e = ir::Select(b, special, I(0), e);
  return {ir::Convert(b, m, out[0].dtype), ir::Convert(b, e, DType::S32)};
}
constexpr lazy::Lowering kFrexp{"aten::frexp", &LowerFrexp};

std::tuple<Tensor, Tensor> frexp_tpu(const Tensor& self) {
  CheckTpu("frexp", self, "self");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "torch.frexp() only supports floating-point "
              "dtypes");
  if (self.numel() == 0)
    return {EmptyTpu(self.sizes(), self.scalar_type()), EmptyTpu(self.sizes(), at::kInt)};
  auto r = Run(kFrexp, {}, {OperandOf(self)},
               {TypeOf(self.sizes(), self.scalar_type()), TypeOf(self.sizes(), at::kInt)});
  return {r[0], r[1]};
}
std::tuple<Tensor&, Tensor&> frexp_out_tpu(const Tensor& self, Tensor& mantissa, Tensor& exponent) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "torch.frexp() only supports floating-point "
              "dtypes");
  TORCH_CHECK(mantissa.scalar_type() == self.scalar_type(), "torch.frexp() expects mantissa to have "
              "dtype ", self.scalar_type(), " but got ", mantissa.scalar_type());
  TORCH_CHECK(exponent.scalar_type() == at::kInt, "torch.frexp() expects exponent to have int "
              "dtype but got ", exponent.scalar_type());
  auto [m, e] = frexp_tpu(self);
  CopyInto("frexp", m, mantissa);
  CopyInto("frexp", e, exponent);
  return {mantissa, exponent};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gcd", TORCH_FN(gcd_tpu));
  m.impl("gcd.out", TORCH_FN(gcd_out_tpu));
  m.impl("gcd_", TORCH_FN(gcd__tpu));
  m.impl("lcm", TORCH_FN(lcm_tpu));
  m.impl("lcm.out", TORCH_FN(lcm_out_tpu));
  m.impl("lcm_", TORCH_FN(lcm__tpu));
  m.impl("frexp.Tensor", TORCH_FN(frexp_tpu));
  m.impl("frexp.Tensor_out", TORCH_FN(frexp_out_tpu));
}

}  // namespace tpu::ops
