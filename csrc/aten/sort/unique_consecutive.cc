// _unique2 and unique_consecutive: a sort, then the first element of each
// run marked.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
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

// ---- unique: sort, then mark the first element of each run ----

// ins = (x [n]); ints = (sort); out = (count s64 0-d). Runs of equal values
// (each NaN its own run) in the sorted (or given) order.
Value RunStarts(Builder& b, Value v) {
  const int64_t n = b.type(v).dims[0];
  Value prev = ir::Slice(b, v, {0}, {n - 1}, {1});
  Value cur = ir::Slice(b, v, {1}, {n}, {1});
  Value differs = ir::Compare(b, cur, prev, ir::Cmp::NE);
  if (b.type(v).dtype == DType::PRED) differs = ir::Binary(b, "stablehlo.xor", cur, prev);
  return ir::Concatenate(b, {ir::Full(b, ir::ConstantI(b, 1, DType::PRED), {1}), differs}, 0);
}

std::vector<Value> SortedWithIndex(Builder& b, Value x, bool sort) {
  const int64_t n = b.type(x).dims[0];
  Value idx = ir::Iota(b, {n}, 0, DType::S64);
  if (!sort) return {x, idx};
  const bool is_float = ir::IsFloat(b.type(x).dtype);
  return ir::Sort(b, {x, idx}, 0, true, [is_float](Builder& rb, const VS& v) {
    Value lt = ir::Compare(rb, v[0], v[1], ir::Cmp::LT);
    if (!is_float) return VS{lt};
    Value an = ir::Compare(rb, v[0], v[0], ir::Cmp::NE);
    Value bn = ir::Compare(rb, v[1], v[1], ir::Cmp::NE);
    return VS{ir::Binary(rb, "stablehlo.or", lt,
                         ir::Binary(rb, "stablehlo.and", bn, ir::Unary(rb, "stablehlo.not", an)))};
  });
}

VS LowerUniqueCount(Builder& b, const VS& in, const lazy::Attrs& a, const TT&) {
  auto sorted = SortedWithIndex(b, in[0], a.ints[0] != 0);
  Value starts = ir::Convert(b, RunStarts(b, sorted[0]), DType::S64);
  return {ir::Reduce(b, starts, ir::ConstantI(b, 0, DType::S64), {0}, "stablehlo.add")};
}
constexpr lazy::Lowering kUniqueCount{"aten::_unique2.count", &LowerUniqueCount};

// ins = (x [n]); ints = (sort); out = (values [u], inverse [n], counts [u]).
VS LowerUnique(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t n = b.type(in[0]).dims[0], u = out[0].dims[0];
  auto sorted = SortedWithIndex(b, in[0], a.ints[0] != 0);
  Value starts = RunStarts(b, sorted[0]);
  Value group = ir::Binary(b, "stablehlo.subtract",
                           ir::CumReduce(b, ir::Convert(b, starts, DType::S64),
                                         ir::ConstantI(b, 0, DType::S64), 0, "stablehlo.add"),
                           ir::Full(b, ir::ConstantI(b, 1, DType::S64), {n}));
  // The value of each group goes to its slot (from the run's first element).
  Value slot = ir::Select(b, starts, group, ir::Full(b, ir::ConstantI(b, u, DType::S64), {n}));
  Value values = ir::Put(b, ir::Full(b, ir::ConstantI(b, 0, out[0].dtype), {u}), slot, sorted[0]);
  Value inverse = ir::Put(b, ir::Full(b, ir::ConstantI(b, 0, DType::S64), {n}), sorted[1], group);
  Value counts = ir::ScatterAddAlong(b, ir::Full(b, ir::ConstantI(b, 1, DType::S64), {n}), 0, group, u);
  return {values, inverse, counts};
}
constexpr lazy::Lowering kUnique{"aten::_unique2", &LowerUnique};

std::tuple<Tensor, Tensor, Tensor> Unique(const char* op, const Tensor& self, bool sort,
                                          bool return_inverse, bool return_counts) {
  CheckTpu(op, self, "self");
  if (self.numel() == 0) {
    return {EmptyTpu({0}, self.scalar_type()),
            EmptyTpu(return_inverse ? self.sizes() : at::IntArrayRef{0}, at::kLong),
            EmptyTpu({0}, at::kLong)};
  }
  Tensor flat = self.reshape({-1});
  const int64_t n = flat.numel();
  const int64_t u = Run1(kUniqueCount, {{sort ? 1 : 0}, {}, {}}, {OperandOf(flat)},
                         TypeOf({}, at::kLong)).item<int64_t>();
  auto r = Run(kUnique, {{sort ? 1 : 0}, {}, {}}, {OperandOf(flat)},
               {TypeOf({u}, self.scalar_type()), TypeOf({n}, at::kLong), TypeOf({u}, at::kLong)});
  Tensor inverse = return_inverse ? r[1].reshape(self.sizes()) : EmptyTpu({0}, at::kLong);
  Tensor counts = return_counts ? r[2] : EmptyTpu({0}, at::kLong);
  return {r[0], inverse, counts};
}
std::tuple<Tensor, Tensor, Tensor> unique2_tpu(const Tensor& self, bool sorted,
                                               bool return_inverse, bool return_counts) {
  // Sorted either way: the values come out in ascending order (as CPU's
  // sort-based path does).
  (void)sorted;
  return Unique("_unique2", self, true, return_inverse, return_counts);
}
// Runs of equal slices along dim 0 of x [n, rest]: starts [n] (PRED).
Value SliceRunStarts(Builder& b, Value x) {
  const ir::Dims d = b.type(x).dims;
  const int64_t n = d[0], rest = d[1];
  Value prev = ir::Slice(b, x, {0, 0}, {n - 1, rest}, {1, 1});
  Value cur = ir::Slice(b, x, {1, 0}, {n, rest}, {1, 1});
  Value ne = b.type(x).dtype == DType::PRED ? ir::Binary(b, "stablehlo.xor", cur, prev)
                                            : ir::Compare(b, cur, prev, ir::Cmp::NE);
  Value differs = ir::Reduce(b, ne, ir::ConstantI(b, 0, DType::PRED), {1}, "stablehlo.or");
  return ir::Concatenate(b, {ir::Full(b, ir::ConstantI(b, 1, DType::PRED), {1}), differs}, 0);
}
VS LowerUniqueSlicesCount(Builder& b, const VS& in, const lazy::Attrs&, const TT&) {
  Value starts = ir::Convert(b, SliceRunStarts(b, in[0]), DType::S64);
  return {ir::Reduce(b, starts, ir::ConstantI(b, 0, DType::S64), {0}, "stablehlo.add")};
}
constexpr lazy::Lowering kUniqueSlicesCount{"aten::unique_consecutive.dim_count",
                                            &LowerUniqueSlicesCount};
// ins = (x [n, rest]); out = (values [u, rest], inverse [n], counts [u]).
VS LowerUniqueSlices(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::Dims d = b.type(in[0]).dims;
  const int64_t n = d[0], rest = d[1], u = out[0].dims[0];
  Value starts = SliceRunStarts(b, in[0]);
  Value group = ir::Binary(b, "stablehlo.subtract",
                           ir::CumReduce(b, ir::Convert(b, starts, DType::S64),
                                         ir::ConstantI(b, 0, DType::S64), 0, "stablehlo.add"),
                           ir::Full(b, ir::ConstantI(b, 1, DType::S64), {n}));
  Value slot = ir::Select(b, starts, group, ir::Full(b, ir::ConstantI(b, u, DType::S64), {n}));
  ir::ScatterDims sd{{1}, {0}, {0}, 1};
  Value values = ir::Scatter(b, ir::Full(b, ir::ConstantI(b, 0, out[0].dtype), {u, rest}),
                             ir::Reshape(b, slot, {n, 1}), in[0], sd, "");
  Value counts = ir::ScatterAddAlong(b, ir::Full(b, ir::ConstantI(b, 1, DType::S64), {n}), 0, group, u);
  return {values, group, counts};
}
constexpr lazy::Lowering kUniqueSlices{"aten::unique_consecutive.dim", &LowerUniqueSlices};

std::tuple<Tensor, Tensor, Tensor> unique_consecutive_tpu(const Tensor& self, bool return_inverse,
                                                          bool return_counts,
                                                          std::optional<int64_t> dim) {
  if (!dim.has_value() || self.dim() <= 1)
    return Unique("unique_consecutive", self, false, return_inverse, return_counts);
  CheckTpu("unique_consecutive", self, "self");
  const int64_t d = at::maybe_wrap_dim(*dim, self.dim());
  const int64_t n = self.size(d);
  if (self.numel() == 0) return {self.clone(), EmptyTpu({n}, at::kLong), EmptyTpu({0}, at::kLong)};
  Tensor moved = self.movedim(d, 0).contiguous();
  Tensor x = moved.reshape({n, -1});
  const int64_t u = Run1(kUniqueSlicesCount, {}, {OperandOf(x)}, TypeOf({}, at::kLong)).item<int64_t>();
  auto r = Run(kUniqueSlices, {}, {OperandOf(x)},
               {TypeOf({u, x.size(1)}, self.scalar_type()), TypeOf({n}, at::kLong),
                TypeOf({u}, at::kLong)});
  std::vector<int64_t> vs = moved.sizes().vec();
  vs[0] = u;
  Tensor values = r[0].reshape(vs).movedim(0, d).contiguous();
  return {values, return_inverse ? r[1] : EmptyTpu({0}, at::kLong),
          return_counts ? r[2] : EmptyTpu({0}, at::kLong)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_unique2", TORCH_FN(unique2_tpu));
  m.impl("unique_consecutive", TORCH_FN(unique_consecutive_tpu));
}

}  // namespace tpu::ops
