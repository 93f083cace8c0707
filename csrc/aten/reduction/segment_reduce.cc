// segment_reduce (sum, mean, max, min, prod) with lengths or offsets, and
// its backward.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/div.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/scatter_reduce.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/complex.h"
#include "aten/kernel_helpers.h"
#include "aten/indexing/index_checks.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

namespace {

// ---- segment_reduce along `axis` with 1-d lengths or offsets: each
// segment folded from `initial` (default: the reduction's identity; mean:
// (initial + sum) / length, NaN for an empty segment without initial) ----

struct Segments {
  Tensor lengths;  // (S) int64
  Tensor idx;      // data-shaped segment id along axis (S for elements past the last segment)
  int64_t S = 0, axis = 0;
};
Segments SegmentsOf(const Tensor& data, const std::optional<Tensor>& lengths,
                    const std::optional<Tensor>& offsets, int64_t axis) {
  Segments g;
  g.axis = at::maybe_wrap_dim(axis, data.dim());
  // lengths (or offsets) are (data.shape[:axis], S): one row of segments
  // per leading index (or 1-d, shared).
  if (lengths.has_value() && lengths->defined()) {
    g.lengths = lengths->to(at::kLong);
  } else {
    TORCH_CHECK(offsets.has_value() && offsets->defined(), "segment_reduce(): Either lengths or "
                "offsets must be defined");
    Tensor o = offsets->to(at::kLong);
    const int64_t k = o.size(-1);
    g.lengths = at::sub(o.narrow(-1, 1, k - 1), o.narrow(-1, 0, k - 1));
  }
  TORCH_CHECK(g.lengths.dim() == 1 || g.lengths.dim() == g.axis + 1,
              "segment_reduce(): Expected lengths/offsets to have ", g.axis + 1, " dimensions");
  g.S = g.lengths.size(-1);
  const int64_t n = data.size(g.axis);
  std::vector<int64_t> lead(g.lengths.sizes().begin(), g.lengths.sizes().end() - 1);
  Tensor ends = at::cumsum(g.lengths, -1);
  std::vector<int64_t> pos_shape = lead;
  pos_shape.push_back(n);
  Tensor pos = at::arange(n, TpuOptions(at::kLong)).expand(pos_shape).contiguous();
  Tensor ids = at::searchsorted(ends.contiguous(), pos, false, true);  // (lead..., n)
  std::vector<int64_t> view(data.dim(), 1);
  for (size_t i = 0; i < lead.size(); ++i) view[i] = lead[i];
  view[g.axis] = n;
  g.idx = ids.reshape(view).expand(data.sizes());
  return g;
}
double SegmentInit(c10::string_view reduce, const std::optional<c10::Scalar>& initial) {
  if (initial.has_value()) return initial->toDouble();
  if (reduce == "max") return -INFINITY;
  if (reduce == "min") return INFINITY;
  if (reduce == "prod") return 1;
  return 0;
}
std::vector<int64_t> WithAxis(const Tensor& data, int64_t axis, int64_t size) {
  auto v = data.sizes().vec();
  v[axis] = size;
  return v;
}
Tensor LengthsAlong(const Segments& g, const Tensor& like) {  // lengths shaped to broadcast with the output
  std::vector<int64_t> view(like.dim(), 1);
  for (int64_t i = 0; i + 1 < g.lengths.dim(); ++i) view[i] = g.lengths.size(i);
  view[g.axis] = g.S;
  return g.lengths.reshape(view);
}

Tensor segment_reduce_tpu(const Tensor& data, c10::string_view reduce, const std::optional<Tensor>& lengths,
                          const std::optional<Tensor>& indices, const std::optional<Tensor>& offsets,
                          int64_t axis, bool unsafe, const std::optional<c10::Scalar>& initial) {
  (void)indices;
  (void)unsafe;
  CheckTpu("segment_reduce", data, "data");
  TORCH_CHECK(reduce == "max" || reduce == "min" || reduce == "sum" || reduce == "mean" ||
              reduce == "prod", "segment_reduce: unsupported reduction ", reduce);
  Segments g = SegmentsOf(data, lengths, offsets, axis);
  const auto dt = data.scalar_type();
  // one extra segment collects what lies past the last one
  Tensor out = at::full(WithAxis(data, g.axis, g.S + 1), SegmentInit(reduce, initial), TpuOptions(dt));
  const char* how = reduce == "max" ? "amax" : reduce == "min" ? "amin" : reduce == "prod" ? "prod" : "sum";
  if (data.numel() > 0) out = at::scatter_reduce(out, g.axis, g.idx, data, how, /*include_self=*/true);
  out = out.narrow(g.axis, 0, g.S);
  if (reduce == "mean") {
    Tensor len = LengthsAlong(g, out);
    Tensor mean = at::div(out, at::clamp_min(len, 1).to(dt));
    Tensor empty = initial.has_value() ? out : at::full({}, NAN, TpuOptions(dt));
    out = at::where(at::gt(len, 0), mean, empty);
  }
  return out.contiguous();
}

Tensor segment_reduce_backward_tpu(const Tensor& grad, const Tensor& output, const Tensor& data,
                                   c10::string_view reduce, const std::optional<Tensor>& lengths,
                                   const std::optional<Tensor>& offsets, int64_t axis,
                                   const std::optional<c10::Scalar>& initial) {
  Segments g = SegmentsOf(data, lengths, offsets, axis);
  const auto dt = data.scalar_type();
  auto pad = [&](const Tensor& t) {  // (S) -> (S + 1) along axis with a zero segment
    return at::cat({t, at::zeros(WithAxis(data, g.axis, 1), TpuOptions(t.scalar_type()))}, g.axis);
  };
  Tensor gi = pad(grad).gather(g.axis, g.idx);
  if (reduce == "sum") return gi;
  if (reduce == "mean") {
    Tensor len = pad(LengthsAlong(g, grad).expand(grad.sizes()).to(dt)).gather(g.axis, g.idx);
    return at::div(gi, at::clamp_min(len, 1));
  }
  Tensor oi = pad(output).gather(g.axis, g.idx);
  if (reduce == "max" || reduce == "min") {
    Tensor hit = at::eq(data, oi).to(dt);
    Tensor cnt = at::zeros(WithAxis(data, g.axis, g.S + 1), TpuOptions(dt)).scatter_add(g.axis, g.idx, hit);
    Tensor ci = cnt.gather(g.axis, g.idx);
    return at::where(at::gt(hit, 0), at::div(gi, at::clamp_min(ci, 1)), at::zeros({}, TpuOptions(dt)));
  }
  // prod: output / x where x != 0; with one zero in the segment, the
  // product of the others at that zero; with more, 0.
  Tensor zero = at::eq(data, 0);
  Tensor nz = at::where(zero, at::ones({}, TpuOptions(dt)), data);
  Tensor zc = at::zeros(WithAxis(data, g.axis, g.S + 1), TpuOptions(dt)).scatter_add(g.axis, g.idx, zero.to(dt));
  Tensor prod_nz = at::full(WithAxis(data, g.axis, g.S + 1), SegmentInit(reduce, initial), TpuOptions(dt))
                       .scatter_reduce(g.axis, g.idx, nz, "prod", true);
  Tensor zi = zc.gather(g.axis, g.idx), pi = prod_nz.gather(g.axis, g.idx);
  Tensor at_nonzero = at::div(at::mul(gi, oi), nz);
  Tensor at_zero = at::where(at::eq(zi, 1), at::mul(gi, pi), at::zeros({}, TpuOptions(dt)));
  return at::where(zero, at_zero, at_nonzero);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("segment_reduce", TORCH_FN(segment_reduce_tpu));
  m.impl("_segment_reduce_backward", TORCH_FN(segment_reduce_backward_tpu));
}

}  // namespace tpu::ops
