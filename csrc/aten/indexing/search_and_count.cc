// searchsorted / bucketize, bincount, histc and repeat_interleave.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/take_along_dim.h>
#include <ATen/ops/zeros.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <sstream>

#include <cstring>

#include <cmath>
#include <limits>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/indexing/index_checks.h"
#include "aten/kernel_helpers.h"

namespace tpu::ops {

namespace {

// ---- searchsorted / bucketize: counts of boundaries below each value ----

// ins = (seq [R, M], values [R, K]); ints = (right); out = [R, K] (s64 or s32).
// The position is the number of boundaries < v (<= v for right).
VS LowerSearchSorted(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::Dims sd = b.type(in[0]).dims, vd = b.type(in[1]).dims;
  const int64_t r = sd[0], m = sd[1], k = vd[1];
  ir::TensorType st = b.type(in[0]), vt = b.type(in[1]);
  // Compare in a common dtype.
  DType ct = st.dtype;
  if (ir::IsFloat(vt.dtype) && !ir::IsFloat(ct)) ct = vt.dtype;
  if (ir::IsFloat(ct) && ir::IsFloat(vt.dtype) && ir::BitWidth(vt.dtype) > ir::BitWidth(ct)) ct = vt.dtype;
  Value seq = ir::BroadcastInDim(b, ir::Convert(b, in[0], ct), {r, k, m}, {0, 2});
  Value val = ir::BroadcastInDim(b, ir::Convert(b, in[1], ct), {r, k, m}, {0, 1});
  Value below = ir::Compare(b, seq, val, a.ints[0] ? ir::Cmp::LE : ir::Cmp::LT);
  Value cnt = ir::Reduce(b, ir::Convert(b, below, DType::S64), ir::ConstantI(b, 0, DType::S64), {2},
                         "stablehlo.add");
  return {ir::Convert(b, cnt, out[0].dtype)};
}
constexpr lazy::Lowering kSearchSorted{"aten::searchsorted", &LowerSearchSorted};

Tensor SearchSorted(const char* op, const Tensor& seq_in, const Tensor& self, bool out_int32,
                    bool right, const std::optional<c10::string_view>& side,
                    const std::optional<Tensor>& sorter) {
  CheckTpu(op, seq_in, "sorted_sequence");
  CheckTpu(op, self, "self");
  if (side.has_value()) {
    TORCH_CHECK(*side == "left" || *side == "right", op, ": side can only be 'left' or 'right' "
                "but got ", *side);
    TORCH_CHECK(!right || *side == "right", op, ": side and right can't be set to opposites, "
                "got side of left while right was True");
    right = *side == "right";
  }
  TORCH_CHECK(seq_in.dim() >= 1, op, ": boundaries tensor should have positive dimension");
  Tensor seq = seq_in;
  if (sorter.has_value() && sorter->defined()) {
    TORCH_CHECK(sorter->sizes() == seq_in.sizes(), op, ": boundary and sorter must have the same "
                "size, but got boundary tensor ", seq_in.sizes(), "and got sorter tensor ",
                sorter->sizes());
    seq = at::take_along_dim(seq_in, *sorter, -1);
  }
  const auto rt = out_int32 ? at::kInt : at::kLong;
  Tensor vals = self.dim() == 0 ? self.reshape({1}) : self;
  if (seq.dim() > 1) {
    TORCH_CHECK(seq.dim() == vals.dim() && seq.sizes().slice(0, seq.dim() - 1) ==
                                               vals.sizes().slice(0, vals.dim() - 1),
                op, ": boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                "boundaries tensor and input value tensor must match, but we got boundaries "
                "tensor ", seq.sizes(), " and input value tensor ", self.sizes());
  }
  if (vals.numel() == 0) return EmptyTpu(self.sizes(), rt);
  const int64_t m = seq.size(-1);
  Tensor s2, v2;
  if (seq.dim() == 1) {
    s2 = seq.reshape({1, m});
    v2 = vals.reshape({1, -1});
  } else {
    s2 = seq.reshape({-1, m});
    v2 = vals.reshape({s2.size(0), -1});
  }
  if (m == 0) return at::zeros(self.sizes(), self.options().dtype(rt));
  Tensor r = Run1(kSearchSorted, {{right ? 1 : 0}, {}, {}}, {OperandOf(s2), OperandOf(v2)},
                  TypeOf(v2.sizes(), rt));
  return r.reshape(self.sizes());
}

Tensor searchsorted_tensor(const Tensor& seq, const Tensor& self, bool out_int32, bool right,
                           std::optional<c10::string_view> side,
                           const std::optional<Tensor>& sorter) {
  return SearchSorted("searchsorted", seq, self, out_int32, right, side, sorter);
}
Tensor searchsorted_scalar(const Tensor& seq, const c10::Scalar& self, bool out_int32, bool right,
                           std::optional<c10::string_view> side,
                           const std::optional<Tensor>& sorter) {
  TORCH_CHECK(seq.dim() == 1, "searchsorted: input value can be a scalar only when boundaries "
              "tensor dimension is 1, but we got boundaries tensor dim(", seq.dim(), ")");
  Tensor v = at::scalar_tensor(self, at::TensorOptions().dtype(seq.scalar_type())).to(seq.device());
  return SearchSorted("searchsorted", seq, v, out_int32, right, side, sorter);
}
Tensor bucketize_tensor(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right) {
  TORCH_CHECK(boundaries.dim() == 1, "bucketize: boundaries tensor must be 1 dimension, but got dim(",
              boundaries.dim(), ")");
  return SearchSorted("bucketize", boundaries, self, out_int32, right, std::nullopt, std::nullopt);
}
// The out= forms: the dtype follows out_int32, as CPU checks it.
Tensor& SearchOut(const char* op, const Tensor& r, bool out_int32, Tensor& out) {
  TORCH_CHECK(out.scalar_type() == r.scalar_type(), op, "(): output tensor's dtype is wrong, it can "
              "only be Int(int32) or Long(int64) depending on whether out_int32 flag is True, but we got output "
              "tensor's dtype ", out.scalar_type(), " and out_int32 flag is ", (out_int32 ? "True" : "False"));
  return CopyInto(op, r, out);
}
Tensor& bucketize_tensor_out(const Tensor& self, const Tensor& boundaries, bool out_int32,
                             bool right, Tensor& out) {
  return SearchOut("torch.bucketize", bucketize_tensor(self, boundaries, out_int32, right), out_int32, out);
}
Tensor& searchsorted_tensor_out(const Tensor& seq, const Tensor& self, bool out_int32, bool right,
                                std::optional<c10::string_view> side,
                                const std::optional<Tensor>& sorter, Tensor& out) {
  return SearchOut("torch.searchsorted", searchsorted_tensor(seq, self, out_int32, right, side, sorter),
                   out_int32, out);
}
Tensor bucketize_scalar(const c10::Scalar& self, const Tensor& boundaries, bool out_int32,
                        bool right) {
  Tensor v = at::scalar_tensor(self, at::TensorOptions().dtype(boundaries.scalar_type()))
                 .to(boundaries.device());
  return bucketize_tensor(v, boundaries, out_int32, right);
}

// ---- bincount, histc, repeat_interleave: sizes read on the host ----

// ins = (x[, weights]); out = [size]: counts (or weight sums) of each value.
VS LowerBincount(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const int64_t n = b.type(in[0]).dims[0], size = out[0].dims[0];
  Value idx = ir::Convert(b, in[0], DType::S64);
  Value w = in.size() > 1 ? ir::Convert(b, in[1], out[0].dtype)
                          : ir::Full(b, ir::ConstantI(b, 1, out[0].dtype), {n});
  return {ir::ScatterAddAlong(b, w, 0, idx, size)};
}
constexpr lazy::Lowering kBincount{"aten::bincount", &LowerBincount};

// ins = (x) -> (min, max) as s64 0-d.
VS LowerMinMax(Builder& b, const VS& in, const lazy::Attrs&, const TT&) {
  Value x = ir::Convert(b, in[0], DType::S64);
  return {ir::Reduce(b, x, ir::MaxValue(b, DType::S64), {0}, "stablehlo.minimum"),
          ir::Reduce(b, x, ir::MinValue(b, DType::S64), {0}, "stablehlo.maximum")};
}
constexpr lazy::Lowering kMinMax{"aten::bincount.minmax", &LowerMinMax};

Tensor bincount_tpu(const Tensor& self, const std::optional<Tensor>& weights, int64_t minlength) {
  CheckTpu("bincount", self, "self");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1 && at::isIntegralType(self.scalar_type(), false),
              "bincount only supports 1-d non-negative integral inputs.");
  const bool has_w = weights.has_value() && weights->defined();
  if (has_w) {
    CheckTpu("bincount", *weights, "weights");
    TORCH_CHECK(weights->dim() == 1 && weights->size(0) == self.size(0),
                "weights should be 1-d and have the same length as input");
  }
  const auto rt = !has_w ? at::kLong
                  : weights->scalar_type() == at::kFloat ? at::kFloat
                                                         : at::kDouble;
  int64_t size = minlength;
  if (self.numel() > 0) {
    auto mm = Run(kMinMax, {}, {OperandOf(self)}, {TypeOf({}, at::kLong), TypeOf({}, at::kLong)});
    TORCH_CHECK(mm[0].item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
    size = std::max(size, mm[1].item<int64_t>() + 1);
  }
  if (size == 0 || self.numel() == 0) return at::zeros({size}, self.options().dtype(rt));
  std::vector<lazy::Operand> in{OperandOf(self)};
  if (has_w) in.push_back(OperandOf(*weights));
  return Run1(kBincount, {}, in, TypeOf({size}, rt));
}

// ins = (x [n], lo, hi as 0-d of the dtype); ints = (bins); out = [bins].
// The bin of v is floor((v - lo) * bins / (hi - lo)), moved by one where
// the edges (computed as linspace(lo, hi, bins + 1)) say otherwise; values
// outside [lo, hi] are dropped.
VS LowerHistc(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t bins = a.ints[0];
  const DType t = out[0].dtype;
  const DType ct = t == DType::F64 ? DType::F64 : DType::F32;
  Value x = ir::Convert(b, in[0], ct);
  const ir::Dims d = b.type(x).dims;
  Value lo = ir::Convert(b, in[1], ct), hi = ir::Convert(b, in[2], ct);
  auto full = [&](Value s) { return ir::Full(b, s, d); };
  auto cst = [&](double v) { return ir::Full(b, ir::ConstantF(b, v, ct), d); };
  Value span = ir::Binary(b, "stablehlo.subtract", hi, lo);
  Value pos = ir::Unary(b, "stablehlo.floor",
                        ir::Binary(b, "stablehlo.divide",
                                   ir::Binary(b, "stablehlo.multiply",
                                              ir::Binary(b, "stablehlo.subtract", x, full(lo)),
                                              cst(static_cast<double>(bins))),
                                   full(span)));
  pos = ir::Min(b, ir::Max(b, pos, cst(0)), cst(static_cast<double>(bins - 1)));
  // Bin edges as linspace(lo, hi, bins + 1) computes them.
  Value step = ir::Binary(b, "stablehlo.divide", span, ir::ConstantF(b, static_cast<double>(bins), ct));
  auto edge = [&](Value i) {  // i: float index of the edge
    Value front = ir::Binary(b, "stablehlo.add", full(lo), ir::Binary(b, "stablehlo.multiply", full(step), i));
    Value back = ir::Binary(b, "stablehlo.subtract", full(hi),
                            ir::Binary(b, "stablehlo.multiply", full(step),
                                       ir::Binary(b, "stablehlo.subtract", cst(static_cast<double>(bins)), i)));
    Value first_half = ir::Compare(b, i, cst(static_cast<double>((bins + 1) / 2)), ir::Cmp::LT);
    return ir::Select(b, first_half, front, back);
  };
  Value e0 = edge(pos), e1 = edge(ir::Binary(b, "stablehlo.add", pos, cst(1)));
  pos = ir::Select(b, ir::Binary(b, "stablehlo.and", ir::Compare(b, x, e0, ir::Cmp::LT),
                                 ir::Compare(b, pos, cst(0), ir::Cmp::GT)),
                   ir::Binary(b, "stablehlo.subtract", pos, cst(1)), pos);
  pos = ir::Select(b, ir::Binary(b, "stablehlo.and", ir::Compare(b, x, e1, ir::Cmp::GE),
                                 ir::Compare(b, pos, cst(static_cast<double>(bins - 1)), ir::Cmp::LT)),
                   ir::Binary(b, "stablehlo.add", pos, cst(1)), pos);
  Value inside = ir::Binary(b, "stablehlo.and", ir::Compare(b, x, full(lo), ir::Cmp::GE),
                            ir::Compare(b, x, full(hi), ir::Cmp::LE));
  Value idx = ir::Select(b, inside, ir::Convert(b, pos, DType::S64),
                         ir::Full(b, ir::ConstantI(b, bins, DType::S64), d));  // dropped
  Value ones = ir::Full(b, ir::ConstantI(b, 1, ct), d);
  return {ir::Convert(b, ir::ScatterAddAlong(b, ones, 0, idx, bins), t)};
}
constexpr lazy::Lowering kHistc{"aten::histc", &LowerHistc};

Tensor histc_tpu(const Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  CheckTpu("histc", self, "self");
  TORCH_CHECK(bins > 0, "torch.histc(): bins must be > 0, but got ", bins, " for dimension 0");
  // Integer inputs as on CUDA (transformers' MoE counts tokens per expert so).
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) ||
                  at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
              "torch.histc: input tensor and bins tensors should have the same dtype, but got "
              "input ", self.scalar_type());
  double lo = min.toDouble(), hi = max.toDouble();
  Tensor flat = self.reshape({-1});
  if (lo == hi && flat.numel() > 0) {
    lo = flat.min().item<double>();
    hi = flat.max().item<double>();
  }
  // Checked on the range in use, as CPU: the data's when min == max.
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)),
              "torch.histc: range of [", lo, ", ", hi, "] is not finite");
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  if (flat.numel() == 0) return at::zeros({bins}, self.options());
  const auto st = self.scalar_type();
  const auto ct = st == at::kDouble || st == at::kLong || st == at::kInt ? at::kDouble : at::kFloat;
  return Run1(kHistc, {{bins}, {}, {}},
              {OperandOf(flat), ScalarOperand(lo, ct), ScalarOperand(hi, ct)},
              TypeOf({bins}, self.scalar_type()));
}

// ins = (repeats [n]); out = [total]: i repeated repeats[i] times.
VS LowerRepeatInterleave(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const int64_t n = b.type(in[0]).dims[0], total = out[0].dims[0];
  Value reps = ir::Convert(b, in[0], DType::S64);
  Value ends = ir::CumReduce(b, reps, ir::ConstantI(b, 0, DType::S64), 0, "stablehlo.add");
  // A mark at the end of each group (except the last) starts the next index.
  Value marks = ir::ScatterAddAlong(b, ir::Full(b, ir::ConstantI(b, 1, DType::S64), {n}), 0, ends,
                                    total);
  Value r = ir::CumReduce(b, marks, ir::ConstantI(b, 0, DType::S64), 0, "stablehlo.add");
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kRepeatInterleave{"aten::repeat_interleave", &LowerRepeatInterleave};

Tensor repeat_interleave_tensor(const Tensor& repeats, std::optional<int64_t> output_size) {
  CheckTpu("repeat_interleave", repeats, "repeats");
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  int64_t total = 0;
  if (repeats.numel() > 0) {
    if (output_size.has_value()) {
      total = *output_size;
    } else {
      auto mm = Run(kMinMax, {}, {OperandOf(repeats)}, {TypeOf({}, at::kLong), TypeOf({}, at::kLong)});
      TORCH_CHECK(mm[0].item<int64_t>() >= 0, "repeats can not be negative");
      total = repeats.sum().item<int64_t>();
    }
  }
  if (total == 0) return EmptyTpu({0}, repeats.scalar_type());
  return Run1(kRepeatInterleave, {}, {OperandOf(repeats)}, TypeOf({total}, repeats.scalar_type()));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("searchsorted.Tensor", TORCH_FN(searchsorted_tensor));
  m.impl("searchsorted.Scalar", TORCH_FN(searchsorted_scalar));
  m.impl("bucketize.Tensor", TORCH_FN(bucketize_tensor));
  m.impl("bucketize.Scalar", TORCH_FN(bucketize_scalar));
  m.impl("bucketize.Tensor_out", TORCH_FN(bucketize_tensor_out));
  m.impl("searchsorted.Tensor_out", TORCH_FN(searchsorted_tensor_out));
  m.impl("bincount", TORCH_FN(bincount_tpu));
  m.impl("histc", TORCH_FN(histc_tpu));
  m.impl("repeat_interleave.Tensor", TORCH_FN(repeat_interleave_tensor));
}

}  // namespace tpu::ops
