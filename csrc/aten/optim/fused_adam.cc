// _fused_adam_ / _fused_adamw_ (torch.optim.Adam/AdamW(fused=True), the
// default optimizer of transformers' Trainer): the update of every
// parameter in one op, so a whole optimizer step is one program even in
// Strict Eager. Hyperparameters are run-time scalars (a changing learning
// rate does not recompile); math in f32 for reduced-precision parameters,
// as PyTorch's fused kernels do.
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"

namespace tpu::ops {

namespace {

// ints = (params, amsgrad, maximize, decoupled (AdamW), has grad_scale,
// has found_inf). ins = lr, beta1, beta2, weight_decay, eps (f64 0-d),
// [grad_scale], [found_inf], then per parameter p, g, m, v, [vmax], step.
// outs per parameter: p, m, v, [vmax], [g unscaled, with grad_scale].
VS LowerFusedAdam(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t n = a.ints[0];
  const bool amsgrad = a.ints[1], maximize = a.ints[2], decoupled = a.ints[3];
  const bool has_scale = a.ints[4], has_inf = a.ints[5];
  const DType f = DType::F32;
  size_t k = 0;
  auto scalar = [&](Value v) { return ir::Convert(b, v, f); };
  Value lr = scalar(in[k++]), beta1 = scalar(in[k++]), beta2 = scalar(in[k++]);
  Value wd = scalar(in[k++]), eps = scalar(in[k++]);
  Value scale = has_scale ? scalar(ir::Reshape(b, in[k++], {})) : Value{};
  Value found = has_inf ? scalar(ir::Reshape(b, in[k++], {})) : Value{};
  auto bc = [&](Value s, Value like) { return ir::Full(b, s, b.type(like).dims); };
  auto add = [&](Value x, Value y) { return ir::Binary(b, "stablehlo.add", x, y); };
  auto sub = [&](Value x, Value y) { return ir::Binary(b, "stablehlo.subtract", x, y); };
  auto mul = [&](Value x, Value y) { return ir::Binary(b, "stablehlo.multiply", x, y); };
  auto div = [&](Value x, Value y) { return ir::Binary(b, "stablehlo.divide", x, y); };
  Value one = ir::ConstantF(b, 1.0, f);
  VS results;
  size_t o = 0;
  for (int64_t i = 0; i < n; ++i) {
    Value p0 = in[k++], g0 = in[k++], m0 = in[k++], v0 = in[k++];
    Value vmax0 = amsgrad ? in[k++] : Value{};
    Value step = scalar(ir::Reshape(b, in[k++], {}));
    Value p = ir::Convert(b, p0, f), g = ir::Convert(b, g0, f);
    Value m = ir::Convert(b, m0, f), v = ir::Convert(b, v0, f);
    if (has_scale) g = div(g, bc(scale, g));
    if (maximize) g = ir::Unary(b, "stablehlo.negate", g);
    if (decoupled) {
      p = mul(p, bc(sub(one, mul(lr, wd)), p));
    } else {
      g = add(g, mul(bc(wd, p), p));
    }
    m = add(m, mul(bc(sub(one, beta1), g), sub(g, m)));  // lerp(m, g, 1 - beta1)
    v = add(mul(bc(beta2, v), v), mul(bc(sub(one, beta2), v), mul(g, g)));
    Value bias1 = sub(one, ir::Binary(b, "stablehlo.power", beta1, step));
    Value bias2_sqrt = ir::Unary(b, "stablehlo.sqrt", sub(one, ir::Binary(b, "stablehlo.power", beta2, step)));
    Value step_size = div(lr, bias1);
    Value vmax;
    Value second = v;
    if (amsgrad) {
      vmax = ir::Max(b, ir::Convert(b, vmax0, f), v);
      second = vmax;
    }
    Value denom = add(div(ir::Unary(b, "stablehlo.sqrt", second), bc(bias2_sqrt, second)), bc(eps, second));
    p = sub(p, mul(bc(step_size, p), div(m, denom)));
    VS news{p, m, v};
    VS olds{p0, m0, v0};
    if (amsgrad) {
      news.push_back(vmax);
      olds.push_back(vmax0);
    }
    if (has_scale) {  // the gradient is left unscaled, as CPU's and CUDA's kernels leave it
      news.push_back(div(ir::Convert(b, g0, f), bc(scale, g0)));
      olds.push_back(g0);
    }
    for (size_t j = 0; j < news.size(); ++j) {
      Value r = ir::Convert(b, news[j], out[o].dtype);
      if (has_inf) {  // a step with non-finite gradients leaves everything as it was
        Value skip = ir::Compare(b, found, ir::ConstantF(b, 0.0, f), ir::Cmp::NE);
        r = ir::Select(b, ir::Full(b, skip, out[o].dims), olds[j], r);
      }
      results.push_back(ir::Reshape(b, r, out[o].dims));
      ++o;
    }
  }
  return results;
}
constexpr lazy::Lowering kFusedAdam{"aten::_fused_adam", &LowerFusedAdam};

void FusedAdam(bool decoupled, at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
               at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps,
               const c10::Scalar& lr, double beta1, double beta2, double weight_decay, double eps,
               bool amsgrad, bool maximize, const std::optional<Tensor>& grad_scale,
               const std::optional<Tensor>& found_inf) {
  const char* op = decoupled ? "_fused_adamw_" : "_fused_adam_";
  const size_t n = params.size();
  TORCH_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n &&
                  (!amsgrad || max_exp_avg_sqs.size() == n),
              op, ": expected lists of the same length");
  if (n == 0) return;
  const bool has_scale = grad_scale.has_value() && grad_scale->defined();
  const bool has_inf = found_inf.has_value() && found_inf->defined();
  std::vector<lazy::Operand> ins{ScalarOperand(lr, at::kDouble), ScalarOperand(beta1, at::kDouble),
                                 ScalarOperand(beta2, at::kDouble), ScalarOperand(weight_decay, at::kDouble),
                                 ScalarOperand(eps, at::kDouble)};
  if (has_scale) ins.push_back(OperandOf(*grad_scale));
  if (has_inf) ins.push_back(OperandOf(*found_inf));
  std::vector<ir::TensorType> types;
  std::vector<Tensor> dsts;
  for (size_t i = 0; i < n; ++i) {
    for (const Tensor* t : {&params[i], &grads[i], &exp_avgs[i], &exp_avg_sqs[i]}) {
      CheckTpu(op, *t, "tensors");
      TORCH_CHECK(t->sizes() == params[i].sizes(), op, ": tensor shapes differ at index ", i);
      TORCH_CHECK(at::isFloatingType(t->scalar_type()), op, ": expected floating point tensors");
    }
    TORCH_CHECK(steps[i].numel() == 1, op, ": state_steps must hold one value each");
    ins.push_back(OperandOf(params[i]));
    ins.push_back(OperandOf(grads[i]));
    ins.push_back(OperandOf(exp_avgs[i]));
    ins.push_back(OperandOf(exp_avg_sqs[i]));
    if (amsgrad) ins.push_back(OperandOf(max_exp_avg_sqs[i]));
    ins.push_back(OperandOf(steps[i]));
    std::vector<Tensor> outs{params[i], exp_avgs[i], exp_avg_sqs[i]};
    if (amsgrad) outs.push_back(max_exp_avg_sqs[i]);
    if (has_scale) outs.push_back(grads[i]);
    for (const Tensor& t : outs) {
      types.push_back(TypeOf(t.sizes(), t.scalar_type()));
      dsts.push_back(t);
    }
  }
  lazy::Attrs attrs{{static_cast<int64_t>(n), amsgrad, maximize, decoupled, has_scale, has_inf}, {}, {}};
  RunInto(kFusedAdam, attrs, ins, types, dsts);
}

void fused_adam_(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v, at::TensorList vmax,
                 at::TensorList steps, double lr, double beta1, double beta2, double wd, double eps,
                 bool amsgrad, bool maximize, const std::optional<Tensor>& scale,
                 const std::optional<Tensor>& inf) {
  FusedAdam(false, p, g, m, v, vmax, steps, lr, beta1, beta2, wd, eps, amsgrad, maximize, scale, inf);
}
void fused_adamw_(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v, at::TensorList vmax,
                  at::TensorList steps, double lr, double beta1, double beta2, double wd, double eps,
                  bool amsgrad, bool maximize, const std::optional<Tensor>& scale,
                  const std::optional<Tensor>& inf) {
  FusedAdam(true, p, g, m, v, vmax, steps, lr, beta1, beta2, wd, eps, amsgrad, maximize, scale, inf);
}
// The tensor-lr overloads: the learning rate is read once, as on CPU.
void fused_adam_tlr(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v,
                    at::TensorList vmax, at::TensorList steps, const Tensor& lr, double beta1, double beta2,
                    double wd, double eps, bool amsgrad, bool maximize, const std::optional<Tensor>& scale,
                    const std::optional<Tensor>& inf) {
  FusedAdam(false, p, g, m, v, vmax, steps, lr.item(), beta1, beta2, wd, eps, amsgrad, maximize, scale, inf);
}
void fused_adamw_tlr(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v,
                     at::TensorList vmax, at::TensorList steps, const Tensor& lr, double beta1, double beta2,
                     double wd, double eps, bool amsgrad, bool maximize, const std::optional<Tensor>& scale,
                     const std::optional<Tensor>& inf) {
  FusedAdam(true, p, g, m, v, vmax, steps, lr.item(), beta1, beta2, wd, eps, amsgrad, maximize, scale, inf);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", TORCH_FN(fused_adam_));
  m.impl("_fused_adamw_", TORCH_FN(fused_adamw_));
  m.impl("_fused_adam_.tensor_lr", TORCH_FN(fused_adam_tlr));
  m.impl("_fused_adamw_.tensor_lr", TORCH_FN(fused_adamw_tlr));
}

}  // namespace tpu::ops
