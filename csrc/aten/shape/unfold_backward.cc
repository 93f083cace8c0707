// unfold_backward: the windows of Tensor.unfold added back at their positions.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/add.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/index_add.h>
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

// ---- unfold_backward: the windows added back at their positions ----

Tensor unfold_backward_tpu(const Tensor& grad, c10::SymIntArrayRef input_sizes, int64_t dim,
                           int64_t size, int64_t step) {
  TORCH_CHECK_VALUE(step > 0, "step is ", step, " but must be > 0");
  TORCH_CHECK(size >= 0, "size is ", size, " but must be >= 0");
  std::vector<int64_t> in_sizes;
  for (const auto& s : input_sizes) in_sizes.push_back(s.expect_int());
  const int64_t nd = static_cast<int64_t>(in_sizes.size());
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(nd, 1));
  Tensor zeros = at::zeros(in_sizes, TpuOptions(grad.scalar_type()));
  if (grad.numel() == 0) return zeros;
  if (nd == 0) return grad.reshape({});
  const int64_t n = grad.size(d);
  // grad: (..., n, ..., size) -> (..., n * size, ...) with window k's
  // element j at position k * step + j.
  Tensor g = grad.movedim(-1, d + 1);
  std::vector<int64_t> flat = g.sizes().vec();
  flat[d] = n * size;
  flat.erase(flat.begin() + d + 1);
  g = g.reshape(flat);
  Tensor idx = at::add(at::arange(n, TpuOptions(at::kLong)).mul(step).unsqueeze(1),
                       at::arange(size, TpuOptions(at::kLong)).unsqueeze(0))
                   .reshape({-1});
  return at::index_add(zeros, d, idx, g);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("unfold_backward", TORCH_FN(unfold_backward_tpu));
}

}  // namespace tpu::ops
