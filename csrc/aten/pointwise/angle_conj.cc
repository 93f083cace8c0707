// angle of real inputs and conj_physical's out= form.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/where.h>
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

// ---- angle of real inputs: pi where negative, 0 elsewhere, NaN kept ----

Tensor angle_tpu(const Tensor& self) {
  CheckTpu("angle", self, "self");
  if (self.is_complex()) return ComplexToReal("angle", self);
  const auto rt = at::isIntegralType(self.scalar_type(), true)
                      ? c10::typeMetaToScalarType(at::get_default_dtype())
                      : self.scalar_type();
  Tensor x = self.to(rt);
  Tensor pi = at::full({}, M_PI, TpuOptions(rt)), zero = at::zeros({}, TpuOptions(rt));
  return at::where(at::isnan(x), x, at::where(at::lt(x, 0), pi, zero));
}
Tensor& angle_out_tpu(const Tensor& self, Tensor& out) { return CopyInto("angle", angle_tpu(self), out); }

// ---- conj_physical (a copy for real tensors) ----

// in = (x complex); out = conj(x).
VS LowerConj(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType& t = out[0];
  // complex32 is computed in complex64
  const DType ct = t.dtype == DType::C128 ? DType::C128 : DType::C64;
  const DType rt = ct == DType::C128 ? DType::F64 : DType::F32;
  Value x = ir::Convert(b, in[0], ct);
  Value re = b.Op1("stablehlo.real", {x}, ir::TensorType{rt, t.dims});
  Value im = b.Op1("stablehlo.imag", {x}, ir::TensorType{rt, t.dims});
  Value z = b.Op1("stablehlo.complex", {re, ir::Unary(b, "stablehlo.negate", im)},
                  ir::TensorType{ct, t.dims});
  return {ir::Convert(b, z, t.dtype)};
}
constexpr lazy::Lowering kConj{"aten::conj_physical", &LowerConj};

Tensor& conj_physical_out_tpu(const Tensor& self, Tensor& out) {
  CheckTpu("conj_physical", self, "self");
  PrepareOut("conj_physical", out, self.sizes(), self.scalar_type());
  if (!self.is_complex() || self.numel() == 0) return out.copy_(self);
  return out.copy_(Run1(kConj, {}, {OperandOf(self)}, TypeOf(self.sizes(), self.scalar_type())));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("angle", TORCH_FN(angle_tpu));
  m.impl("angle.out", TORCH_FN(angle_out_tpu));
  m.impl("conj_physical.out", TORCH_FN(conj_physical_out_tpu));
}

}  // namespace tpu::ops
