// Complex numbers: view_as_real / view_as_complex as true views of the same
// storage (the views layer reads a complex storage as pairs of reals and
// back), torch.complex and torch.polar, and abs / angle of complex inputs,
// which give real results.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/complex.h"
#include "aten/formula.h"

namespace tpu::ops {

namespace {

// complex32 is stored packed and computed in complex64.
DType PartOf(DType c) { return c == DType::C128 ? DType::F64 : DType::F32; }
Value Computable(Builder& b, Value z) {
  return b.type(z).dtype == DType::C32 ? ir::Convert(b, z, DType::C64) : z;
}

Value Real(Builder& b, Value z) {
  z = Computable(b, z);
  const auto& t = b.type(z);
  return b.Op1("stablehlo.real", {z}, ir::TensorType{PartOf(t.dtype), t.dims});
}
Value Imag(Builder& b, Value z) {
  z = Computable(b, z);
  const auto& t = b.type(z);
  return b.Op1("stablehlo.imag", {z}, ir::TensorType{PartOf(t.dtype), t.dims});
}

// ins = (z) -> |z| (stablehlo.abs of a complex has the part's type)
VS LowerComplexAbs(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  Value z = Computable(b, in[0]);
  const auto& t = b.type(z);
  Value r = b.Op1("stablehlo.abs", {z}, ir::TensorType{PartOf(t.dtype), t.dims});
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kComplexAbs{"aten::abs.complex", &LowerComplexAbs};

// ins = (z) -> atan2(imag, real)
VS LowerComplexAngle(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  Value r = ir::Binary(b, "stablehlo.atan2", Imag(b, in[0]), Real(b, in[0]));
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kComplexAngle{"aten::angle.complex", &LowerComplexAngle};

// ins = (real, imag) broadcast to the output; ints = (polar): with polar,
// (abs, angle) -> abs * (cos angle + i sin angle).
VS LowerMakeComplex(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType part = PartOf(out[0].dtype);
  Value x = ir::BroadcastTo(b, ir::Convert(b, in[0], part), out[0].dims);
  Value y = ir::BroadcastTo(b, ir::Convert(b, in[1], part), out[0].dims);
  if (a.ints[0]) {
    Value re = Mul(b, x, ir::Unary(b, "stablehlo.cosine", y));
    Value im = Mul(b, x, ir::Unary(b, "stablehlo.sine", y));
    x = re;
    y = im;
  }
  const DType ct = part == DType::F64 ? DType::C128 : DType::C64;  // complex32: computed as 64
  Value z = b.Op1("stablehlo.complex", {x, y}, ir::TensorType{ct, out[0].dims});
  return {ir::Convert(b, z, out[0].dtype)};
}
constexpr lazy::Lowering kMakeComplex{"aten::complex", &LowerMakeComplex};

Tensor& MakeComplex(const char* op, const Tensor& a, const Tensor& b, bool polar, Tensor& out) {
  CheckTpu(op, a, polar ? "abs" : "real");
  CheckTpu(op, b, polar ? "angle" : "imag");
  const auto dt = a.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kDouble || dt == at::kHalf, "Expected both inputs "
              "to be Half, Float or Double tensors but got ", a.scalar_type(), " and ",
              b.scalar_type());
  TORCH_CHECK(dt == b.scalar_type(), "Expected object of scalar type ", dt,
              " but got scalar type ", b.scalar_type(), " for second argument");
  const auto ct = c10::toComplexType(dt);
  TORCH_CHECK(out.scalar_type() == ct, "Expected object of scalar type ", ct,
              " but got scalar type ", out.scalar_type(), " for argument 'out'");
  const auto sizes = at::infer_size(a.sizes(), b.sizes());
  PrepareOut(op, out, sizes, ct);
  if (out.numel() == 0) return out;
  RunInto(kMakeComplex, {{polar}, {}, {}}, Operands(OperandOf(a), OperandOf(b)),
          {TypeOf(sizes, ct)}, {out});
  return out;
}
Tensor& complex_out(const Tensor& re, const Tensor& im, Tensor& out) {
  return MakeComplex("complex", re, im, false, out);
}
Tensor& polar_out(const Tensor& abs, const Tensor& angle, Tensor& out) {
  return MakeComplex("polar", abs, angle, true, out);
}

}  // namespace

Tensor ComplexToReal(const char* op, const Tensor& self) {
  CheckTpu(op, self, "self");
  const auto rt = c10::toRealValueType(self.scalar_type());
  if (self.numel() == 0) return EmptyTpu(self.sizes(), rt);
  const lazy::Lowering& l = std::string_view(op) == "abs" ? kComplexAbs : kComplexAngle;
  return Run1(l, {}, Operands(OperandOf(self)), TypeOf(self.sizes(), rt));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("complex.out", TORCH_FN(complex_out));
  m.impl("polar.out", TORCH_FN(polar_out));
}

}  // namespace tpu::ops
