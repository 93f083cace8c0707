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
// var or std, then mean for the _mean forms (shaped as the out types).
VS LowerVar(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t kind = a.ints[0];
  const auto acc = static_cast<DType>(a.ints[1]);
  ir::Dims dims(a.ints.begin() + 2, a.ints.end());
  Value x = ir::Convert(b, in[0], acc);
  Value xc = Sub(b, x, MeanOver(b, x, dims, true));
  Value ss = SumOver(b, Mul(b, xc, xc), dims, false);
  // max(0, N - correction), as CPU; 0 gives inf/nan like a division by 0.
  Value dof = ir::Binary(b, "stablehlo.subtract", ir::CountOver(b, x, dims), C(b, a.floats[0], ss));
  Value v = ir::Binary(b, "stablehlo.divide", ss, ir::Max(b, dof, C(b, 0.0, ss)));
  if (kind == kStd || kind == kStdMean) v = ir::Unary(b, "stablehlo.sqrt", v);
  auto fit = [&](Value r, const ir::TensorType& t) { return ir::Reshape(b, ir::Convert(b, r, t.dtype), t.dims); };
  VS r{fit(v, out[0])};
  if (kind >= kVarMean) r.push_back(fit(MeanOver(b, x, dims, false), out[1]));
  return r;
}
constexpr lazy::Lowering kVarOp{"aten::var.correction", &LowerVar};

struct VarPlan {
  lazy::Attrs attrs;
  std::vector<int64_t> sizes;
  at::ScalarType dtype;
};

VarPlan PlanVar(const char* name, VarKind kind, const Tensor& self, at::OptionalIntArrayRef dim,
                const std::optional<c10::Scalar>& correction, bool keepdim) {
  CheckTpu(name, self, "self");
  const auto st = self.scalar_type();
  TORCH_CHECK(at::isFloatingType(st), name, " only supports floating point dtypes");
  VarPlan p;
  p.dtype = st;
  std::vector<bool> reduced(self.dim(), dim.has_value() && !dim->empty() ? false : true);
  if (dim.has_value() && !dim->empty()) {
    auto bits = at::dim_list_to_bitset(*dim, self.dim());
    for (int64_t i = 0; i < self.dim(); ++i) reduced[i] = bits[i];
  }
  p.attrs.ints = {kind, IrCode(OpMathType(st))};
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
  auto r = Run(kVarOp, p.attrs, {OperandOf(s)}, {TypeOf(p.sizes, p.dtype), TypeOf(p.sizes, p.dtype)});
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> std_mean_correction(const Tensor& s, at::OptionalIntArrayRef dim,
                                               const std::optional<c10::Scalar>& c, bool keepdim) {
  VarPlan p = PlanVar("std_mean", kStdMean, s, dim, c, keepdim);
  auto r = Run(kVarOp, p.attrs, {OperandOf(s)}, {TypeOf(p.sizes, p.dtype), TypeOf(p.sizes, p.dtype)});
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
