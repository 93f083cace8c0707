// Batch norm (native_batch_norm, training and inference, running stats
// updated in place; the _native_batch_norm_legit forms) and group norm,
// forward and backward: both normalize per channel and share the
// per-channel broadcasts and the backward's runner.
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

// ---- batch norm ----
// Channels are dim 1; statistics are over every other dim. In the lowering
// x is viewed as [B, C, S] (S = product of the spatial dims).

Value PerChannel(Builder& b, Value v, const ir::Dims& bcs, DType acc) {
  return ir::BroadcastInDim(b, ir::Convert(b, v, acc), bcs, {1});
}

// ins = (x, [w], [b], [rm], [rv]); ints = (B, C, S, has_w, has_b, has_rm,
// has_rv, training, acc); floats = (momentum, eps).
// Outputs: y, save_mean, save_invstd, then new running mean/var when
// training with running stats.
VS LowerBatchNorm(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t B = a.ints[0], C = a.ints[1], S = a.ints[2];
  const bool has_w = a.ints[3], has_b = a.ints[4], has_rm = a.ints[5], has_rv = a.ints[6];
  const bool training = a.ints[7];
  const auto acc = static_cast<DType>(a.ints[8]);
  const double momentum = a.floats[0], eps = a.floats[1];
  const ir::Dims bcs{B, C, S};
  Value x = ir::Reshape(b, ir::Convert(b, in[0], acc), bcs);
  size_t next = 1;
  Value w = has_w ? in[next++] : Value{}, bias = has_b ? in[next++] : Value{};
  Value rm = has_rm ? in[next++] : Value{}, rv = has_rv ? in[next++] : Value{};
  Value mean, var;
  if (training) {
    mean = MeanOver(b, x, {0, 2}, false);
    Value xc = Sub(b, x, PerChannel(b, mean, bcs, acc));
    var = MeanOver(b, Mul(b, xc, xc), {0, 2}, false);
  } else {
    mean = ir::Convert(b, rm, acc);
    var = ir::Convert(b, rv, acc);
  }
  Value invstd = ir::Unary(b, "stablehlo.rsqrt", Add(b, var, ops::C(b, eps, var)));
  Value y = Mul(b, Sub(b, x, PerChannel(b, mean, bcs, acc)), PerChannel(b, invstd, bcs, acc));
  if (has_w) y = Mul(b, y, PerChannel(b, w, bcs, acc));
  if (has_b) y = Add(b, y, PerChannel(b, bias, bcs, acc));
  auto fit = [&](Value v, const ir::TensorType& t) { return ir::Reshape(b, ir::Convert(b, v, t.dtype), t.dims); };
  VS r{fit(y, out[0])};
  if (!training) return r;
  r.push_back(fit(mean, out[1]));
  r.push_back(fit(invstd, out[2]));
  const double n = static_cast<double>(B * S);
  if (has_rm) {
    Value old = ir::Convert(b, rm, acc);
    r.push_back(fit(Add(b, Mul(b, old, ops::C(b, 1 - momentum, old)), Mul(b, mean, ops::C(b, momentum, mean))), out[3]));
  }
  if (has_rv) {
    Value old = ir::Convert(b, rv, acc);
    Value unbiased = Mul(b, var, ops::C(b, n / std::max(n - 1, 1.0), var));
    r.push_back(fit(Add(b, Mul(b, old, ops::C(b, 1 - momentum, old)), Mul(b, unbiased, ops::C(b, momentum, unbiased))), out[3 + has_rm]));
  }
  return r;
}
constexpr lazy::Lowering kBatchNorm{"aten::native_batch_norm", &LowerBatchNorm};

// The dtype of the saved statistics: float32 when a half input comes with
// float32 parameters (CPU's mixed type), else the input's dtype.
at::ScalarType StatType(const Tensor& input, std::initializer_list<const Tensor*> params) {
  const auto it = input.scalar_type();
  if (it != at::kHalf && it != at::kBFloat16) return it;
  for (const Tensor* p : params)
    if (p->defined() && p->scalar_type() == at::kFloat) return at::kFloat;
  return it;
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(
    const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    bool training, double momentum, double eps) {
  CheckTpu("native_batch_norm", input, "input");
  const Tensor w = Has(weight) ? *weight : Tensor(), bb = Has(bias) ? *bias : Tensor();
  const Tensor rm = Has(running_mean) ? *running_mean : Tensor();
  const Tensor rv = Has(running_var) ? *running_var : Tensor();
  TORCH_CHECK(input.dim() >= 2, "batch_norm: Expected input to have at least 2 dims, got ",
              input.dim());
  const int64_t C = input.size(1);
  for (const Tensor* p : {&w, &bb, &rm, &rv})
    if (p->defined())
      TORCH_CHECK(p->numel() == C, "running_mean should contain ", C, " elements not ",
                  p->numel());
  if (!training)
    TORCH_CHECK(rm.defined() && rv.defined(),
                "running_mean and running_var must be defined in evaluation mode");
  const int64_t B = input.size(0);
  const int64_t S = C == 0 || B == 0 ? 0 : input.numel() / (B * C);
  const auto st = StatType(input, {&w, &bb, &rm, &rv});
  const auto acc = OpMathType(input.scalar_type());
  std::vector<lazy::Operand> in{OperandOf(input)};
  for (const Tensor* p : {&w, &bb, &rm, &rv})
    if (p->defined()) in.push_back(OperandOf(*p));
  const lazy::Attrs attrs{{B, C, S, w.defined(), bb.defined(), rm.defined(), rv.defined(),
                           training, IrCode(acc)},
                          {momentum, eps},
                          {}};
  std::vector<ir::TensorType> types{TypeOf(input.sizes(), input.scalar_type())};
  std::vector<const Tensor*> dsts{nullptr};
  if (training) {
    types.push_back(TypeOf({C}, st));
    types.push_back(TypeOf({C}, st));
    dsts.push_back(nullptr);
    dsts.push_back(nullptr);
    for (const Tensor* p : {&rm, &rv})
      if (p->defined()) {
        types.push_back(TypeOf({C}, p->scalar_type()));
        dsts.push_back(p);
      }
  }
  if (input.numel() == 0) {
    return {EmptyTpu(input.sizes(), input.scalar_type()), EmptyTpu({training ? C : 0}, st),
            EmptyTpu({training ? C : 0}, st)};
  }
  std::vector<Tensor> r = RunMixed(kBatchNorm, attrs, in, types, dsts);
  if (!training) return {r[0], EmptyTpu({0}, st), EmptyTpu({0}, st)};
  return {r[0], r[1], r[2]};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_legit(
    const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    Tensor& running_mean, Tensor& running_var, bool training, double momentum, double eps) {
  return ops::native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> batch_norm_legit_no_stats(
    const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    bool training, double momentum, double eps) {
  return ops::native_batch_norm(input, weight, bias, std::nullopt, std::nullopt, training, momentum,
                           eps);
}

// ins = (g, x, [w], mean_or_rm, invstd_or_rv); ints = (B, C, S, has_w,
// training, acc, want_dx, want_dw, want_db); floats = (eps).
VS LowerBatchNormBackward(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t B = a.ints[0], C = a.ints[1], S = a.ints[2];
  const bool has_w = a.ints[3], training = a.ints[4];
  const auto acc = static_cast<DType>(a.ints[5]);
  const ir::Dims bcs{B, C, S};
  Value g = ir::Reshape(b, ir::Convert(b, in[0], acc), bcs);
  Value x = ir::Reshape(b, ir::Convert(b, in[1], acc), bcs);
  size_t next = 2;
  Value w = has_w ? ir::Convert(b, in[next++], acc) : Value{};
  Value mean = ir::Convert(b, in[next++], acc);
  Value invstd = ir::Convert(b, in[next++], acc);
  if (!training)  // in[...] held the running variance
    invstd = ir::Unary(b, "stablehlo.rsqrt", Add(b, invstd, ops::C(b, a.floats[0], invstd)));
  Value xhat = Mul(b, Sub(b, x, PerChannel(b, mean, bcs, acc)), PerChannel(b, invstd, bcs, acc));
  Value scale = has_w ? Mul(b, invstd, w) : invstd;  // [C]
  VS r;
  size_t o = 0;
  auto fit = [&](Value v) {
    const ir::TensorType& t = out[o++];
    return ir::Reshape(b, ir::Convert(b, v, t.dtype), t.dims);
  };
  if (a.ints[6]) {
    Value dx;
    if (training) {
      Value t = Sub(b, Sub(b, g, PerChannel(b, MeanOver(b, g, {0, 2}, false), bcs, acc)),
                    Mul(b, xhat, PerChannel(b, MeanOver(b, Mul(b, g, xhat), {0, 2}, false), bcs, acc)));
      dx = Mul(b, t, PerChannel(b, scale, bcs, acc));
    } else {
      dx = Mul(b, g, PerChannel(b, scale, bcs, acc));
    }
    r.push_back(fit(dx));
  }
  if (a.ints[7]) r.push_back(fit(SumOver(b, Mul(b, g, xhat), {0, 2}, false)));
  if (a.ints[8]) r.push_back(fit(SumOver(b, g, {0, 2}, false)));
  return r;
}
constexpr lazy::Lowering kBatchNormBackward{"aten::native_batch_norm_backward",
                                            &LowerBatchNormBackward};

// Runs a normalization backward whose outputs (grad_input, grad_weight,
// grad_bias; the last two of `pt` and size C) are picked by `mask`. An empty
// input gets empty / zero gradients without a program.
template <typename Inputs>
std::tuple<Tensor, Tensor, Tensor> RunNormBackward(const lazy::Lowering& op,
                                                   const lazy::Attrs& attrs, const Tensor& input,
                                                   int64_t C, at::ScalarType pt,
                                                   std::array<bool, 3> mask, Inputs inputs) {
  std::vector<ir::TensorType> types;
  if (mask[0]) types.push_back(TypeOf(input.sizes(), input.scalar_type()));
  if (mask[1]) types.push_back(TypeOf({C}, pt));
  if (mask[2]) types.push_back(TypeOf({C}, pt));
  Tensor res[3];
  if (types.empty()) return {res[0], res[1], res[2]};
  if (input.numel() == 0) {
    if (mask[0]) res[0] = EmptyTpu(input.sizes(), input.scalar_type());
    if (mask[1]) res[1] = EmptyTpu({C}, pt).zero_();
    if (mask[2]) res[2] = EmptyTpu({C}, pt).zero_();
    return {res[0], res[1], res[2]};
  }
  auto r = Run(op, attrs, inputs(), types);
  size_t k = 0;
  for (int i = 0; i < 3; ++i)
    if (mask[i]) res[i] = r[k++];
  return {res[0], res[1], res[2]};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad, const Tensor& input, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    const std::optional<Tensor>& save_mean, const std::optional<Tensor>& save_invstd, bool train,
    double eps, std::array<bool, 3> mask) {
  CheckTpu("native_batch_norm_backward", grad, "grad_out");
  const Tensor w = Has(weight) ? *weight : Tensor();
  const int64_t B = input.size(0), C = input.size(1);
  const int64_t S = C == 0 || B == 0 ? 0 : input.numel() / (B * C);
  const Tensor& m = train ? *save_mean : *running_mean;
  const Tensor& v = train ? *save_invstd : *running_var;
  TORCH_CHECK(Has(train ? save_mean : running_mean) && Has(train ? save_invstd : running_var),
              "native_batch_norm_backward: missing ", train ? "saved" : "running", " statistics");
  const auto pt = w.defined() ? w.scalar_type() : StatType(input, {&m});
  return RunNormBackward(kBatchNormBackward,
                         {{B, C, S, w.defined(), train, IrCode(OpMathType(input.scalar_type())),
                           mask[0], mask[1], mask[2]},
                          {eps},
                          {}},
                         input, C, pt, mask, [&] {
                           std::vector<lazy::Operand> in{OperandOf(grad), OperandOf(input)};
                           if (w.defined()) in.push_back(OperandOf(w));
                           in.push_back(OperandOf(m));
                           in.push_back(OperandOf(v));
                           return in;
                         });
}

// ---- group norm ----
// x is viewed as [N, G, D] (D = C/G * HxW) for the statistics and as
// [N, C, HxW] for the per-channel affine.

// ins = (x, [w], [b]); ints = (N, C, HxW, G, has_w, has_b, acc); floats = (eps)
VS LowerGroupNorm(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t N = a.ints[0], C = a.ints[1], HW = a.ints[2], G = a.ints[3];
  const auto acc = static_cast<DType>(a.ints[6]);
  const int64_t D = C / G * HW;
  Value x = ir::Reshape(b, ir::Convert(b, in[0], acc), {N * G, D});
  RowStats s = Stats(b, x, a.floats[0]);
  Value y = ir::Reshape(b, Normalized(b, x, s.mean, s.rstd), {N, C, HW});
  size_t next = 1;
  if (a.ints[4]) y = Mul(b, y, PerChannel(b, in[next++], {N, C, HW}, acc));
  if (a.ints[5]) y = Add(b, y, PerChannel(b, in[next++], {N, C, HW}, acc));
  auto fit = [&](Value v, const ir::TensorType& t) { return ir::Reshape(b, ir::Convert(b, v, t.dtype), t.dims); };
  return {fit(y, out[0]), fit(s.mean, out[1]), fit(s.rstd, out[2])};
}
constexpr lazy::Lowering kGroupNorm{"aten::native_group_norm", &LowerGroupNorm};

void CheckGroupNorm(const Tensor& input, const Tensor& w, const Tensor& bb, int64_t N, int64_t C,
                    int64_t HxW, int64_t group) {
  TORCH_CHECK(group > 0 && C % group == 0, "Expected number of channels in input to be "
              "divisible by num_groups, but got input of shape ", input.sizes(), " and "
              "num_groups=", group);
  TORCH_CHECK(input.numel() == N * C * HxW, "Expected input to have ", N * C * HxW,
              " elements, got ", input.numel());
  TORCH_CHECK(!w.defined() || (w.dim() == 1 && w.numel() == C), "Expected weight to be a vector "
              "of size equal to the number of channels in input, but got weight of shape ",
              w.sizes(), " and input of shape ", input.sizes());
  TORCH_CHECK(!bb.defined() || (bb.dim() == 1 && bb.numel() == C), "Expected bias to be a vector "
              "of size equal to the number of channels in input, but got bias of shape ",
              bb.sizes(), " and input of shape ", input.sizes());
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& input,
                                                     const std::optional<Tensor>& weight,
                                                     const std::optional<Tensor>& bias,
                                                     int64_t N, int64_t C, int64_t HxW,
                                                     int64_t group, double eps) {
  CheckTpu("native_group_norm", input, "input");
  const Tensor w = Has(weight) ? *weight : Tensor(), bb = Has(bias) ? *bias : Tensor();
  CheckGroupNorm(input, w, bb, N, C, HxW, group);
  const auto dt = input.scalar_type();
  const auto st = StatType(input, {&w, &bb});
  if (input.numel() == 0)
    return {EmptyTpu(input.sizes(), dt), EmptyTpu({N, group}, st), EmptyTpu({N, group}, st)};
  std::vector<lazy::Operand> in{OperandOf(input)};
  if (w.defined()) in.push_back(OperandOf(w));
  if (bb.defined()) in.push_back(OperandOf(bb));
  auto r = Run(kGroupNorm, {{N, C, HxW, group, w.defined(), bb.defined(), IrCode(OpMathType(dt))}, {eps}, {}},
               in, {TypeOf(input.sizes(), dt), TypeOf({N, group}, st), TypeOf({N, group}, st)});
  return {r[0], r[1], r[2]};
}

// ins = (g, x, mean, rstd, [w]); ints = (N, C, HxW, G, has_w, acc, want_dx,
// want_dw, want_db)
VS LowerGroupNormBackward(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t N = a.ints[0], C = a.ints[1], HW = a.ints[2], G = a.ints[3];
  const bool has_w = a.ints[4];
  const auto acc = static_cast<DType>(a.ints[5]);
  const int64_t D = C / G * HW;
  const ir::Dims nchw{N, C, HW};
  Value g = ir::Reshape(b, ir::Convert(b, in[0], acc), nchw);
  Value x = ir::Reshape(b, ir::Convert(b, in[1], acc), {N * G, D});
  Value mean = ir::Reshape(b, ir::Convert(b, in[2], acc), {N * G});
  Value rstd = ir::Reshape(b, ir::Convert(b, in[3], acc), {N * G});
  Value xhat = Normalized(b, x, mean, rstd);
  Value xhat_c = ir::Reshape(b, xhat, nchw);
  Value gw = has_w ? Mul(b, g, PerChannel(b, in[4], nchw, acc)) : g;
  VS r;
  size_t o = 0;
  auto fit = [&](Value v) {
    const ir::TensorType& t = out[o++];
    return ir::Reshape(b, ir::Convert(b, v, t.dtype), t.dims);
  };
  if (a.ints[6]) r.push_back(fit(RowsBackward(b, ir::Reshape(b, gw, {N * G, D}), xhat, rstd)));
  if (a.ints[7]) r.push_back(fit(SumOver(b, Mul(b, g, xhat_c), {0, 2}, false)));
  if (a.ints[8]) r.push_back(fit(SumOver(b, g, {0, 2}, false)));
  return r;
}
constexpr lazy::Lowering kGroupNormBackward{"aten::native_group_norm_backward",
                                            &LowerGroupNormBackward};

std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward(
    const Tensor& grad, const Tensor& input, const Tensor& mean, const Tensor& rstd,
    const std::optional<Tensor>& weight, int64_t N, int64_t C, int64_t HxW, int64_t group,
    std::array<bool, 3> mask) {
  CheckTpu("native_group_norm_backward", grad, "grad_out");
  const Tensor w = Has(weight) ? *weight : Tensor();
  CheckGroupNorm(input, w, Tensor(), N, C, HxW, group);
  const auto pt = w.defined() ? w.scalar_type() : input.scalar_type();
  return RunNormBackward(kGroupNormBackward,
                         {{N, C, HxW, group, w.defined(), IrCode(OpMathType(input.scalar_type())),
                           mask[0], mask[1], mask[2]},
                          {},
                          {}},
                         input, C, pt, mask, [&] {
                           std::vector<lazy::Operand> in{OperandOf(grad), OperandOf(input),
                                                         OperandOf(mean), OperandOf(rstd)};
                           if (w.defined()) in.push_back(OperandOf(w));
                           return in;
                         });
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm));
  m.impl("_native_batch_norm_legit", TORCH_FN(batch_norm_legit));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(batch_norm_legit_no_stats));
  m.impl("native_batch_norm_backward", TORCH_FN(native_batch_norm_backward));
  m.impl("native_group_norm", TORCH_FN(native_group_norm));
  m.impl("native_group_norm_backward", TORCH_FN(native_group_norm_backward));
}

}  // namespace tpu::ops
