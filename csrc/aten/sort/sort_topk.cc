// sort (stable or not, NaN last as on CPU) and topk.
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/kernel_helpers.h"

namespace tpu::ops {

namespace {

// ---- sort, topk ----

// Ascending order with NaN last (descending: NaN first), as CPU sorts.
Value SortLess(Builder& b, Value x, Value y, bool descending) {
  Value lt = ir::Compare(b, x, y, descending ? ir::Cmp::GT : ir::Cmp::LT);
  if (!ir::IsFloat(b.type(x).dtype)) return lt;
  Value x_nan = ir::Compare(b, x, x, ir::Cmp::NE);
  Value y_nan = ir::Compare(b, y, y, ir::Cmp::NE);
  Value first_nan = descending ? x_nan : y_nan;
  Value other_not_nan = ir::Unary(b, "stablehlo.not", descending ? y_nan : x_nan);
  return ir::Binary(b, "stablehlo.or", ir::Binary(b, "stablehlo.and", first_nan, other_not_nan),
                    lt);
}

// ints = (dim, descending, k); outputs (values, indices), the first k
// along dim. The sort is stable, so ties keep their original order.
VS LowerSort(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t dim = a.ints[0], k = a.ints[2];
  const bool desc = a.ints[1] != 0;
  const ir::TensorType t = b.type(in[0]);
  Value idx = ir::Iota(b, t.dims, dim, DType::S64);
  VS r = ir::Sort(b, {in[0], idx}, dim, true, [desc](Builder& rb, const VS& s) {
    return VS{SortLess(rb, s[0], s[1], desc)};
  });
  if (k < t.dims[dim]) {
    ir::Dims start(t.rank(), 0), limit = t.dims, strides(t.rank(), 1);
    limit[dim] = k;
    r[0] = ir::Slice(b, r[0], start, limit, strides);
    r[1] = ir::Slice(b, r[1], start, limit, strides);
  }
  return {ir::Reshape(b, r[0], out[0].dims), ir::Reshape(b, r[1], out[1].dims)};
}
constexpr lazy::Lowering kSort{"aten::sort", &LowerSort};

std::vector<Tensor> SortRun(const char* name, const Tensor& self, int64_t dim, bool desc,
                            std::optional<int64_t> k, Tensor* values, Tensor* indices) {
  CheckTpu(name, self, "self");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  std::vector<int64_t> sizes = self.sizes().vec();
  const int64_t n = self.dim() == 0 ? 1 : self.size(d);
  const int64_t kk = k.value_or(n);
  if (self.dim() > 0) sizes[d] = kk;
  const TT types{TypeOf(sizes, self.scalar_type()), TypeOf(sizes, at::kLong)};
  const lazy::Attrs attrs{{self.dim() == 0 ? 0 : d, desc, kk}, {}, {}};
  bool empty = self.numel() == 0 || kk == 0;
  if (values) {
    PrepareOut(name, *values, sizes, self.scalar_type());
    PrepareOut(name, *indices, sizes, at::kLong);
    if (!empty) RunInto(kSort, attrs, {OperandOf(x)}, types, {*values, *indices});
    return {*values, *indices};
  }
  if (empty) return {EmptyTpu(sizes, self.scalar_type()), EmptyTpu(sizes, at::kLong)};
  return Run(kSort, attrs, {OperandOf(x)}, types);
}

std::tuple<Tensor, Tensor> sort_stable(const Tensor& self, std::optional<bool>, int64_t dim,
                                       bool descending) {
  auto r = SortRun("sort", self, dim, descending, std::nullopt, nullptr, nullptr);
  return {r[0], r[1]};
}
std::tuple<Tensor&, Tensor&> sort_values_stable(const Tensor& self, std::optional<bool>,
                                                int64_t dim, bool descending, Tensor& v,
                                                Tensor& i) {
  SortRun("sort", self, dim, descending, std::nullopt, &v, &i);
  return {v, i};
}

void CheckTopk(const Tensor& self, int64_t k, int64_t dim) {
  const int64_t d = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  TORCH_CHECK(k >= 0 && k <= (self.dim() > 0 ? self.size(d) : 1), "selected index k out of range");
}

// topk returns its k elements in sorted order whatever `sorted` says (any
// order is allowed when it is false).
std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim, bool largest, bool) {
  CheckTopk(self, k, dim);
  auto r = SortRun("topk", self, dim, largest, k, nullptr, nullptr);
  return {r[0], r[1]};
}
std::tuple<Tensor&, Tensor&> topk_values(const Tensor& self, int64_t k, int64_t dim, bool largest,
                                         bool, Tensor& v, Tensor& i) {
  CheckTopk(self, k, dim);
  SortRun("topk", self, dim, largest, k, &v, &i);
  return {v, i};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sort.stable", TORCH_FN(sort_stable));
  m.impl("sort.values_stable", TORCH_FN(sort_values_stable));
  m.impl("topk", TORCH_FN(topk));
  m.impl("topk.values", TORCH_FN(topk_values));
}

}  // namespace tpu::ops
