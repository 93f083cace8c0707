// var and std (with their _mean forms), any correction.
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/layer_norm.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"
#include "aten/kernel_helpers.h"
#include "aten/reduction/moments.h"

namespace tpu::ops {

namespace {

// ---- var / std (+ _mean) ----

enum VarKind : int64_t { kVar = 0, kStd = 1, kVarMean = 2, kStdMean = 3 };

// ins = (x); ints = (kind, acc, dims...); floats = (correction). Outputs:
// var or std, then mean for the _mean forms (shaped as the out types). A
// complex input's variance is the sum of its parts' (a real result), its
// mean complex.
VS LowerVar(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t kind = a.ints[0];
  const auto acc = static_cast<DType>(a.ints[1]);
  ir::Dims dims(a.ints.begin() + 2, a.ints.end());
  // complex32 is computed in complex64
  const Value x = b.type(in[0]).dtype == DType::C32 ? ir::Convert(b, in[0], DType::C64) : in[0];
  const ir::TensorType t = b.type(x);
  const bool cplx = ir::IsComplex(t.dtype);
  std::vector<Value> parts;
  if (cplx) {
    const DType rt = t.dtype == DType::C64 ? DType::F32 : DType::F64;
    parts.push_back(ir::Convert(b, b.Op1("stablehlo.real", {x}, ir::TensorType{rt, t.dims}), acc));
    parts.push_back(ir::Convert(b, b.Op1("stablehlo.imag", {x}, ir::TensorType{rt, t.dims}), acc));
  } else {
    parts.push_back(ir::Convert(b, x, acc));
  }
  Value ss;
  for (size_t i = 0; i < parts.size(); ++i) {
    Value xc = Sub(b, parts[i], MeanOver(b, parts[i], dims, true));
    Value s = SumOver(b, Mul(b, xc, xc), dims, false);
    ss = i == 0 ? s : Add(b, ss, s);
  }
  // max(0, N - correction), as CPU; 0 gives inf/nan like a division by 0.
  Value dof = ir::Binary(b, "stablehlo.subtract", ir::CountOver(b, parts[0], dims), C(b, a.floats[0], ss));
  Value v = ir::Binary(b, "stablehlo.divide", ss, ir::Max(b, dof, C(b, 0.0, ss)));
  if (kind == kStd || kind == kStdMean) v = ir::Unary(b, "stablehlo.sqrt", v);
  auto fit = [&](Value r, const ir::TensorType& t) { return ir::Reshape(b, ir::Convert(b, r, t.dtype), t.dims); };
  VS r{fit(v, out[0])};
  if (kind >= kVarMean) {
    if (cplx) {
      const DType pt = out[1].dtype == DType::C64 ? DType::F32 : DType::F64;
      Value re = ir::Reshape(b, ir::Convert(b, MeanOver(b, parts[0], dims, false), pt), out[1].dims);
      Value im = ir::Reshape(b, ir::Convert(b, MeanOver(b, parts[1], dims, false), pt), out[1].dims);
      r.push_back(b.Op1("stablehlo.complex", {re, im}, out[1]));
    } else {
      r.push_back(fit(MeanOver(b, parts[0], dims, false), out[1]));
    }
  }
  return r;
}
constexpr lazy::Lowering kVarOp{"aten::var.correction", &LowerVar};

struct VarPlan {
  lazy::Attrs attrs;
  std::vector<int64_t> sizes;
  at::ScalarType dtype;       // var / std (real for a complex input)
  at::ScalarType mean_dtype;  // the input's
};

VarPlan PlanVar(const char* name, VarKind kind, const Tensor& self, at::OptionalIntArrayRef dim,
                const std::optional<c10::Scalar>& correction, bool keepdim) {
  CheckTpu(name, self, "self");
  const auto st = self.scalar_type();
  TORCH_CHECK(at::isFloatingType(st) || at::isComplexType(st),
              "std and var only support floating point and complex dtypes");
  VarPlan p;
  p.dtype = c10::toRealValueType(st);
  p.mean_dtype = st;
  std::vector<bool> reduced(self.dim(), dim.has_value() && !dim->empty() ? false : true);
  if (dim.has_value() && !dim->empty()) {
    auto bits = at::dim_list_to_bitset(*dim, self.dim());
    for (int64_t i = 0; i < self.dim(); ++i) reduced[i] = bits[i];
  }
  p.attrs.ints = {kind, IrCode(OpMathType(p.dtype))};
  for (int64_t i = 0; i < self.dim(); ++i) {
    if (reduced[i]) {
      p.attrs.ints.push_back(i);
      if (keepdim) p.sizes.push_back(1);
    } else {
      p.sizes.push_back(self.size(i));
    }
  }
  p.attrs.floats = {correction.has_value() ? correction->toDouble() : 1.0};
  int64_t n = 1;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (reduced[i]) n *= self.size(i);
  if (static_cast<double>(n) - p.attrs.floats[0] <= 0)
    TORCH_WARN(name, "(): degrees of freedom is <= 0. Correction should be strictly less than "
               "the reduction factor (input numel divided by output numel).");
  return p;
}

Tensor var_correction(const Tensor& s, at::OptionalIntArrayRef dim,
                      const std::optional<c10::Scalar>& c, bool keepdim) {
  VarPlan p = PlanVar("var", kVar, s, dim, c, keepdim);
  return Run1(kVarOp, p.attrs, {OperandOf(s)}, TypeOf(p.sizes, p.dtype));
}
Tensor std_correction(const Tensor& s, at::OptionalIntArrayRef dim,
                      const std::optional<c10::Scalar>& c, bool keepdim) {
  VarPlan p = PlanVar("std", kStd, s, dim, c, keepdim);
  return Run1(kVarOp, p.attrs, {OperandOf(s)}, TypeOf(p.sizes, p.dtype));
}
Tensor& var_correction_out(const Tensor& s, at::OptionalIntArrayRef dim,
                           const std::optional<c10::Scalar>& c, bool keepdim, Tensor& o) {
  VarPlan p = PlanVar("var", kVar, s, dim, c, keepdim);
  PrepareOut("var", o, p.sizes, p.dtype);
  RunInto(kVarOp, p.attrs, {OperandOf(s)}, {TypeOf(p.sizes, p.dtype)}, {o});
  return o;
}
Tensor& std_correction_out(const Tensor& s, at::OptionalIntArrayRef dim,
                           const std::optional<c10::Scalar>& c, bool keepdim, Tensor& o) {
  VarPlan p = PlanVar("std", kStd, s, dim, c, keepdim);
  PrepareOut("std", o, p.sizes, p.dtype);
  RunInto(kVarOp, p.attrs, {OperandOf(s)}, {TypeOf(p.sizes, p.dtype)}, {o});
  return o;
}
std::tuple<Tensor, Tensor> var_mean_correction(const Tensor& s, at::OptionalIntArrayRef dim,
                                               const std::optional<c10::Scalar>& c, bool keepdim) {
  VarPlan p = PlanVar("var_mean", kVarMean, s, dim, c, keepdim);
  auto r = Run(kVarOp, p.attrs, {OperandOf(s)}, {TypeOf(p.sizes, p.dtype), TypeOf(p.sizes, p.mean_dtype)});
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> std_mean_correction(const Tensor& s, at::OptionalIntArrayRef dim,
                                               const std::optional<c10::Scalar>& c, bool keepdim) {
  VarPlan p = PlanVar("std_mean", kStdMean, s, dim, c, keepdim);
  auto r = Run(kVarOp, p.attrs, {OperandOf(s)}, {TypeOf(p.sizes, p.dtype), TypeOf(p.sizes, p.mean_dtype)});
  return {r[0], r[1]};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("var.correction", TORCH_FN(var_correction));
  m.impl("std.correction", TORCH_FN(std_correction));
  m.impl("var.correction_out", TORCH_FN(var_correction_out));
  m.impl("std.correction_out", TORCH_FN(std_correction_out));
  m.impl("var_mean.correction", TORCH_FN(var_mean_correction));
  m.impl("std_mean.correction", TORCH_FN(std_mean_correction));
}

}  // namespace tpu::ops
