// _embedding_bag (sum / mean / max, per-sample weights, padding_idx,
// include_last_offset), its dense backward and the per-sample-weights
// backward.
//
// The auxiliary outputs follow the accelerator layout of PyTorch's meta
// function: offset2bag [L] (the bag of each index), bag_size [offsets.size(0)]
// (non-padding entries per bag) and max_indices [B, D] in max mode ([0]
// otherwise; -1 for empty bags). Only these kernels read them.
#include <ATen/ops/_embedding_bag.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <limits>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/indexing/index_checks.h"
#include "aten/kernel_helpers.h"

namespace tpu::ops {

using ir::Dims;

namespace {

enum Mode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

DType ComputeType(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

Value I64(Builder& b, int64_t v, const Dims& d) {
  return ir::Full(b, ir::ConstantI(b, v, DType::S64), d);
}

// The bag of each of the L index positions: (number of bag starts <= i) - 1.
Value BagOf(Builder& b, Value offsets, int64_t num_bags, int64_t l) {
  Value starts = ir::Slice(b, ir::Convert(b, offsets, DType::S64), {0}, {num_bags}, {1});
  Value marks = ir::ScatterAddAlong(b, I64(b, 1, {num_bags}), 0, starts, l);
  return ir::Binary(b, "stablehlo.subtract",
                    ir::CumReduce(b, marks, ir::ConstantI(b, 0, DType::S64), 0, "stablehlo.add"),
                    I64(b, 1, {l}));
}

// 1 where indices[i] is not padding_idx.
Value Valid(Builder& b, Value idx, int64_t padding_idx) {
  const Dims d = b.type(idx).dims;
  if (padding_idx < 0) return ir::Full(b, ir::ConstantI(b, 1, DType::PRED), d);
  return ir::Compare(b, idx, I64(b, padding_idx, d), ir::Cmp::NE);
}

// ins = (weight [V, D], indices [L], offsets [O][, per_sample_weights [L]]);
// ints = (mode, num_bags, padding_idx, has_psw).
// out = (output [B, D], offset2bag [L], bag_size [O], max_indices).
VS LowerEmbeddingBag(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t mode = a.ints[0], nb = a.ints[1], pad = a.ints[2];
  const ir::TensorType wt = b.type(in[0]);
  const DType ct = ComputeType(wt.dtype);
  const int64_t d = wt.dims[1], l = b.type(in[1]).dims[0], no = b.type(in[2]).dims[0];
  Value idx = ir::Convert(b, in[1], DType::S64);
  Value bag = BagOf(b, in[2], nb, l);
  Value valid = Valid(b, idx, pad);
  Value rows = ir::TakeAlong(b, ir::Convert(b, in[0], ct), 0, idx);  // [L, D]
  Value validld = ir::BroadcastInDim(b, valid, {l, d}, {0});
  Value zero_ld = ir::Full(b, ir::ConstantI(b, 0, ct), {l, d});
  Value count = ir::ScatterAddAlong(b, ir::Convert(b, valid, DType::S64), 0, bag, nb);  // [B]
  Value result, max_idx;
  if (mode == kMax) {
    Value lowest = ir::MinValue(b, ct);
    Value masked = ir::Select(b, validld, rows, ir::Full(b, lowest, {l, d}));
    ir::ScatterDims sd{{1}, {0}, {0}, 1};
    Value m = ir::Scatter(b, ir::Full(b, lowest, {nb, d}), ir::Reshape(b, bag, {l, 1}), masked, sd,
                          "stablehlo.maximum");
    // The first position that attains the max, then its weight row.
    Value at_max = ir::Binary(b, "stablehlo.and", validld,
                              ir::Compare(b, masked, ir::TakeAlong(b, m, 0, bag), ir::Cmp::EQ));
    Value pos = ir::Select(b, at_max, ir::Iota(b, {l, d}, 0, DType::S64), I64(b, l, {l, d}));
    Value first = ir::Scatter(b, I64(b, l, {nb, d}), ir::Reshape(b, bag, {l, 1}), pos, sd,
                              "stablehlo.minimum");
    Value empty = ir::Compare(b, first, I64(b, l, {nb, d}), ir::Cmp::EQ);
    Value safe = ir::Select(b, empty, I64(b, 0, {nb, d}), first);
    Value widx = ir::Take(b, idx, ir::Reshape(b, safe, {nb * d}));
    max_idx = ir::Select(b, empty, I64(b, -1, {nb, d}), ir::Reshape(b, widx, {nb, d}));
    result = ir::Select(b, empty, ir::Full(b, ir::ConstantI(b, 0, ct), {nb, d}), m);
  } else {
    Value contrib = ir::Select(b, validld, rows, zero_ld);
    if (a.ints[3])
      contrib = ir::Binary(b, "stablehlo.multiply", contrib,
                           ir::BroadcastInDim(b, ir::Convert(b, in[3], ct), {l, d}, {0}));
    result = ir::ScatterAddAlong(b, contrib, 0, bag, nb);
    if (mode == kMean) {
      Value c = ir::Convert(b, ir::Binary(b, "stablehlo.maximum", count, I64(b, 1, {nb})), ct);
      result = ir::Binary(b, "stablehlo.divide", result, ir::BroadcastInDim(b, c, {nb, d}, {0}));
    }
    max_idx = I64(b, 0, out[3].dims);
  }
  Value bag_size = count;
  if (no > nb) bag_size = ir::Concatenate(b, {count, I64(b, 0, {no - nb})}, 0);
  return {ir::Convert(b, result, out[0].dtype), bag, bag_size, max_idx};
}
constexpr lazy::Lowering kEmbeddingBag{"aten::_embedding_bag", &LowerEmbeddingBag};

// ins = (grad [B, D], indices [L], offset2bag [L], bag_size [O], max_indices
// [B, D] or [0][, per_sample_weights [L]]); ints = (mode, num_weights,
// padding_idx, scale_grad_by_freq, has_psw); out = [V, D].
VS LowerEmbeddingBagGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t mode = a.ints[0], nw = a.ints[1], pad = a.ints[2];
  const DType ct = ComputeType(out[0].dtype);
  const ir::TensorType gt = b.type(in[0]);
  const int64_t nb = gt.dims[0], d = gt.dims[1], l = b.type(in[1]).dims[0];
  Value g = ir::Convert(b, in[0], ct);
  Value idx = ir::Convert(b, in[1], DType::S64);
  Value r;
  if (mode == kMax) {
    Value mi = ir::Reshape(b, ir::Convert(b, in[4], DType::S64), {nb * d});
    // Empty bags (-1) go out of range and are dropped.
    mi = ir::Select(b, ir::Compare(b, mi, I64(b, 0, {nb * d}), ir::Cmp::LT), I64(b, nw, {nb * d}),
                    mi);
    Value col = ir::Reshape(b, ir::Iota(b, {nb, d}, 1, DType::S64), {nb * d});
    Value flat = ir::Binary(b, "stablehlo.add",
                            ir::Binary(b, "stablehlo.multiply", mi, I64(b, d, {nb * d})), col);
    flat = ir::Select(b, ir::Compare(b, mi, I64(b, nw, {nb * d}), ir::Cmp::EQ),
                      I64(b, nw * d, {nb * d}), flat);
    r = ir::Reshape(b, ir::ScatterAddAlong(b, ir::Reshape(b, g, {nb * d}), 0, flat, nw * d),
                    {nw, d});
  } else {
    Value bag = ir::Convert(b, in[2], DType::S64);
    Value gi = ir::TakeAlong(b, g, 0, bag);  // [L, D]
    if (mode == kMean) {
      Value cnt = ir::Slice(b, ir::Convert(b, in[3], DType::S64), {0}, {nb}, {1});
      cnt = ir::Convert(b, ir::Binary(b, "stablehlo.maximum", cnt, I64(b, 1, {nb})), ct);
      gi = ir::Binary(b, "stablehlo.divide", gi,
                      ir::BroadcastInDim(b, ir::Take(b, cnt, bag), {l, d}, {0}));
    }
    if (a.ints[4])
      gi = ir::Binary(b, "stablehlo.multiply", gi,
                      ir::BroadcastInDim(b, ir::Convert(b, in[5], ct), {l, d}, {0}));
    Value valid = ir::BroadcastInDim(b, Valid(b, idx, pad), {l, d}, {0});
    gi = ir::Select(b, valid, gi, ir::Full(b, ir::ConstantI(b, 0, ct), {l, d}));
    if (a.ints[3]) {  // scale_grad_by_freq: divide by how often each index occurs
      Value freq = ir::ScatterAddAlong(b, ir::Full(b, ir::ConstantI(b, 1, ct), {l}), 0, idx, nw);
      gi = ir::Binary(b, "stablehlo.divide", gi,
                      ir::BroadcastInDim(b, ir::Take(b, freq, idx), {l, d}, {0}));
    }
    r = ir::ScatterAddAlong(b, gi, 0, idx, nw);
  }
  if (pad >= 0) {  // the padding row gets no gradient
    Value row = ir::Compare(b, ir::Iota(b, {nw, d}, 0, DType::S64), I64(b, pad, {nw, d}),
                            ir::Cmp::EQ);
    r = ir::Select(b, row, ir::Full(b, ir::ConstantI(b, 0, ct), {nw, d}), r);
  }
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kEmbeddingBagGrad{"aten::_embedding_bag_backward", &LowerEmbeddingBagGrad};

// ins = (grad [B, D], weight [V, D], indices [L], offset2bag [L]); ints =
// (padding_idx); out = [L]: <grad[bag(i)], weight[indices[i]]>.
VS LowerPswGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ct = ComputeType(out[0].dtype);
  Value idx = ir::Convert(b, in[2], DType::S64);
  Value gi = ir::TakeAlong(b, ir::Convert(b, in[0], ct), 0, ir::Convert(b, in[3], DType::S64));
  Value wi = ir::TakeAlong(b, ir::Convert(b, in[1], ct), 0, idx);
  Value r = ir::Reduce(b, ir::Binary(b, "stablehlo.multiply", gi, wi), ir::ConstantI(b, 0, ct),
                       {1}, "stablehlo.add");
  r = ir::Select(b, Valid(b, idx, a.ints[0]), r, ir::Full(b, ir::ConstantI(b, 0, ct), out[0].dims));
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kPswGrad{"aten::_embedding_bag_per_sample_weights_backward",
                                  &LowerPswGrad};

std::tuple<Tensor, Tensor, Tensor, Tensor> embedding_bag_tpu(
    const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool scale_grad_by_freq,
    int64_t mode, bool sparse, const std::optional<Tensor>& per_sample_weights,
    bool include_last_offset, int64_t padding_idx) {
  const char* op = "_embedding_bag";
  CheckTpu(op, weight, "weight");
  CheckTpu(op, indices, "indices");
  CheckTpu(op, offsets, "offsets");
  const bool has_psw = per_sample_weights.has_value() && per_sample_weights->defined();
  if (has_psw) CheckTpu(op, *per_sample_weights, "per_sample_weights");
  TORCH_CHECK(indices.dim() == 1, "input has to be a 1D or 2D Tensor, but got Tensor of dimension ",
              indices.dim());
  TORCH_CHECK(offsets.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ",
              offsets.dim());
  TORCH_CHECK(weight.dim() == 2, "weight has to be a 2D Tensor, but got Tensor of dimension ",
              weight.dim());
  TORCH_CHECK(mode >= 0 && mode <= 2, op, ": unknown mode ", mode);
  // PyTorch's own checks (dtypes, per_sample_weights) and the result sizes.
  Tensor meta_psw = has_psw ? MetaOf(*per_sample_weights) : Tensor();
  auto meta = at::_embedding_bag(MetaOf(weight), MetaOf(indices), MetaOf(offsets),
                                 scale_grad_by_freq, mode, sparse,
                                 has_psw ? std::optional<Tensor>(meta_psw) : std::nullopt,
                                 include_last_offset, padding_idx);
  const int64_t nb = std::get<0>(meta).size(0);
  CheckIndexRange({"aten::_embedding_bag", false, false,
                   "embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be ",
                   ""},
                  indices, weight.size(0));
  const int64_t d = weight.size(1), l = indices.size(0), no = offsets.size(0);
  std::vector<int64_t> mi_sizes = mode == kMax ? std::vector<int64_t>{nb, d}
                                               : std::vector<int64_t>{0};
  if (nb == 0 || l == 0 || d == 0) {  // nothing gathered: zeros, empty bags
    Tensor o2b = at::zeros({l}, indices.options());
    Tensor bs = at::zeros({no}, indices.options());
    Tensor mi = EmptyTpu(mi_sizes, indices.scalar_type());
    if (mi.numel() > 0) mi.fill_(-1);
    return {at::zeros({nb, d}, weight.options()), o2b, bs, mi};
  }
  std::vector<lazy::Operand> in{OperandOf(weight), OperandOf(indices), OperandOf(offsets)};
  if (has_psw) in.push_back(OperandOf(*per_sample_weights));
  const auto it = indices.scalar_type();
  auto r = Run(kEmbeddingBag, {{mode, nb, padding_idx, has_psw ? 1 : 0}, {}, {}}, in,
               {TypeOf({nb, d}, weight.scalar_type()), TypeOf({l}, it), TypeOf({no}, it),
                TypeOf(mi_sizes, it)});
  return {r[0], r[1], r[2], r[3]};
}

Tensor embedding_bag_backward_tpu(const Tensor& grad, const Tensor& indices, const Tensor& offsets,
                                  const Tensor& offset2bag, const Tensor& bag_size,
                                  const Tensor& maximum_indices, int64_t num_weights,
                                  bool scale_grad_by_freq, int64_t mode, bool sparse,
                                  const std::optional<Tensor>& per_sample_weights,
                                  int64_t padding_idx) {
  const char* op = "_embedding_bag_backward";
  CheckTpu(op, grad, "grad");
  TORCH_CHECK(!sparse, op, ": sparse gradients are not supported on tpu");
  const bool has_psw = per_sample_weights.has_value() && per_sample_weights->defined();
  const int64_t d = grad.size(1);
  if (indices.numel() == 0 || grad.numel() == 0 || num_weights == 0)
    return at::zeros({num_weights, d}, grad.options());
  std::vector<lazy::Operand> in{OperandOf(grad), OperandOf(indices), OperandOf(offset2bag),
                                OperandOf(bag_size), OperandOf(maximum_indices)};
  if (has_psw) in.push_back(OperandOf(*per_sample_weights));
  return Run1(kEmbeddingBagGrad,
              {{mode, num_weights, padding_idx, scale_grad_by_freq ? 1 : 0, has_psw ? 1 : 0}, {}, {}},
              in, TypeOf({num_weights, d}, grad.scalar_type()));
}

Tensor embedding_bag_psw_backward_tpu(const Tensor& grad, const Tensor& weight,
                                      const Tensor& indices, const Tensor& /*offsets*/,
                                      const Tensor& offset2bag, int64_t mode,
                                      int64_t padding_idx) {
  const char* op = "_embedding_bag_per_sample_weights_backward";
  CheckTpu(op, grad, "grad");
  TORCH_CHECK(mode == kSum, "embedding_bag_backward: per_sample_weights only supported for "
              "mode='sum'");
  if (indices.numel() == 0) return EmptyTpu({0}, grad.scalar_type());
  if (grad.numel() == 0) return at::zeros({indices.size(0)}, grad.options());
  return Run1(kPswGrad, {{padding_idx}, {}, {}},
              {OperandOf(grad), OperandOf(weight), OperandOf(indices), OperandOf(offset2bag)},
              TypeOf({indices.size(0)}, grad.scalar_type()));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_embedding_bag", TORCH_FN(embedding_bag_tpu));
  m.impl("_embedding_bag_forward_only", TORCH_FN(embedding_bag_tpu));
  m.impl("_embedding_bag_backward", TORCH_FN(embedding_bag_backward_tpu));
  m.impl("_embedding_bag_per_sample_weights_backward", TORCH_FN(embedding_bag_psw_backward_tpu));
}

}  // namespace tpu::ops
