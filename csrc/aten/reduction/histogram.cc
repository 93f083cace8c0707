// histogram with a bin count or with explicit bin edges.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/div.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/le.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/full.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
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

// ---- histogram with a bin count: bins over [min, max] (or range) ----

// Counts (or weights) of x (1-d) in the bins between consecutive edges, the
// last bin closed on the right; values outside the edges are not counted.
Tensor HistogramOver(const Tensor& x, const Tensor& edges, const std::optional<Tensor>& weight,
                     bool density) {
  const auto dt = edges.scalar_type();
  const int64_t bins = edges.numel() - 1;
  Tensor hist = at::zeros({bins}, TpuOptions(dt));
  if (bins <= 0) return hist;
  if (x.numel() == 0) {
    if (density) hist = at::div(hist, at::sum(hist));  // 0 / 0, as on CPU
    return hist;
  }
  Tensor pos = at::sub(at::searchsorted(edges, x, false, true), 1);
  Tensor last = at::eq(x, edges.select(0, bins));
  pos = at::where(last, at::full({}, bins - 1, TpuOptions(at::kLong)), pos);
  Tensor valid = at::logical_and(at::ge(x, edges.select(0, 0)), at::le(x, edges.select(0, bins)));
  const bool has_w = weight.has_value() && weight->defined();
  Tensor w = has_w ? weight->reshape({-1}).to(dt) : at::ones({x.numel()}, TpuOptions(dt));
  w = at::where(valid, w, at::zeros({}, TpuOptions(dt)));
  pos = at::clamp(pos, 0, bins - 1);
  hist = hist.index_add(0, pos, w);
  if (density) {
    Tensor widths = at::sub(edges.narrow(0, 1, bins), edges.narrow(0, 0, bins));
    hist = at::div(hist, at::mul(at::sum(hist), widths));
  }
  return hist;
}

std::tuple<Tensor, Tensor> histogram_bin_ct_tpu(const Tensor& self, int64_t bins,
                                                 std::optional<at::ArrayRef<double>> range,
                                                 const std::optional<Tensor>& weight, bool density) {
  CheckTpu("histogram", self, "self");
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "torch.histogram: input tensor and bins "
              "tensors should have the same dtype");
  const bool has_w = weight.has_value() && weight->defined();
  if (has_w)
    TORCH_CHECK(weight->sizes() == self.sizes(), "torch.histogram(): if weight tensor is provided "
                "it should have the same shape as the input tensor excluding its innermost "
                "dimension");
  const auto dt = self.scalar_type();
  Tensor x = self.reshape({-1});
  double lo = 0, hi = 0;
  if (range.has_value()) {
    TORCH_CHECK(range->size() == 2, "torch.histogram(): range should have 2 elements");
    lo = (*range)[0];
    hi = (*range)[1];
  } else if (x.numel() > 0) {
    auto [mn, mx] = at::aminmax(x);
    lo = mn.item<double>();
    hi = mx.item<double>();
  } else {
    hi = 1;  // CPU's edges for an empty input
  }
  TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histogram(): range of [", lo, ", ", hi,
              "] is not finite");
  TORCH_CHECK(lo <= hi, "torch.histogram(): min should not exceed max, but got min ", lo, " max ", hi);
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  Tensor edges = at::linspace(lo, hi, bins + 1, TpuOptions(dt));
  return {HistogramOver(x, edges, weight, density), edges};
}
std::tuple<Tensor&, Tensor&> histogram_bin_ct_out_tpu(const Tensor& self, int64_t bins,
                                                      std::optional<at::ArrayRef<double>> range,
                                                      const std::optional<Tensor>& weight,
                                                      bool density, Tensor& hist, Tensor& edges) {
  auto [h, e] = histogram_bin_ct_tpu(self, bins, range, weight, density);
  CopyInto("histogram", h, hist);
  CopyInto("histogram", e, edges);
  return {hist, edges};
}

std::tuple<Tensor, Tensor> histogram_bins_tensor_tpu(const Tensor& self, const Tensor& bins,
                                                      const std::optional<Tensor>& weight, bool density) {
  CheckTpu("histogram", self, "self");
  CheckTpu("histogram", bins, "bins");
  TORCH_CHECK(bins.dim() == 1, "torch.histogram(): bins tensor should have one dimension, but got ",
              bins.dim(), " dimensions in the bin tensor");
  TORCH_CHECK(bins.numel() > 0, "torch.histogram(): bins tensor should have at least 1 element, "
              "but got ", bins.numel(), " elements");
  TORCH_CHECK(self.scalar_type() == bins.scalar_type(), "torch.histogram: input tensor and bins "
              "tensors should have the same dtype, but got input ", self.scalar_type(),
              " and bins ", bins.scalar_type());
  Tensor edges = bins.clone();
  return {HistogramOver(self.reshape({-1}), edges, weight, density), edges};
}
std::tuple<Tensor&, Tensor&> histogram_bins_tensor_out_tpu(const Tensor& self, const Tensor& bins,
                                                           const std::optional<Tensor>& weight,
                                                           bool density, Tensor& hist, Tensor& edges) {
  auto [h, e] = histogram_bins_tensor_tpu(self, bins, weight, density);
  CopyInto("histogram", h, hist);
  CopyInto("histogram", e, edges);
  return {hist, edges};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histogram.bin_ct", TORCH_FN(histogram_bin_ct_tpu));
  m.impl("histogram.bins_tensor", TORCH_FN(histogram_bins_tensor_tpu));
  m.impl("histogram.bins_tensor_out", TORCH_FN(histogram_bins_tensor_out_tpu));
  m.impl("histogram.bin_ct_out", TORCH_FN(histogram_bin_ct_out_tpu));
}

}  // namespace tpu::ops
