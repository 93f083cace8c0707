// _fused_sgd_ (torch.optim.SGD(fused=True)): the update of every parameter
// and momentum buffer in one op, as PyTorch's fused CPU and CUDA kernels
// compute it. Hyperparameters are run-time scalars, so a learning-rate
// schedule does not recompile; reduced-precision parameters are updated in
// float32, float64 ones in float64.
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"

namespace tpu::ops {

namespace {

// ints = (params, momentum != 0, nesterov, maximize, first step, has
// grad_scale, has found_inf). ins = lr, weight_decay, momentum, dampening
// (f64 0-d), [grad_scale], [found_inf], then per parameter p, g, [buf].
// outs per parameter: p, [buf], [g unscaled, with grad_scale].
VS LowerFusedSgd(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t n = a.ints[0];
  const bool use_momentum = a.ints[1], nesterov = a.ints[2], maximize = a.ints[3];
  const bool first = a.ints[4], has_scale = a.ints[5], has_inf = a.ints[6];
  size_t k = 0;
  const Value lr0 = in[k++], wd0 = in[k++], mom0 = in[k++], damp0 = in[k++];
  const Value scale0 = has_scale ? ir::Reshape(b, in[k++], {}) : Value{};
  const Value found0 = has_inf ? ir::Reshape(b, in[k++], {}) : Value{};
  VS results;
  size_t o = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Value p0 = in[k++], g0 = in[k++];
    const Value buf0 = use_momentum ? in[k++] : Value{};
    const ir::Dims& dims = out[o].dims;
    const DType ct = out[o].dtype == DType::F64 ? DType::F64 : DType::F32;
    auto s = [&](Value v) { return ir::Full(b, ir::Convert(b, v, ct), dims); };
    auto add = [&](Value x, Value y) { return ir::Binary(b, "stablehlo.add", x, y); };
    auto mul = [&](Value x, Value y) { return ir::Binary(b, "stablehlo.multiply", x, y); };
    Value p = ir::Convert(b, p0, ct), g = ir::Convert(b, g0, ct);
    if (has_scale) g = ir::Binary(b, "stablehlo.divide", g, s(scale0));
    if (maximize) g = ir::Unary(b, "stablehlo.negate", g);
    g = add(g, mul(s(wd0), p));
    Value buf;
    if (use_momentum) {
      if (first) {
        buf = g;
      } else {
        Value keep = ir::Binary(b, "stablehlo.subtract", s(ir::ConstantF(b, 1.0, DType::F64)),
                                s(damp0));
        buf = add(mul(s(mom0), ir::Convert(b, buf0, ct)), mul(keep, g));
      }
      g = nesterov ? add(g, mul(s(mom0), buf)) : buf;
    }
    p = ir::Binary(b, "stablehlo.subtract", p, mul(s(lr0), g));
    VS news{p}, olds{p0};
    if (use_momentum) {
      news.push_back(buf);
      olds.push_back(buf0);
    }
    if (has_scale) {  // the gradient is left unscaled, as CPU's and CUDA's kernels leave it
      news.push_back(ir::Binary(b, "stablehlo.divide", ir::Convert(b, g0, ct), s(scale0)));
      olds.push_back(g0);
    }
    for (size_t j = 0; j < news.size(); ++j) {
      Value r = ir::Convert(b, news[j], out[o].dtype);
      if (has_inf) {  // a step with non-finite gradients leaves everything as it was
        Value skip = ir::Compare(b, found0, ir::ConstantF(b, 0.0, b.type(found0).dtype), ir::Cmp::NE);
        r = ir::Select(b, ir::Full(b, skip, out[o].dims), olds[j], r);
      }
      results.push_back(r);
      ++o;
    }
  }
  return results;
}
constexpr lazy::Lowering kFusedSgd{"aten::_fused_sgd", &LowerFusedSgd};

void FusedSgd(at::TensorList params, at::TensorList grads, at::TensorList bufs, double weight_decay,
              double momentum, const c10::Scalar& lr, double dampening, bool nesterov,
              bool maximize, bool is_first_step, const std::optional<Tensor>& grad_scale,
              const std::optional<Tensor>& found_inf) {
  const char* op = "_fused_sgd_";
  const size_t n = params.size();
  const bool use_momentum = momentum != 0;
  TORCH_CHECK(grads.size() == n, op, ": expected grads of the same length as params");
  TORCH_CHECK(!use_momentum || bufs.size() == n, op,
              ": expected momentum_buffer_list of the same length as params");
  if (n == 0) return;
  const bool has_scale = grad_scale.has_value() && grad_scale->defined();
  const bool has_inf = found_inf.has_value() && found_inf->defined();
  std::vector<lazy::Operand> ins{ScalarOperand(lr, at::kDouble),
                                 ScalarOperand(weight_decay, at::kDouble),
                                 ScalarOperand(momentum, at::kDouble),
                                 ScalarOperand(dampening, at::kDouble)};
  if (has_scale) ins.push_back(OperandOf(*grad_scale));
  if (has_inf) ins.push_back(OperandOf(*found_inf));
  std::vector<ir::TensorType> types;
  std::vector<Tensor> dsts;
  for (size_t i = 0; i < n; ++i) {
    std::vector<const Tensor*> ts{&params[i], &grads[i]};
    if (use_momentum) ts.push_back(&bufs[i]);
    for (const Tensor* t : ts) {
      CheckTpu(op, *t, "tensors");
      TORCH_CHECK(t->sizes() == params[i].sizes(), op, ": tensor shapes differ at index ", i);
      TORCH_CHECK(at::isFloatingType(t->scalar_type()), op, ": expected floating point tensors");
    }
    for (const Tensor* t : ts) ins.push_back(OperandOf(*t));
    types.push_back(TypeOf(params[i].sizes(), params[i].scalar_type()));
    dsts.push_back(params[i]);
    if (use_momentum) {
      types.push_back(TypeOf(bufs[i].sizes(), bufs[i].scalar_type()));
      dsts.push_back(bufs[i]);
    }
    if (has_scale) {
      types.push_back(TypeOf(grads[i].sizes(), grads[i].scalar_type()));
      dsts.push_back(grads[i]);
    }
  }
  lazy::Attrs attrs{{static_cast<int64_t>(n), use_momentum, nesterov, maximize,
                     use_momentum && is_first_step, has_scale, has_inf}, {}, {}};
  RunInto(kFusedSgd, attrs, ins, types, dsts);
}

void fused_sgd_(at::TensorList p, at::TensorList g, at::TensorList buf, double wd, double momentum,
                double lr, double dampening, bool nesterov, bool maximize, bool first,
                const std::optional<Tensor>& scale, const std::optional<Tensor>& inf) {
  FusedSgd(p, g, buf, wd, momentum, lr, dampening, nesterov, maximize, first, scale, inf);
}
// The tensor-lr overload: the learning rate is read once, as on CPU.
void fused_sgd_tlr(at::TensorList p, at::TensorList g, at::TensorList buf, double wd,
                   double momentum, const Tensor& lr, double dampening, bool nesterov,
                   bool maximize, bool first, const std::optional<Tensor>& scale,
                   const std::optional<Tensor>& inf) {
  FusedSgd(p, g, buf, wd, momentum, lr.item(), dampening, nesterov, maximize, first, scale, inf);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sgd_", TORCH_FN(fused_sgd_));
  m.impl("_fused_sgd_.tensor_lr", TORCH_FN(fused_sgd_tlr));
}

}  // namespace tpu::ops
