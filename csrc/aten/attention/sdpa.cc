// Scaled dot-product attention as one program forward and one backward.
// PyTorch asks an out-of-tree backend which SDPA kernel to use
// (_fused_sdp_choice); answering "overrideable" routes
// F.scaled_dot_product_attention to _scaled_dot_product_fused_attention_
// overrideable and its backward, whose autograd formula PyTorch supplies.
// The causal mask is built from iotas inside the program (no L x S mask
// tensor), the softmax is recomputed in the backward from q and k (only the
// output and its log-sum-exp are saved), and rows whose every score is
// masked give zeros, as the math path's _safe_softmax does. Long causal
// attention runs by blocks of query rows that skip the masked upper
// triangle (CausalBlocks). Grouped-query heads (enable_gqa) share each
// key/value head among a group of query heads inside the program. Cases
// the program does not cover (dropout, inputs other than 4-D) stay on
// PyTorch's math path.
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"
#include "aten/precision.h"

namespace tpu::ops {

namespace {

// [B, H, L] -> [B, H, L, S]
Value Rows(Builder& b, Value x, const ir::Dims& dims) {
  return ir::BroadcastInDim(b, x, dims, {0, 1, 2});
}

// Key/value heads [B, Hkv, S, D] repeated for [B, Hq, S, D] (head j serves
// query heads j*g .. j*g+g-1, as repeat_interleave does), and the sum back.
Value RepeatHeads(Builder& b, Value x, int64_t hq) {
  const ir::Dims d = b.type(x).dims;
  if (d[1] == hq) return x;
  const int64_t g = hq / d[1];
  Value e = ir::BroadcastInDim(b, x, {d[0], d[1], g, d[2], d[3]}, {0, 1, 3, 4});
  return ir::Reshape(b, e, {d[0], hq, d[2], d[3]});
}
Value SumHeads(Builder& b, Value x, int64_t hkv) {
  const ir::Dims d = b.type(x).dims;
  if (d[1] == hkv) return x;
  Value r = ir::Reshape(b, x, {d[0], hkv, d[1] / hkv, d[2], d[3]});
  return ir::Reduce(b, r, ir::ConstantF(b, 0, b.type(x).dtype), {2}, "stablehlo.add");
}

// The attention weights of one direction's program (both directions take
// ints = (precision, causal, has_bias, compute dtype, ...), floats = (scale)).
struct Probs {
  Value p;  // softmax of the scores, 0 on rows with nothing to attend
  Value m, l;  // row max (0 where the row is all -inf) and row sum of exp
};

// q k^T * scale + bias, masked, for q [B,H,L,E], k [B,H,S,E]: [B,H,L,S]
// with the lowest finite value where a key is masked out.
// `row0` is the index of q's first row in the whole sequence (q may be a
// block of rows; see CausalBlocks).
Value Scores(Builder& b, Value q, Value k, const Value* bias, bool causal, double scale,
             Precision p, DType ct, int64_t row0 = 0) {
  const ir::Dims qd = b.type(q).dims, kd = b.type(k).dims;
  const ir::Dims sd{qd[0], qd[1], qd[2], kd[2]};
  Value s = PreciseDot(b, q, k, ir::DotDims{{0, 1}, {0, 1}, {3}, {3}}, ir::TensorType{ct, sd}, p);
  s = Mul(b, s, C(b, scale, s));
  if (bias != nullptr) s = Add(b, s, ir::BroadcastTo(b, ir::Convert(b, *bias, ct), sd));
  if (causal) {
    // Query i sees keys j <= i (the upper-left aligned tril of PyTorch).
    Value rows = ir::Iota(b, sd, 2, DType::S64);
    if (row0 != 0) rows = Add(b, rows, ir::Full(b, ir::ConstantI(b, row0, DType::S64), sd));
    Value keep = ir::Compare(b, rows, ir::Iota(b, sd, 3, DType::S64), ir::Cmp::GE);
    s = ir::Select(b, keep, s, ir::Full(b, ir::MinValue(b, ct), sd));
  }
  return s;
}

// softmax of Scores(...).
Probs Softmax(Builder& b, Value q, Value k, const Value* bias, bool causal, double scale,
              Precision p, DType ct, int64_t row0 = 0) {
  Value s = Scores(b, q, k, bias, causal, scale, p, ct, row0);
  const ir::Dims sd = b.type(s).dims;
  Value m = ir::Reduce(b, s, ir::MinValue(b, ct), {3}, "stablehlo.maximum");
  m = ir::Select(b, ir::Compare(b, m, ir::Full(b, ir::MinValue(b, ct), b.type(m).dims), ir::Cmp::EQ),
                 C(b, 0, m), m);
  Value e = ir::Unary(b, "stablehlo.exponential", Sub(b, s, Rows(b, m, sd)));
  Value l = ir::Reduce(b, e, ir::ConstantF(b, 0, ct), {3}, "stablehlo.add");
  Value safe_l = ir::Select(b, ir::Compare(b, l, C(b, 0, l), ir::Cmp::EQ), C(b, 1, l), l);
  Value prob = Div(b, e, Rows(b, safe_l, sd));
  return {prob, m, l};
}

// A result computed in logical order [d0..d3], stored in the order `perm`
// (the stride order of the tensor whose layout it copies).
Value Stored(Builder& b, Value v, DType t, const std::vector<int64_t>& perm) {
  return ir::Transpose(b, ir::Convert(b, v, t), perm);
}

std::vector<int64_t> PermAt(const lazy::Attrs& a, size_t at) {
  return {a.ints[at], a.ints[at + 1], a.ints[at + 2], a.ints[at + 3]};
}

// Causal attention by blocks of query rows: rows [r0, r1) see keys
// [0, min(r1, S)) only, so the products of the masked upper triangle are
// never computed -- a quarter of the score and value products at two
// blocks, approaching half as the blocks get more. Blocks of at least 128
// rows (smaller ones ran slower on XLA CPU than the whole problem), at most
// 16 of them. On XLA CPU (benchmarks/attention.py, batch 8, 4 heads of 64)
// seq 512 went from 33 to 15-24 ms forward and from 95 to 57-66 ms
// backward, seq 1024 from 126-139 to 84-90 and from 381-396 to 214-221.
struct RowBlock {
  int64_t r0, r1, keys;
};
std::vector<RowBlock> CausalBlocks(int64_t rows, int64_t keys, bool causal) {
  constexpr int64_t kMinRows = 128, kMaxBlocks = 16;
  if (!causal || rows < 2 * kMinRows) return {{0, rows, keys}};
  const int64_t n = std::min(kMaxBlocks, rows / kMinRows);
  const int64_t size = (rows + n - 1) / n;
  std::vector<RowBlock> blocks;
  for (int64_t r0 = 0; r0 < rows; r0 += size) {
    const int64_t r1 = std::min(rows, r0 + size);
    blocks.push_back({r0, r1, std::min(keys, r1)});
  }
  return blocks;
}

// x[:, :, from:to] (the whole of x when that is all of dim 2).
Value Dim2(Builder& b, Value x, int64_t from, int64_t to) {
  ir::Dims d = b.type(x).dims;
  if (from == 0 && to == d[2]) return x;
  ir::Dims start(d.size(), 0), strides(d.size(), 1);
  start[2] = from;
  d[2] = to;
  return ir::Slice(b, x, start, d, strides);
}

// ins = (q, k, v, [bias]); ints = (precision, causal, has_bias, compute,
// perm x4); floats = (scale). Outputs: attention (stored in perm order),
// log-sum-exp [B,H,L] f32.
VS LowerSdpa(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto p = static_cast<Precision>(a.ints[0]);
  const auto ct = static_cast<DType>(a.ints[3]);
  Value q = ir::Convert(b, in[0], ct);
  const int64_t hq = b.type(q).dims[1];
  Value k = RepeatHeads(b, ir::Convert(b, in[1], ct), hq);
  Value v = RepeatHeads(b, ir::Convert(b, in[2], ct), hq);
  const bool causal = a.ints[1] != 0;
  const ir::Dims qd = b.type(q).dims, kd = b.type(k).dims, vd = b.type(v).dims;
  VS os, lses;
  for (const RowBlock& blk : CausalBlocks(qd[2], kd[2], causal && !a.ints[2])) {
    Value qb = Dim2(b, q, blk.r0, blk.r1);
    Probs s = Softmax(b, qb, Dim2(b, k, 0, blk.keys), a.ints[2] ? &in[3] : nullptr, causal,
                      a.floats[0], p, ct, blk.r0);
    os.push_back(PreciseDot(b, s.p, Dim2(b, v, 0, blk.keys), ir::DotDims{{0, 1}, {0, 1}, {3}, {2}},
                            ir::TensorType{ct, {qd[0], qd[1], blk.r1 - blk.r0, vd[3]}}, p));
    lses.push_back(Add(b, s.m, ir::Unary(b, "stablehlo.log", s.l)));
  }
  Value o = os.size() == 1 ? os[0] : ir::Concatenate(b, os, 2);
  Value lse = lses.size() == 1 ? lses[0] : ir::Concatenate(b, lses, 2);
  return {Stored(b, o, out[0].dtype, PermAt(a, 4)), ir::Convert(b, lse, out[1].dtype)};
}
constexpr lazy::Lowering kSdpa{"aten::_scaled_dot_product_fused_attention_overrideable", &LowerSdpa};

// Sums g [B,H,L,S] down to `dims` (a shape that broadcasts to it).
Value ReduceTo(Builder& b, Value g, const ir::Dims& dims) {
  const ir::Dims gd = b.type(g).dims;
  const size_t lead = gd.size() - dims.size();
  ir::Dims over;
  for (size_t i = 0; i < gd.size(); ++i)
    if (i < lead || (dims[i - lead] == 1 && gd[i] != 1)) over.push_back(static_cast<int64_t>(i));
  if (!over.empty()) g = ir::Reduce(b, g, ir::ConstantF(b, 0, b.type(g).dtype), over, "stablehlo.add");
  return ir::Reshape(b, g, dims);
}

// ins = (grad_out, q, k, v, logsumexp, [bias]); ints = (precision, causal,
// has_bias, compute, want q, k, v, bias, perm q x4, perm k x4, perm v x4);
// floats = (scale). Outputs: the wanted gradients, q/k/v ones in their perm
// order. The weights are recomputed from the scores and the forward's
// log-sum-exp (exp(s - lse)), as flash attention's backward does: no row
// max or row sum again.
VS LowerSdpaBackward(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto p = static_cast<Precision>(a.ints[0]);
  const auto ct = static_cast<DType>(a.ints[3]);
  const double scale = a.floats[0];
  Value dout = ir::Convert(b, in[0], ct);
  Value q = ir::Convert(b, in[1], ct);
  const int64_t hq = b.type(q).dims[1], hkv = b.type(in[2]).dims[1];
  Value k = RepeatHeads(b, ir::Convert(b, in[2], ct), hq);
  Value v = RepeatHeads(b, ir::Convert(b, in[3], ct), hq);
  const Value* bias = a.ints[2] ? &in[5] : nullptr;
  const bool causal = a.ints[1] != 0;
  const ir::Dims qd = b.type(q).dims, kd = b.type(k).dims, vd = b.type(v).dims;
  // A row with nothing to attend has lse = -inf; taken as 0 there, its
  // masked scores (lowest finite value, or -inf from a float mask) give
  // weights exp(score) = 0, as in the forward.
  Value lse = ir::Convert(b, in[4], ct);
  Value empty = ir::Compare(b, lse, ir::Full(b, ir::MinValue(b, ct), b.type(lse).dims), ir::Cmp::LE);
  lse = ir::Select(b, empty, C(b, 0, lse), lse);
  // By blocks of query rows (CausalBlocks): dq by rows, dk and dv summed
  // over the blocks, each block's part padded with zeros for the keys it
  // does not see.
  VS dqs;
  Value dk, dv, ds;
  auto accumulate = [&](Value& sum, Value part) {
    const int64_t missing = kd[2] - b.type(part).dims[2];
    if (missing > 0) {
      part = ir::Pad(b, part, ir::ConstantF(b, 0, ct), {0, 0, 0, 0}, {0, 0, missing, 0}, {0, 0, 0, 0});
    }
    sum = sum.valid() ? Add(b, sum, part) : part;
  };
  for (const RowBlock& blk : CausalBlocks(qd[2], kd[2], causal && bias == nullptr)) {
    Value qb = Dim2(b, q, blk.r0, blk.r1), doutb = Dim2(b, dout, blk.r0, blk.r1);
    Value kb = Dim2(b, k, 0, blk.keys), vb = Dim2(b, v, 0, blk.keys);
    Value scores = Scores(b, qb, kb, bias, causal, scale, p, ct, blk.r0);
    const ir::Dims sd = b.type(scores).dims;
    Value w = ir::Unary(b, "stablehlo.exponential",
                        Sub(b, scores, Rows(b, Dim2(b, lse, blk.r0, blk.r1), sd)));
    const ir::DotDims batch_rows{{0, 1}, {0, 1}, {3}, {3}};
    Value dp = PreciseDot(b, doutb, vb, batch_rows, ir::TensorType{ct, sd}, p);
    Value rowdot = ir::Reduce(b, Mul(b, w, dp), ir::ConstantF(b, 0, ct), {3}, "stablehlo.add");
    ds = Mul(b, w, Sub(b, dp, Rows(b, rowdot, sd)));
    const ir::Dims kbd = b.type(kb).dims;
    if (a.ints[4]) {
      dqs.push_back(PreciseDot(b, ds, kb, ir::DotDims{{0, 1}, {0, 1}, {3}, {2}},
                               ir::TensorType{ct, b.type(qb).dims}, p));
    }
    if (a.ints[5]) {
      accumulate(dk, PreciseDot(b, ds, qb, ir::DotDims{{0, 1}, {0, 1}, {2}, {2}},
                                ir::TensorType{ct, kbd}, p));
    }
    if (a.ints[6]) {
      accumulate(dv, PreciseDot(b, w, doutb, ir::DotDims{{0, 1}, {0, 1}, {2}, {2}},
                                ir::TensorType{ct, {kbd[0], kbd[1], kbd[2], vd[3]}}, p));
    }
  }
  VS r;
  size_t o = 0;
  if (a.ints[4]) {
    Value dq = dqs.size() == 1 ? dqs[0] : ir::Concatenate(b, dqs, 2);
    r.push_back(Stored(b, Mul(b, dq, C(b, scale, dq)), out[o++].dtype, PermAt(a, 8)));
  }
  if (a.ints[5]) {
    dk = SumHeads(b, Mul(b, dk, C(b, scale, dk)), hkv);
    r.push_back(Stored(b, dk, out[o++].dtype, PermAt(a, 12)));
  }
  if (a.ints[6]) r.push_back(Stored(b, SumHeads(b, dv, hkv), out[o++].dtype, PermAt(a, 16)));
  // With a bias there is one block (the whole problem), so ds is all of it.
  if (a.ints[7]) r.push_back(ir::Convert(b, ReduceTo(b, ds, out[o].dims), out[o].dtype));
  return r;
}
constexpr lazy::Lowering kSdpaBackward{"aten::_scaled_dot_product_fused_attention_overrideable_backward",
                                       &LowerSdpaBackward};

// The dims of a 4-D tensor from the largest stride to the smallest (ties in
// dim order): the layout PyTorch's meta function gives the results.
std::vector<int64_t> StrideOrder(const Tensor& t) {
  std::vector<int64_t> perm(4);
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int64_t x, int64_t y) { return t.stride(x) > t.stride(y); });
  return perm;
}

// Shape stored in `perm` order, and the view that puts it back in logical order.
std::vector<int64_t> Permuted(at::IntArrayRef sizes, const std::vector<int64_t>& perm) {
  std::vector<int64_t> d;
  for (int64_t i : perm) d.push_back(sizes[i]);
  return d;
}
Tensor Unpermute(const Tensor& stored, const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(4);
  for (int64_t i = 0; i < 4; ++i) inv[perm[i]] = i;
  return stored.permute(inv);
}

double ScaleOf(const Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// Sizes are read as SymInts: under torch.compile the choice runs on fake
// tensors whose sizes may be symbolic.
// `gqa`: key and value may have fewer heads than the query, dividing them.
bool Supported(const Tensor& q, const Tensor& k, const Tensor& v,
               const std::optional<Tensor>& mask, double dropout_p, bool gqa) {
  if (dropout_p != 0.0 || q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  for (const Tensor* t : {&q, &k, &v}) {
    if (t->device().type() != c10::DeviceType::PrivateUse1 || t->is_nested()) return false;
    if (t->scalar_type() != q.scalar_type() || t->sym_numel() == 0) return false;
  }
  const auto dt = q.scalar_type();
  if (dt != at::kFloat && dt != at::kHalf && dt != at::kBFloat16 && dt != at::kDouble) return false;
  if (k.sym_size(0) != q.sym_size(0) || v.sym_size(0) != q.sym_size(0) ||
      v.sym_size(1) != k.sym_size(1) || k.sym_size(3) != q.sym_size(3) ||
      v.sym_size(2) != k.sym_size(2))
    return false;
  if (k.sym_size(1) != q.sym_size(1) && !(gqa && q.sym_size(1) % k.sym_size(1) == 0)) return false;
  if (mask.has_value() && mask->defined()) {
    const Tensor& m = *mask;
    if (m.device() != q.device() || m.dim() > 4) return false;
    if (m.scalar_type() != at::kBool && m.scalar_type() != dt) return false;
    const c10::SymInt target[4] = {q.sym_size(0), q.sym_size(1), q.sym_size(2), k.sym_size(2)};
    for (int64_t i = 0; i < m.dim(); ++i) {
      const c10::SymInt s = m.sym_size(m.dim() - 1 - i);
      if (s != target[3 - i] && s != 1) return false;
    }
  }
  return true;
}

int64_t FusedSdpChoice(const Tensor& q, const Tensor& k, const Tensor& v,
                       const std::optional<Tensor>& mask, double dropout_p, bool is_causal,
                       std::optional<double> scale, bool enable_gqa) {
  auto& ctx = at::globalContext();
  // An explicit mask with is_causal is an error the math path reports.
  const bool both = is_causal && mask.has_value() && mask->defined();
  // Under torch.compile (fake or functional tensors, which carry the Python
  // key) the math path is traced instead: the whole graph becomes one XLA
  // program anyway, and the fused op's result layout, which PyTorch's meta
  // function derives from the query's strides, would have to match the
  // traced strides of every op before it.
  const bool traced = q.key_set().has(c10::DispatchKey::Python);
  if (ctx.userEnabledOverrideableSDP() && !both && !traced &&
      Supported(q, k, v, mask, dropout_p, enable_gqa))
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  return static_cast<int64_t>(ctx.userEnabledMathSDP() ? at::SDPBackend::math : at::SDPBackend::error);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor>
SdpaForward(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& bias,
            double dropout_p, bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  const char* name = "_scaled_dot_product_fused_attention_overrideable";
  TORCH_CHECK(Supported(q, k, v, bias, dropout_p, /*gqa=*/true), name,
              ": expects 4-D query, key and value of one floating dtype with matching batch sizes, "
              "key/value heads dividing the query heads and dropout_p == 0 (got query ", q.sizes(),
              ", key ", k.sizes(), ", value ",
              v.sizes(), ", dropout_p ", dropout_p, "); call F.scaled_dot_product_attention, which "
              "picks the math path for other cases");
  TORCH_CHECK(!return_debug_mask, name, ": return_debug_mask is not supported on tpu");
  const bool has_bias = bias.has_value() && bias->defined();
  TORCH_CHECK(!has_bias || bias->scalar_type() == q.scalar_type(), name,
              ": attn_bias must have the query's dtype ", q.scalar_type(), ", got ",
              bias->scalar_type());
  const auto dt = q.scalar_type();
  const std::vector<int64_t> perm = StrideOrder(q);
  std::vector<int64_t> attrs{static_cast<int64_t>(CurrentPrecision()), is_causal, has_bias,
                             IrCode(OpMathType(dt))};
  attrs.insert(attrs.end(), perm.begin(), perm.end());
  std::vector<lazy::Operand> in{OperandOf(q), OperandOf(k), OperandOf(v)};
  if (has_bias) in.push_back(OperandOf(*bias));
  const std::vector<int64_t> out_sizes{q.size(0), q.size(1), q.size(2), v.size(3)};
  auto r = Run(kSdpa, {attrs, {ScaleOf(q, scale)}, {}}, in,
               {TypeOf(Permuted(out_sizes, perm), dt), TypeOf({q.size(0), q.size(1), q.size(2)}, at::kFloat)});
  // No dropout, so no RNG state: the seed and offset are written zeros (a
  // never-written tensor would look different to a graph capture than the
  // replayed one does).
  auto empty_long = [] {
    Tensor t = EmptyTpu({}, at::kLong);
    const int64_t zero = 0;
    SlotOf(t)->node = lazy::Executor::Get().Scalar(&zero, ir::DType::S64);
    return t;
  };
  return {Unpermute(r[0], perm), r[1], Tensor(), Tensor(), c10::SymInt(q.size(2)),
          c10::SymInt(k.size(2)), empty_long(), empty_long(), Tensor()};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> SdpaBackward(
    const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
    std::array<bool, 4> mask, const Tensor& out, const Tensor& logsumexp, const Tensor& cum_seq_q,
    const Tensor& cum_seq_k, c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal,
    const Tensor& philox_seed, const Tensor& philox_offset, std::optional<double> scale) {
  const char* name = "_scaled_dot_product_fused_attention_overrideable_backward";
  TORCH_CHECK(Supported(q, k, v, bias, dropout_p, /*gqa=*/true), name,
              ": expects the inputs the forward accepted (4-D query, key and value, dropout_p == 0)");
  CheckTpu(name, grad_out, "grad_out");
  const bool has_bias = bias.defined();
  const bool want[4] = {mask[0], mask[1], mask[2], mask[3] && has_bias};
  Tensor res[4];
  const auto dt = q.scalar_type();
  std::vector<int64_t> attrs{static_cast<int64_t>(CurrentPrecision()), is_causal, has_bias,
                             IrCode(OpMathType(dt)), want[0], want[1], want[2], want[3]};
  std::vector<ir::TensorType> types;
  std::vector<std::vector<int64_t>> perms;
  const Tensor* ins[3] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    perms.push_back(StrideOrder(*ins[i]));
    attrs.insert(attrs.end(), perms.back().begin(), perms.back().end());
    if (want[i]) types.push_back(TypeOf(Permuted(ins[i]->sizes(), perms.back()), dt));
  }
  if (want[3]) types.push_back(TypeOf(bias.sizes(), bias.scalar_type()));
  if (types.empty()) return {res[0], res[1], res[2], res[3]};
  const std::vector<int64_t> lse_sizes{q.size(0), q.size(1), q.size(2)};
  TORCH_CHECK(logsumexp.defined(), name, ": expects the forward's logsumexp, got an undefined tensor");
  TORCH_CHECK(logsumexp.sizes() == lse_sizes && at::isFloatingType(logsumexp.scalar_type()), name,
              ": expects the forward's logsumexp, a floating tensor of shape ", c10::IntArrayRef(lse_sizes),
              ", got ", logsumexp.scalar_type(), " of shape ", logsumexp.sizes());
  CheckTpu(name, logsumexp, "logsumexp");
  std::vector<lazy::Operand> in{OperandOf(grad_out), OperandOf(q), OperandOf(k), OperandOf(v),
                                OperandOf(logsumexp)};
  if (has_bias) in.push_back(OperandOf(bias));
  auto r = Run(kSdpaBackward, {attrs, {ScaleOf(q, scale)}, {}}, in, types);
  size_t n = 0;
  for (int i = 0; i < 3; ++i)
    if (want[i]) res[i] = Unpermute(r[n++], perms[i]);
  if (want[3]) res[3] = r[n];
  return {res[0], res[1], res[2], res[3]};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(SdpaForward));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(SdpaBackward));
}

}  // namespace tpu::ops

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &tpu::ops::FusedSdpChoice)
}  // namespace at::native
