// unique: _unique through _unique2, and unique along a dim (rows sorted
// lexicographically, then unique_consecutive).
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_unique2.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/unique_consecutive.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
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

// ---- _unique ----

std::tuple<Tensor, Tensor> unique_tpu(const Tensor& self, bool sorted, bool return_inverse) {
  auto r = at::_unique2(self, sorted, return_inverse, false);
  return {std::get<0>(r), std::get<1>(r)};
}

// ---- unique along a dim: rows sorted lexicographically (stable sorts by
// each column, last first), then unique_consecutive ----

std::tuple<Tensor, Tensor, Tensor> unique_dim_tpu(const Tensor& self, int64_t dim, bool sorted,
                                                  bool return_inverse, bool return_counts) {
  (void)sorted;  // always sorted, as on CPU
  CheckTpu("unique_dim", self, "self");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  Tensor x = self.movedim(d, 0);
  const int64_t n = x.size(0);
  Tensor empty_l = at::empty({0}, TpuOptions(at::kLong));
  if (n == 0 || self.numel() == 0) {
    TORCH_CHECK(n == 0 || self.numel() > 0, "Number of zero sized dimensions is more than one, so "
                "unique cannot be applied ");
    return {self.clone(), return_inverse ? at::zeros({n}, TpuOptions(at::kLong)) : empty_l,
            return_counts ? at::zeros({n}, TpuOptions(at::kLong)) : empty_l};
  }
  Tensor x2 = x.reshape({n, -1});
  Tensor perm = at::arange(n, TpuOptions(at::kLong));
  for (int64_t c = x2.size(1) - 1; c >= 0; --c) {
    Tensor key = x2.index_select(0, perm).select(1, c);
    Tensor p = std::get<1>(at::sort(key, std::optional<bool>(true), 0, false));
    perm = perm.index_select(0, p);
  }
  auto [u, inv_sorted, counts] =
      at::unique_consecutive(x.index_select(0, perm), /*return_inverse=*/true, return_counts, 0);
  Tensor inverse = at::zeros({n}, TpuOptions(at::kLong)).scatter(0, perm, inv_sorted);
  return {u.movedim(0, d), return_inverse ? inverse : empty_l, return_counts ? counts : empty_l};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_unique", TORCH_FN(unique_tpu));
  m.impl("unique_dim", TORCH_FN(unique_dim_tpu));
}

}  // namespace tpu::ops
