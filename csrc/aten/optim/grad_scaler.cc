// The two kernels behind torch.amp.GradScaler: unscaling the gradients
// while looking for infs and NaNs, and updating the scale. Both run on the
// device (no host sync per parameter), with CUDA's semantics.
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"

namespace tpu::ops {

namespace {

Value AnyOf(Builder& b, Value pred) {
  const auto& dims = b.type(pred).dims;
  ir::Dims all(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) all[i] = static_cast<int64_t>(i);
  return ir::Reduce(b, pred, ir::ConstantI(b, 0, DType::PRED), all, "stablehlo.or");
}

// ins = (found_inf [1] f32, inv_scale [1] f32, grads...) ->
// (found_inf, grads * inv_scale...). Each gradient is checked as it came in
// and unscaled in its opmath dtype.
VS LowerUnscale(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  Value inv = ir::Reshape(b, in[1], {});
  Value bad = ir::ConstantI(b, 0, DType::PRED);
  VS res{Value()};
  for (size_t k = 2; k < in.size(); ++k) {
    const ir::TensorType t = b.type(in[k]);
    Value finite = b.Op1("stablehlo.is_finite", {in[k]}, ir::TensorType{DType::PRED, t.dims});
    bad = ir::Binary(b, "stablehlo.or", bad, AnyOf(b, ir::Unary(b, "stablehlo.not", finite)));
    const DType ct = t.dtype == DType::F64 ? DType::F64 : DType::F32;
    Value g = Mul(b, ir::Convert(b, in[k], ct), ir::Full(b, ir::Convert(b, inv, ct), t.dims));
    res.push_back(ir::Convert(b, g, out[k - 1].dtype));
  }
  Value one = ir::Full(b, ir::ConstantF(b, 1, b.type(in[0]).dtype), b.type(in[0]).dims);
  res[0] = ir::Select(b, ir::Full(b, bad, b.type(in[0]).dims), one, in[0]);
  return res;
}
constexpr lazy::Lowering kUnscale{"aten::_amp_foreach_non_finite_check_and_unscale_",
                                  &LowerUnscale};

// ins = (scale [1] f32, growth_tracker [1] s32, found_inf [1] f32);
// floats = (growth, backoff); ints = (interval) -> (scale, growth_tracker)
VS LowerUpdateScale(Builder& b, const VS& in, const lazy::Attrs& a, const TT&) {
  Value scale = in[0], tracker = in[1];
  Value found = ir::Compare(b, in[2], C(b, 0, in[2]), ir::Cmp::NE);
  Value next = Add(b, tracker, ir::Full(b, ir::ConstantI(b, 1, DType::S32), {1}));
  Value grow = ir::Compare(b, next, ir::Full(b, ir::ConstantI(b, a.ints[0], DType::S32), {1}),
                           ir::Cmp::EQ);
  Value grown = Mul(b, scale, C(b, a.floats[0], scale));
  Value grown_ok = b.Op1("stablehlo.is_finite", {grown}, ir::TensorType{DType::PRED, {1}});
  Value no_inf = ir::Select(b, grow, ir::Select(b, grown_ok, grown, scale), scale);
  Value new_scale = ir::Select(b, found, Mul(b, scale, C(b, a.floats[1], scale)), no_inf);
  Value zero = ir::Full(b, ir::ConstantI(b, 0, DType::S32), {1});
  Value new_tracker = ir::Select(b, found, zero, ir::Select(b, grow, zero, next));
  return {new_scale, new_tracker};
}
constexpr lazy::Lowering kUpdateScale{"aten::_amp_update_scale_", &LowerUpdateScale};

void CheckOneElementFloat(const char* op, const Tensor& t, const char* name) {
  CheckTpu(op, t, name);
  TORCH_CHECK(t.numel() == 1, name, " must be a 1-element tensor.");
  TORCH_CHECK(t.scalar_type() == at::kFloat, name, " must be a float tensor.");
}

void unscale(at::TensorList grads, Tensor& found_inf, const Tensor& inv_scale) {
  const char* op = "_amp_foreach_non_finite_check_and_unscale_";
  CheckOneElementFloat(op, inv_scale, "inv_scale");
  CheckOneElementFloat(op, found_inf, "found_inf");
  if (grads.empty()) return;
  std::vector<lazy::Operand> in = Operands(OperandOf(found_inf), OperandOf(inv_scale));
  TT types{TypeOf(found_inf.sizes(), at::kFloat)};
  std::vector<Tensor> dsts{found_inf};
  for (const Tensor& g : grads) {
    CheckTpu(op, g, "scaled_grads");
    TORCH_CHECK(at::isFloatingType(g.scalar_type()), op,
                ": expected floating-point gradients, got ", g.scalar_type());
    TORCH_CHECK(g.layout() == at::kStrided, op, ": expected strided gradients, got ",
                g.layout());
    in.push_back(OperandOf(g));
    types.push_back(TypeOf(g.sizes(), g.scalar_type()));
    dsts.push_back(g);
  }
  RunInto(kUnscale, {}, std::move(in), types, dsts);
}

Tensor& update_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf,
                     double growth, double backoff, int64_t interval) {
  const char* op = "_amp_update_scale_";
  CheckOneElementFloat(op, scale, "current_scale");
  CheckOneElementFloat(op, found_inf, "found_inf");
  CheckTpu(op, growth_tracker, "growth_tracker");
  TORCH_CHECK(growth_tracker.numel() == 1, "growth_tracker must be a 1-element tensor.");
  TORCH_CHECK(growth_tracker.scalar_type() == at::kInt, "growth_tracker must be an int tensor.");
  RunInto(kUpdateScale, {{interval}, {growth, backoff}, {}},
          Operands(OperandOf(scale.reshape({1})), OperandOf(growth_tracker.reshape({1})),
                   OperandOf(found_inf.reshape({1}))),
          {TypeOf({1}, at::kFloat), TypeOf({1}, at::kInt)},
          {scale.reshape({1}), growth_tracker.reshape({1})});
  return scale;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", TORCH_FN(unscale));
  m.impl("_amp_update_scale_", TORCH_FN(update_scale));
}

}  // namespace tpu::ops
