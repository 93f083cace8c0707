// Connectionist temporal classification loss: _ctc_loss and
// _ctc_loss_backward (both the int[] and the Tensor-lengths overloads), as
// CPU computes them (Graves et al. 2006, in log space).
//
// The alpha (forward) and beta (backward) recursions run over time in a
// stablehlo.while; each step updates all batch elements and all positions of
// the extended target (blank, l1, blank, l2, ..., blank) at once. Lengths are
// device data, so a batch with new lengths does not recompile and nothing
// waits for the host.
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "ir/ops.h"
#include "lazy/executor.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

namespace {

Value I64(Builder& b, int64_t v, const ir::Dims& dims) {
  return ir::Full(b, ir::ConstantI(b, v, DType::S64), dims);
}
Value NegInf(Builder& b, DType t, const ir::Dims& dims) { return ir::Full(b, ir::MinValue(b, t), dims); }
Value Eq(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::EQ); }
Value And(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.and", x, y); }
Value Exp(Builder& b, Value x) { return ir::Unary(b, "stablehlo.exponential", x); }
Value Log(Builder& b, Value x) { return ir::Unary(b, "stablehlo.log", x); }

// x (N, L) shifted by k along dim 1: right (x[s - k]) or left (x[s + k]),
// `fill` where the source is outside.
Value Shift(Builder& b, Value x, int64_t k, bool right, Value fill_scalar) {
  const ir::TensorType t = b.type(x);
  const int64_t n = t.dims[0], l = t.dims[1];
  if (k >= l) return ir::Full(b, fill_scalar, t.dims);
  Value fill = ir::Full(b, fill_scalar, {n, k});
  if (right) return ir::Concatenate(b, {fill, ir::Slice(b, x, {0, 0}, {n, l - k}, {1, 1})}, 1);
  return ir::Concatenate(b, {ir::Slice(b, x, {0, k}, {n, l}, {1, 1}), fill}, 1);
}

// log(exp(a1) + exp(a2) + exp(a3)) the way CPU computes it (the maximum
// taken out, 0 when all are -inf).
Value LogSumExp(Builder& b, const VS& xs) {
  Value m = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) m = ir::Max(b, m, xs[i]);
  const DType dt = b.type(m).dtype;
  m = ir::Select(b, Eq(b, m, NegInf(b, dt, b.type(m).dims)), C(b, 0, m), m);
  Value s = Exp(b, Sub(b, xs[0], m));
  for (size_t i = 1; i < xs.size(); ++i) s = Add(b, s, Exp(b, Sub(b, xs[i], m)));
  return Add(b, Log(b, s), m);
}

// What both directions need: the extended labels, the valid positions, the
// log-probabilities of each (t, n, s) and the skip transitions.
struct Ctc {
  int64_t T, N, C, L;
  DType dt;
  Value s;      // (N, L) s64 position
  Value lab;    // (N, L) s64 extended label
  Value valid;  // (N, L) s <= 2 * target_length
  Value lpe;    // (T, N, L) log_probs at the extended labels
  Value skip;   // (N, L) alpha may come from s - 2
  Value il, tl; // (N) s64
};

// in = (log_probs (T, N, C), targets (N, S) or (sum of lengths), input_lengths,
// target_lengths).
Ctc Prepare(Builder& b, const VS& in, int64_t blank, int64_t L) {
  Ctc c;
  const ir::TensorType& lt = b.type(in[0]);
  c.T = lt.dims[0];
  c.N = lt.dims[1];
  c.C = lt.dims[2];
  c.L = L;
  c.dt = lt.dtype;
  const int64_t N = c.N;
  const ir::Dims nl{N, L};
  c.il = ir::Convert(b, in[2], DType::S64);
  c.tl = ir::Convert(b, in[3], DType::S64);
  c.s = ir::Iota(b, nl, 1, DType::S64);
  Value n_idx = ir::Iota(b, nl, 0, DType::S64);
  Value k = ir::Binary(b, "stablehlo.divide", Sub(b, c.s, I64(b, 1, nl)), I64(b, 2, nl));
  k = ir::Max(b, k, I64(b, 0, nl));
  const ir::TensorType& tt = b.type(in[1]);
  Value tgt = I64(b, blank, nl);
  if (tt.numel() > 0) {
    Value flat = ir::Reshape(b, ir::Convert(b, in[1], DType::S64), {tt.numel()});
    Value idx;
    if (tt.rank() == 2) {
      const int64_t S = tt.dims[1];
      idx = Add(b, Mul(b, n_idx, I64(b, S, nl)), ir::Min(b, k, I64(b, S - 1, nl)));
    } else {
      // Concatenated targets: element n starts after the lengths before it.
      Value cum = ir::CumReduce(b, c.tl, ir::ConstantI(b, 0, DType::S64), 0, "stablehlo.add");
      Value off = Sub(b, cum, c.tl);
      idx = Add(b, ir::BroadcastInDim(b, off, nl, {0}), k);
      idx = ir::Min(b, ir::Max(b, idx, I64(b, 0, nl)), I64(b, tt.numel() - 1, nl));
    }
    tgt = ir::Take(b, flat, idx);
  }
  Value odd = Eq(b, ir::Binary(b, "stablehlo.remainder", c.s, I64(b, 2, nl)), I64(b, 1, nl));
  c.lab = ir::Select(b, odd, tgt, I64(b, blank, nl));
  Value tl2 = Mul(b, ir::BroadcastInDim(b, c.tl, nl, {0}), I64(b, 2, nl));
  c.valid = ir::Compare(b, c.s, tl2, ir::Cmp::LE);
  Value prev2 = Shift(b, c.lab, 2, true, ir::ConstantI(b, -1, DType::S64));
  c.skip = And(b, ir::Compare(b, c.s, I64(b, 2, nl), ir::Cmp::GE),
               ir::Compare(b, c.lab, prev2, ir::Cmp::NE));
  // lpe[t, n, s] = log_probs[t, n, lab[n, s]], through the flat index.
  const ir::Dims tnl{c.T, N, L};
  Value t3 = ir::Iota(b, tnl, 0, DType::S64), n3 = ir::Iota(b, tnl, 1, DType::S64);
  Value lab3 = ir::BroadcastInDim(b, c.lab, tnl, {1, 2});
  Value flat_idx = Add(b, Mul(b, Add(b, Mul(b, t3, I64(b, N, tnl)), n3), I64(b, c.C, tnl)), lab3);
  c.lpe = ir::Take(b, ir::Reshape(b, in[0], {lt.numel()}), flat_idx);
  return c;
}

Value RowAt(Builder& b, Value x3, Value t, int64_t dim) {  // x3[:, t] or x3[t] as (N, L)
  const ir::TensorType& xt = b.type(x3);
  ir::Dims sz = xt.dims;
  sz[dim] = 1;
  Value r = loop::DynSlice(b, x3, loop::Starts(b, 3, dim, t), sz);
  ir::Dims out;
  for (int64_t i = 0; i < 3; ++i)
    if (i != dim) out.push_back(xt.dims[i]);
  return ir::Reshape(b, r, out);
}
Value PutRow(Builder& b, Value x3, Value row, Value t, int64_t dim) {
  ir::Dims sz = b.type(x3).dims;
  sz[dim] = 1;
  return loop::DynUpdate(b, x3, ir::Reshape(b, row, sz), loop::Starts(b, 3, dim, t));
}

// in = (log_probs, targets, input_lengths, target_lengths); ints = (blank, L).
// out = (neg_log_likelihood (N), log_alpha (N, T, L)).
VS LowerCtc(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  Ctc c = Prepare(b, in, a.ints[0], a.ints[1]);
  const int64_t T = c.T, N = c.N, L = c.L;
  const ir::Dims nl{N, L};
  Value ninf = NegInf(b, c.dt, nl);
  Value lp0 = RowAt(b, c.lpe, ir::ConstantI(b, 0, DType::S64), 0);
  Value alpha0 = ir::Select(b, And(b, c.valid, ir::Compare(b, c.s, I64(b, 1, nl), ir::Cmp::LE)), lp0, ninf);
  Value buf = NegInf(b, c.dt, {N, T, L});
  buf = PutRow(b, buf, alpha0, ir::ConstantI(b, 0, DType::S64), 1);
  VS r = loop::For(b, 1, T, {alpha0, buf, c.lpe, c.skip, c.valid},
                   [&](Builder& bb, Value t, const VS& v) {
    Value prev = v[0];
    Value ni = NegInf(bb, c.dt, nl);
    Value a2 = Shift(bb, prev, 1, true, ir::MinValue(bb, c.dt));
    Value a3 = ir::Select(bb, v[3], Shift(bb, prev, 2, true, ir::MinValue(bb, c.dt)), ni);
    Value next = Add(bb, LogSumExp(bb, {prev, a2, a3}), RowAt(bb, v[2], t, 0));
    next = ir::Select(bb, v[4], next, ni);
    return VS{next, PutRow(bb, v[1], next, t, 1), v[2], v[3], v[4]};
  });
  Value alpha = r[1];
  // log-likelihood: alpha at t = input_length - 1, s = 2 tl and 2 tl - 1.
  Value tend = ir::Max(b, Sub(b, c.il, I64(b, 1, {N})), I64(b, 0, {N}));
  Value base = Mul(b, Add(b, Mul(b, ir::Iota(b, {N}, 0, DType::S64), I64(b, T, {N})), tend), I64(b, L, {N}));
  Value flat = ir::Reshape(b, alpha, {N * T * L});
  Value s1 = Mul(b, c.tl, I64(b, 2, {N}));
  Value s2 = ir::Max(b, Sub(b, s1, I64(b, 1, {N})), I64(b, 0, {N}));
  Value l1 = ir::Take(b, flat, Add(b, base, s1));
  Value l2 = ir::Select(b, ir::Compare(b, c.tl, I64(b, 0, {N}), ir::Cmp::GT),
                        ir::Take(b, flat, Add(b, base, s2)), NegInf(b, c.dt, {N}));
  Value ll = LogSumExp(b, {l1, l2});
  Value empty_in = Eq(b, c.il, I64(b, 0, {N}));
  Value ll0 = ir::Select(b, Eq(b, c.tl, I64(b, 0, {N})), C(b, 0, ll), NegInf(b, c.dt, {N}));
  ll = ir::Select(b, empty_in, ll0, ll);
  Value nll = ir::Unary(b, "stablehlo.negate", ll);
  return {ir::Convert(b, nll, out[0].dtype), ir::Convert(b, alpha, out[1].dtype)};
}
constexpr lazy::Lowering kCtc{"aten::_ctc_loss", &LowerCtc};

// in = (grad (N), log_probs, targets, input_lengths, target_lengths, nll (N),
// log_alpha (N, T, L)); ints = (blank, L, zero_infinity). out = grad of
// log_probs (T, N, C), with CPU's formula (the gradient through a
// log_softmax folded in: exp(lp) - exp(log(occupancy) + nll - lp)).
VS LowerCtcGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  VS fin{in[1], in[2], in[3], in[4]};
  Ctc c = Prepare(b, fin, a.ints[0], a.ints[1]);
  const bool zero_inf = a.ints[2] != 0;
  const int64_t T = c.T, N = c.N, L = c.L, C_ = c.C;
  const ir::Dims nl{N, L};
  Value grad_out = ir::Convert(b, in[0], c.dt);
  Value nll = ir::Convert(b, in[5], c.dt);
  Value log_alpha = ir::Convert(b, in[6], c.dt);
  Value ilm1 = ir::BroadcastInDim(b, Sub(b, c.il, I64(b, 1, {N})), nl, {0});
  Value tl2 = Mul(b, ir::BroadcastInDim(b, c.tl, nl, {0}), I64(b, 2, nl));
  // beta may come from s + 2 where the label there differs from s's.
  Value skipb = Shift(b, c.skip, 2, false, ir::ConstantI(b, 0, DType::PRED));
  Value init_pos = And(b, c.valid, ir::Compare(b, c.s, Sub(b, tl2, I64(b, 1, nl)), ir::Cmp::GE));
  Value buf = NegInf(b, c.dt, {N, T, L});
  VS r = loop::For(b, 0, T, {NegInf(b, c.dt, nl), buf, c.lpe, skipb, c.valid, ilm1, init_pos},
                   [&](Builder& bb, Value i, const VS& v) {
    Value t = Sub(bb, ir::ConstantI(bb, T - 1, DType::S64), i);
    Value next = v[0];
    Value ni = NegInf(bb, c.dt, nl);
    Value lpt = RowAt(bb, v[2], t, 0);
    Value b2 = Shift(bb, next, 1, false, ir::MinValue(bb, c.dt));
    Value b3 = ir::Select(bb, v[3], Shift(bb, next, 2, false, ir::MinValue(bb, c.dt)), ni);
    Value rec = ir::Select(bb, v[4], Add(bb, LogSumExp(bb, {next, b2, b3}), lpt), ni);
    Value init = ir::Select(bb, v[6], lpt, ni);
    Value tt = ir::Full(bb, t, nl);
    Value beta = ir::Select(bb, Eq(bb, tt, v[5]), init,
                            ir::Select(bb, ir::Compare(bb, tt, v[5], ir::Cmp::LT), rec, ni));
    return VS{beta, PutRow(bb, v[1], beta, t, 1), v[2], v[3], v[4], v[5], v[6]};
  });
  Value log_beta = r[1];
  // lcab[n, t, c] = log sum over s with lab[n, s] == c of alpha * beta.
  const ir::Dims ntl{N, T, L}, nt{N, T}, ntc{N, T, C_};
  Value ab = Add(b, log_alpha, log_beta);
  Value m = ir::Reduce(b, ab, ir::MinValue(b, c.dt), {2}, "stablehlo.maximum");
  m = ir::Select(b, Eq(b, m, NegInf(b, c.dt, nt)), C(b, 0, m), m);
  Value e = Exp(b, Sub(b, ab, ir::BroadcastInDim(b, m, ntl, {0, 1})));
  Value n3 = ir::Iota(b, ntl, 0, DType::S64), t3 = ir::Iota(b, ntl, 1, DType::S64);
  Value lab3 = ir::BroadcastInDim(b, c.lab, ntl, {0, 2});
  Value idx = Add(b, Mul(b, Add(b, Mul(b, n3, I64(b, T, ntl)), t3), I64(b, C_, ntl)), lab3);
  ir::ScatterDims sd;
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 3;
  Value sums = ir::Scatter(b, ir::Full(b, ir::ConstantF(b, 0, c.dt), {N * T * C_}), idx, e, sd,
                           "stablehlo.add");
  Value lcab = Add(b, Log(b, ir::Reshape(b, sums, ntc)), ir::BroadcastInDim(b, m, ntc, {0, 1}));
  Value lp = ir::Transpose(b, ir::Convert(b, in[1], c.dt), {1, 0, 2});  // (N, T, C)
  Value nll3 = ir::BroadcastInDim(b, nll, ntc, {0});
  Value g = Sub(b, Exp(b, lp), Exp(b, Sub(b, Add(b, lcab, nll3), lp)));
  g = Mul(b, g, ir::BroadcastInDim(b, grad_out, ntc, {0}));
  Value keep = ir::Compare(b, ir::Iota(b, ntc, 1, DType::S64), ir::BroadcastInDim(b, c.il, ntc, {0}),
                           ir::Cmp::LT);
  if (zero_inf) {
    Value inf = ir::Full(b, ir::Unary(b, "stablehlo.negate", ir::MinValue(b, c.dt)), ntc);
    keep = And(b, keep, ir::Compare(b, nll3, inf, ir::Cmp::NE));
  }
  g = ir::Select(b, keep, g, C(b, 0, g));
  return {ir::Convert(b, ir::Transpose(b, g, {1, 0, 2}), out[0].dtype)};
}
constexpr lazy::Lowering kCtcGrad{"aten::_ctc_loss_backward", &LowerCtcGrad};

// A lengths argument as an s64 device operand: tpu tensors as they are, CPU
// tensors and int lists uploaded (their values are on the host already).
lazy::Operand Upload(const std::vector<int64_t>& v) {
  lazy::Operand o;
  o.node = lazy::Executor::Get().Upload(v.data(), DType::S64, {static_cast<int64_t>(v.size())});
  o.view = lazy::ViewSpec{{static_cast<int64_t>(v.size())}, {1}, 0, DType::S64};
  return o;
}
lazy::Operand LengthsOperand(const Tensor& t, const char* name) {
  TORCH_CHECK(at::isIntegralType(t.scalar_type(), /*includeBool=*/false), name, " must be integral");
  if (t.device().type() == c10::DeviceType::PrivateUse1) return OperandOf(t.reshape({-1}));
  Tensor c = t.to(at::kLong).contiguous().reshape({-1});
  return Upload(std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()));
}

void CheckArgs(const Tensor& lp, const Tensor& targets, int64_t blank, int64_t n_il, int64_t n_tl) {
  CheckTpu("ctc_loss", lp, "log_probs");
  TORCH_CHECK(lp.dim() == 3, "Expected 3-dimensional tensor, but got ", lp.dim(),
              "-dimensional tensor for argument #1 'log_probs' (while checking arguments for "
              "ctc_loss_tpu)");
  TORCH_CHECK(at::isFloatingType(lp.scalar_type()), "ctc_loss: expected floating log_probs, got ",
              lp.scalar_type());
  TORCH_CHECK(lp.numel() > 0, "log_probs tensor must not be empty");
  TORCH_CHECK(targets.dim() >= 1 && targets.dim() <= 2, "Expected 1 to 2 dimensions, but got ",
              targets.dim(), "-dimensional tensor for argument #2 'targets' (while checking "
              "arguments for ctc_loss_tpu)");
  TORCH_CHECK(at::isIntegralType(targets.scalar_type(), false), "ctc_loss: expected integer targets, got ",
              targets.scalar_type());
  const int64_t batch = lp.size(1), labels = lp.size(2);
  TORCH_CHECK(0 <= blank && blank < labels, "blank must be in label range");
  TORCH_CHECK(n_il == batch, "input_lengths must be of size batch_size");
  TORCH_CHECK(n_tl == batch, "target_lengths must be of size batch_size");
  if (targets.dim() == 2)
    TORCH_CHECK(targets.size(0) == batch, "Expected tensor to have size ", batch,
                " at dimension 0, but got size ", targets.size(0), " for argument #2 'targets' "
                "(while checking arguments for ctc_loss_tpu)");
}

lazy::Operand TargetsOperand(const Tensor& targets) {
  if (targets.device().type() == c10::DeviceType::PrivateUse1) return OperandOf(targets);
  return OperandOf(targets.to(c10::Device(c10::DeviceType::PrivateUse1)));
}

std::tuple<Tensor, Tensor> Forward(const Tensor& lp, const Tensor& targets, lazy::Operand il,
                                   lazy::Operand tl, int64_t L, int64_t blank) {
  const int64_t T = lp.size(0), N = lp.size(1);
  if (T == 0 || N == 0) {
    std::vector<Tensor> r = {EmptyTpu({N}, lp.scalar_type()), EmptyTpu({N, T, L}, lp.scalar_type())};
    return {r[0].fill_(0), r[1]};
  }
  auto r = Run(kCtc, {{blank, L}, {}, {}}, {OperandOf(lp), TargetsOperand(targets), il, tl},
               {TypeOf({N}, lp.scalar_type()), TypeOf({N, T, L}, lp.scalar_type())});
  return {r[0], r[1]};
}

Tensor Backward(const Tensor& grad, const Tensor& lp, const Tensor& targets, lazy::Operand il,
                lazy::Operand tl, const Tensor& nll, const Tensor& log_alpha, int64_t blank,
                bool zero_infinity) {
  CheckTpu("ctc_loss_backward", grad, "grad");
  const int64_t T = lp.size(0), N = lp.size(1), C = lp.size(2);
  if (lp.numel() == 0) return EmptyTpu(lp.sizes(), lp.scalar_type()).zero_();
  return Run1(kCtcGrad, {{blank, log_alpha.size(2), zero_infinity ? 1 : 0}, {}, {}},
              {OperandOf(grad.expand({N})), OperandOf(lp), TargetsOperand(targets), il, tl,
               OperandOf(nll), OperandOf(log_alpha)},
              TypeOf({T, N, C}, lp.scalar_type()));
}

std::tuple<Tensor, Tensor> ctc_loss_tpu(const Tensor& lp, const Tensor& targets, at::IntArrayRef il,
                                        at::IntArrayRef tl, int64_t blank, bool zero_infinity) {
  (void)zero_infinity;  // applied by ctc_loss (forward) and by the backward
  CheckArgs(lp, targets, blank, static_cast<int64_t>(il.size()), static_cast<int64_t>(tl.size()));
  int64_t max_tl = 0;
  for (int64_t v : tl) max_tl = std::max(max_tl, v);
  for (size_t i = 0; i < il.size(); ++i) {
    TORCH_CHECK(il[i] >= 0 && il[i] <= lp.size(0), "Expected input_lengths to have value at most ",
                lp.size(0), ", but got value ", il[i], " (while checking arguments for ctc_loss_tpu)");
    TORCH_CHECK(tl[i] >= 0, "target_lengths must be non-negative");
  }
  if (targets.dim() == 2)
    TORCH_CHECK(targets.size(1) >= max_tl, "Expected tensor to have size at least ", max_tl,
                " at dimension 1, but got size ", targets.size(1), " for argument #2 'targets' "
                "(while checking arguments for ctc_loss_tpu)");
  return Forward(lp, targets, Upload(il.vec()), Upload(tl.vec()), 2 * max_tl + 1, blank);
}

// Lengths on the device: the extended target is as long as the targets allow
// (2 S + 1 for (N, S) targets, 2 numel + 1 for concatenated ones).
int64_t MaxExtended(const Tensor& targets) {
  return 2 * (targets.dim() == 2 ? targets.size(1) : targets.numel()) + 1;
}

std::tuple<Tensor, Tensor> ctc_loss_tensor_tpu(const Tensor& lp, const Tensor& targets,
                                               const Tensor& il, const Tensor& tl, int64_t blank,
                                               bool zero_infinity) {
  (void)zero_infinity;
  CheckArgs(lp, targets, blank, il.numel(), tl.numel());
  return Forward(lp, targets, LengthsOperand(il, "input_lengths"),
                 LengthsOperand(tl, "target_lengths"), MaxExtended(targets), blank);
}

Tensor ctc_loss_backward_tpu(const Tensor& grad, const Tensor& lp, const Tensor& targets,
                             at::IntArrayRef il, at::IntArrayRef tl, const Tensor& nll,
                             const Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  return Backward(grad, lp, targets, Upload(il.vec()), Upload(tl.vec()), nll, log_alpha, blank,
                  zero_infinity);
}

Tensor ctc_loss_backward_tensor_tpu(const Tensor& grad, const Tensor& lp, const Tensor& targets,
                                    const Tensor& il, const Tensor& tl, const Tensor& nll,
                                    const Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  return Backward(grad, lp, targets, LengthsOperand(il, "input_lengths"),
                  LengthsOperand(tl, "target_lengths"), nll, log_alpha, blank, zero_infinity);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss", TORCH_FN(ctc_loss_tpu));
  m.impl("_ctc_loss.Tensor", TORCH_FN(ctc_loss_tensor_tpu));
  m.impl("_ctc_loss_backward", TORCH_FN(ctc_loss_backward_tpu));
  m.impl("_ctc_loss_backward.Tensor", TORCH_FN(ctc_loss_backward_tensor_tpu));
}

}  // namespace tpu::ops
