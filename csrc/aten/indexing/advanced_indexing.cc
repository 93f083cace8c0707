// Advanced indexing (self[indices], self[indices] = values), masked_select,
// masked_scatter_ and nonzero.
#include <ATen/MemoryOverlap.h>
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/add.h>
#include <ATen/ops/sum.h>
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

// ---- advanced indexing: self[indices] and self[indices] = values ----

// The indices of one advanced-indexing op, prepared on the host.
struct IndexPlan {
  std::vector<int64_t> dims;     // indexed dims of self, in order
  std::vector<Tensor> indices;   // integer tensors on tpu, one per entry of dims
  std::vector<int64_t> bshape;   // broadcast shape of the indices
  std::vector<int64_t> perm;     // self dims: indexed first, then the rest
  std::vector<int64_t> out_perm; // from [bshape, rest] to the result's layout
  std::vector<int64_t> sizes;    // result sizes
};

IndexPlan PlanIndex(const char* op, const Tensor& self,
                    const c10::List<std::optional<Tensor>>& indices) {
  IndexPlan p;
  int64_t specified = 0;
  for (const std::optional<Tensor>& t : indices) {
    if (!t.has_value() || !t->defined()) { ++specified; continue; }
    const auto st = t->scalar_type();
    TORCH_CHECK_INDEX(st == at::kLong || st == at::kInt || st == at::kByte || st == at::kBool,
                      "tensors used as indices must be long, int, byte or bool tensors");
    specified += (st == at::kByte || st == at::kBool) ? t->dim() : 1;
  }
  TORCH_CHECK_INDEX(specified <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", specified, ")");
  int64_t d = 0;
  for (const std::optional<Tensor>& t : indices) {
    if (!t.has_value() || !t->defined()) { ++d; continue; }
    const auto st = t->scalar_type();
    if (st == at::kByte) {
      TORCH_WARN("indexing with dtype torch.uint8 is now deprecated,"
                 " please use a dtype torch.bool instead.");
    }
    if (st == at::kByte || st == at::kBool) {
      // A mask selects a data-dependent number of elements: its positions
      // are computed on the host (this syncs with the device).
      Tensor mask = t->to(at::kCPU, at::kBool);
      for (int64_t j = 0; j < mask.dim(); ++j)
        TORCH_CHECK_INDEX(mask.size(j) == self.size(d + j), "The shape of the mask ",
                          mask.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(),
                          " at index ", d + j);
      Tensor nz = mask.nonzero();
      for (int64_t j = 0; j < mask.dim(); ++j) {
        p.dims.push_back(d + j);
        p.indices.push_back(nz.select(1, j).to(kTpu));
      }
      d += mask.dim();
    } else {
      // Every index is out of range of an empty dimension (CPU's message).
      TORCH_CHECK_INDEX(t->numel() == 0 || self.size(d) > 0,
                        "index is out of bounds for dimension with size 0");
      CheckIndexRange(OutOfBoundsRule(op, true, true, d, self.size(d)), *t, self.size(d));
      p.dims.push_back(d);
      p.indices.push_back(OnTpu(*t));
      ++d;
    }
  }
  std::vector<int64_t> bshape;
  bool broadcastable = true;
  for (const Tensor& t : p.indices) {
    const at::IntArrayRef s = t.sizes();
    const size_t n = std::max(bshape.size(), s.size());
    std::vector<int64_t> r(n);
    for (size_t i = 0; i < n && broadcastable; ++i) {
      const int64_t a = i < n - bshape.size() ? 1 : bshape[i - (n - bshape.size())];
      const int64_t c = i < n - s.size() ? 1 : s[i - (n - s.size())];
      broadcastable = a == c || a == 1 || c == 1;
      r[i] = a == 1 ? c : a;
    }
    if (!broadcastable) break;
    bshape = std::move(r);
  }
  if (!broadcastable) {
    std::ostringstream shapes;
    for (size_t i = 0; i < p.indices.size(); ++i)
      shapes << (i ? ", " : "") << p.indices[i].sizes();
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together "
                      "with shapes ", shapes.str());
  }
  p.bshape = bshape;
  bool adjacent = true;
  for (size_t i = 1; i < p.dims.size(); ++i) adjacent &= p.dims[i] == p.dims[i - 1] + 1;
  std::vector<bool> indexed(self.dim(), false);
  for (int64_t x : p.dims) indexed[x] = true;
  p.perm = p.dims;
  std::vector<int64_t> rest;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (!indexed[i]) {
      p.perm.push_back(i);
      rest.push_back(i);
    }
  const int64_t nb = static_cast<int64_t>(bshape.size());
  const int64_t first = adjacent && !p.dims.empty() ? p.dims[0] : 0;
  // Result layout: rest dims before `first`, then the broadcast dims, then
  // the remaining rest dims (first == 0 when the indexed dims are apart).
  for (int64_t i = 0; i < static_cast<int64_t>(rest.size()); ++i)
    if (rest[i] < first) {
      p.out_perm.push_back(nb + i);
      p.sizes.push_back(self.size(rest[i]));
    }
  for (int64_t i = 0; i < nb; ++i) {
    p.out_perm.push_back(i);
    p.sizes.push_back(bshape[i]);
  }
  for (int64_t i = 0; i < static_cast<int64_t>(rest.size()); ++i)
    if (rest[i] >= first) {
      p.out_perm.push_back(nb + i);
      p.sizes.push_back(self.size(rest[i]));
    }
  return p;
}

// Attrs: ints = (k, nb, perm..., out_perm..., bshape...).
lazy::Attrs IndexAttrs(const IndexPlan& p, int64_t extra) {
  lazy::Attrs a;
  a.ints = {static_cast<int64_t>(p.dims.size()), static_cast<int64_t>(p.bshape.size()), extra};
  a.ints.insert(a.ints.end(), p.perm.begin(), p.perm.end());
  a.ints.insert(a.ints.end(), p.out_perm.begin(), p.out_perm.end());
  a.ints.insert(a.ints.end(), p.bshape.begin(), p.bshape.end());
  return a;
}

struct IndexIr {
  int64_t k, nb, extra;
  ir::Dims perm, out_perm, bshape;
  Value xt;   // self transposed: indexed dims first
  Value idx;  // [bshape..., k] s64
  ir::Dims rest_sizes;
};

IndexIr IndexCommon(Builder& b, const VS& in, const lazy::Attrs& a) {
  IndexIr r;
  r.k = a.ints[0];
  r.nb = a.ints[1];
  r.extra = a.ints[2];
  const ir::TensorType xt = b.type(in[0]);
  auto it = a.ints.begin() + 3;
  r.perm.assign(it, it + xt.rank());
  it += xt.rank();
  r.out_perm.assign(it, it + (r.nb + xt.rank() - r.k));
  it += r.nb + xt.rank() - r.k;
  r.bshape.assign(it, a.ints.end());
  r.xt = ir::Transpose(b, in[0], r.perm);
  ir::Dims col = r.bshape;
  col.push_back(1);
  VS cols;
  for (int64_t i = 0; i < r.k; ++i) {
    Value v = ir::BroadcastTo(b, WrapIndex(b, in[1 + i], xt.dims[r.perm[i]]), r.bshape);
    cols.push_back(ir::Reshape(b, v, col));
  }
  r.idx = ir::Concatenate(b, cols, r.nb);
  for (int64_t i = r.k; i < xt.rank(); ++i) r.rest_sizes.push_back(xt.dims[r.perm[i]]);
  return r;
}

ir::Dims Inverse(const ir::Dims& p) {
  ir::Dims inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
  return inv;
}

// ins = (self, idx_0, ..., idx_{k-1})
VS LowerIndex(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  IndexIr r = IndexCommon(b, in, a);
  ir::GatherDims gd;
  ir::Dims slice(r.k, 1), odims = r.bshape;
  for (int64_t i = 0; i < r.k; ++i) {
    gd.collapsed_slice_dims.push_back(i);
    gd.start_index_map.push_back(i);
  }
  for (size_t i = 0; i < r.rest_sizes.size(); ++i) {
    gd.offset_dims.push_back(r.nb + static_cast<int64_t>(i));
    slice.push_back(r.rest_sizes[i]);
    odims.push_back(r.rest_sizes[i]);
  }
  gd.index_vector_dim = r.nb;
  Value g = ir::Gather(b, r.xt, r.idx, gd, slice, ir::TensorType{out[0].dtype, odims});
  return {ir::Transpose(b, g, r.out_perm)};
}
constexpr lazy::Lowering kIndex{"aten::index.Tensor", &LowerIndex};

// ins = (self, values, idx_0, ...); extra = accumulate
VS LowerIndexPut(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  VS ins{in[0]};
  ins.insert(ins.end(), in.begin() + 2, in.end());
  IndexIr r = IndexCommon(b, ins, a);
  ir::Dims udims = r.bshape;  // [bshape, rest]
  udims.insert(udims.end(), r.rest_sizes.begin(), r.rest_sizes.end());
  ir::Dims user(udims.size());  // the result layout of self[indices]
  for (size_t i = 0; i < r.out_perm.size(); ++i) user[i] = udims[r.out_perm[i]];
  Value v = ir::BroadcastTo(b, ir::Convert(b, in[1], out[0].dtype), user);
  v = ir::Transpose(b, v, Inverse(r.out_perm));
  ir::ScatterDims sd;
  for (int64_t i = 0; i < r.k; ++i) {
    sd.inserted_window_dims.push_back(i);
    sd.scatter_dims_to_operand_dims.push_back(i);
  }
  for (size_t i = 0; i < r.rest_sizes.size(); ++i)
    sd.update_window_dims.push_back(r.nb + static_cast<int64_t>(i));
  sd.index_vector_dim = r.nb;
  Value s = ir::Scatter(b, r.xt, r.idx, v, sd, r.extra ? "stablehlo.add" : "");
  return {ir::Transpose(b, s, Inverse(r.perm))};
}
constexpr lazy::Lowering kIndexPut{"aten::_index_put_impl_", &LowerIndexPut};

// self[mask] = value (or +=) with one mask over self's leading dims and a
// single value: a select, with no host sync.
// ins = (self, mask, value); ints = (accumulate)
VS LowerMaskedPut(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::Dims& dims = out[0].dims;
  const ir::TensorType mt = b.type(in[1]);
  ir::Dims bd;
  for (int64_t i = 0; i < mt.rank(); ++i) bd.push_back(i);
  Value mask = ir::BroadcastInDim(b, ir::Convert(b, in[1], DType::PRED), dims, bd);
  Value v = ir::Full(b, ir::Reshape(b, ir::Convert(b, in[2], out[0].dtype), {}), dims);
  Value x = ir::Convert(b, in[0], out[0].dtype);
  if (a.ints[0]) v = ir::Binary(b, out[0].dtype == DType::PRED ? "stablehlo.or" : "stablehlo.add", x, v);
  return {ir::Select(b, mask, v, x)};
}
constexpr lazy::Lowering kMaskedPut{"aten::index_put_.mask", &LowerMaskedPut};

Tensor index_tensor(const Tensor& self, const c10::List<std::optional<Tensor>>& indices) {
  // a host tensor indexed with tpu indices: CPU's message
  TORCH_CHECK(!self.device().is_cpu(), "indices should be either on cpu or on the same device "
              "as the indexed tensor (", self.device(), ")");
  CheckTpu("index", self, "self");
  TORCH_CHECK_INDEX(!indices.empty(), "at least one index must be provided");
  IndexPlan p = PlanIndex("aten::index.Tensor", self, indices);
  int64_t n = 1;
  for (int64_t s : p.sizes) n *= s;
  if (p.dims.empty()) return self.clone();
  if (n == 0) return EmptyTpu(p.sizes, self.scalar_type());
  std::vector<lazy::Operand> in{OperandOf(self)};
  for (const Tensor& t : p.indices) in.push_back(OperandOf(t));
  return Run1(kIndex, IndexAttrs(p, 0), in, TypeOf(p.sizes, self.scalar_type()));
}
Tensor& index_tensor_out(const Tensor& self, const c10::List<std::optional<Tensor>>& indices,
                         Tensor& out) {
  Tensor r = index_tensor(self, indices);
  PrepareOut("index", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

Tensor& index_put_impl_(Tensor& self, const c10::List<std::optional<Tensor>>& indices,
                        const Tensor& values, bool accumulate, bool) {
  CheckTpu("index_put_", self, "self");
  CheckTpu("index_put_", values, "values");
  const bool expanded = WarnIfExpandedWrite(self, "index_put_", "tensor[indices] = tensor");
  at::assert_no_overlap(self, values);
  for (const std::optional<Tensor>& t : indices)
    if (t.has_value() && t->defined()) at::assert_no_overlap(self, *t);
  auto check_dtypes = [&] {
    TORCH_CHECK(self.scalar_type() == values.scalar_type(), "Index put requires the source and "
                "destination dtypes match, got ", self.scalar_type(), " for the destination and ",
                values.scalar_type(), " for the source.");
  };
  if (indices.size() == 1 && values.numel() == 1 && values.dim() <= 1) {
    const std::optional<Tensor> t = indices.get(0);
    if (t.has_value() && t->defined() && t->scalar_type() == at::kBool &&
        t->device().type() == c10::DeviceType::PrivateUse1 && t->dim() <= self.dim()) {
      for (int64_t j = 0; j < t->dim(); ++j)
        TORCH_CHECK_INDEX(t->size(j) == self.size(j), "The shape of the mask ", t->sizes(),
                          " at index ", j, " does not match the shape of the indexed tensor ",
                          self.sizes(), " at index ", j);
      check_dtypes();
      RunInto(kMaskedPut, {{accumulate}, {}, {}},
              {OperandOf(self), OperandOf(*t), OperandOf(values)},
              {TypeOf(self.sizes(), self.scalar_type())}, {self}, expanded);
      return self;
    }
  }
  IndexPlan p = PlanIndex("aten::index_put_", self, indices);
  TORCH_CHECK(at::is_expandable_to(values.sizes(), p.sizes), "shape mismatch: value tensor of "
              "shape ", values.sizes(), " cannot be broadcast to indexing result of shape ",
              at::IntArrayRef(p.sizes));
  check_dtypes();
  int64_t n = 1;
  for (int64_t s : p.sizes) n *= s;
  if (n == 0) return self;
  if (p.dims.empty()) return self.copy_(accumulate ? at::add(self, values) : values.expand(self.sizes()));
  std::vector<lazy::Operand> in{OperandOf(self), OperandOf(values)};
  for (const Tensor& t : p.indices) in.push_back(OperandOf(t));
  RunInto(kIndexPut, IndexAttrs(p, accumulate), in, {TypeOf(self.sizes(), self.scalar_type())},
          {self}, expanded);
  return self;
}

// ---- masked_select: the elements of self where mask is true, as 1-d ----

// The number of selected elements decides the result's shape, so the mask
// is read on the host (a sync) and the op becomes a gather.
Tensor masked_select_tpu(const Tensor& self, const Tensor& mask) {
  CheckTpu("masked_select", self, "self");
  CheckTpu("masked_select", mask, "mask");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  auto shape = at::infer_size(self.sizes(), mask.sizes());
  Tensor s = self.expand(shape), m = mask.expand(shape);
  c10::List<std::optional<Tensor>> idx;
  idx.push_back(m);
  return index_tensor(s, idx).reshape({-1});
}
Tensor& masked_select_out(const Tensor& self, const Tensor& mask, Tensor& out) {
  Tensor r = masked_select_tpu(self, mask);
  PrepareOut("masked_select", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

// ---- masked_scatter_: source's elements, in order, where mask is true ----

// Position of each element in source = (number of true mask elements up to
// and including it) - 1, a cumulative sum: no host sync needed.
// ins = (self, mask, source)
VS LowerMaskedScatter(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::Dims& dims = out[0].dims;
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  Value x = ir::Reshape(b, in[0], {n});
  Value m = ir::Reshape(b, ir::BroadcastTo(b, ir::Convert(b, in[1], DType::PRED), dims), {n});
  Value cnt = ir::CumReduce(b, ir::Convert(b, m, DType::S64), ir::ConstantI(b, 0, DType::S64), 0,
                            "stablehlo.add");
  const int64_t ns = b.type(in[2]).numel();
  Value pos = ir::Binary(b, "stablehlo.subtract", cnt, ir::Full(b, ir::ConstantI(b, 1, DType::S64), {n}));
  pos = ir::Max(b, ir::Min(b, pos, ir::Full(b, ir::ConstantI(b, ns - 1, DType::S64), {n})),
                ir::Full(b, ir::ConstantI(b, 0, DType::S64), {n}));
  Value src = ir::Take(b, ir::Reshape(b, ir::Convert(b, in[2], out[0].dtype), {ns}), pos);
  return {ir::Reshape(b, ir::Select(b, m, src, x), dims)};
}
constexpr lazy::Lowering kMaskedScatter{"aten::masked_scatter_", &LowerMaskedScatter};

// CPU raises when source has fewer elements than mask has true values. The
// count lives on the device, so it is checked as an index is: the count
// must be in [0, source.numel()], read where a tpu value is read anyway.
Tensor& masked_scatter_(Tensor& self, const Tensor& mask, const Tensor& source) {
  CheckTpu("masked_scatter_", self, "self");
  CheckTpu("masked_scatter_", mask, "mask");
  CheckTpu("masked_scatter_", source, "source");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but "
              "got mask with dtype ", mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "masked_scatter: expected self and "
              "source to have same dtypes but got", self.scalar_type(), " and ",
              source.scalar_type());
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), self.sizes()), "masked_scatter_: expected mask "
              "to be broadcastable to self");
  if (self.numel() == 0) return self;
  const Tensor count = at::sum(mask.expand(self.sizes()), at::kLong).reshape({1});
  CheckIndexRange({"aten::masked_scatter_", false, false,
                   "Number of elements of source < number of ones in mask", "", false},
                  count, source.numel() + 1);
  if (source.numel() == 0) return self;
  RunInto(kMaskedScatter, {}, {OperandOf(self), OperandOf(mask), OperandOf(source)},
          {TypeOf(self.sizes(), self.scalar_type())}, {self});
  return self;
}


// ---- nonzero: the count is read on the host, the positions stay on device ----

// ins = (x); out = (count as s64 0-d).
VS LowerCountNonzero(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType t = b.type(in[0]);
  Value nz = ir::Convert(b, ir::Convert(b, in[0], DType::PRED), DType::S64);
  ir::Dims all;
  for (int64_t i = 0; i < t.rank(); ++i) all.push_back(i);
  return {ir::Reshape(b, ir::Reduce(b, nz, ir::ConstantI(b, 0, DType::S64), all, "stablehlo.add"),
                      out[0].dims)};
}
constexpr lazy::Lowering kCountNonzero{"aten::nonzero.count", &LowerCountNonzero};

// ins = (x[, fill value s64 0-d]); out = [rows, ndim] s64: the coordinates of
// the nonzero elements in row-major order; rows past their number hold the
// fill value (nonzero_static) — for nonzero, rows equals that number.
VS LowerNonzero(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType t = b.type(in[0]);
  const int64_t rows = out[0].dims[0], nd = t.rank();
  const int64_t n = t.numel();
  Value mask = ir::Reshape(b, ir::Convert(b, in[0], DType::PRED), {n});
  Value m64 = ir::Convert(b, mask, DType::S64);
  Value pos = ir::Binary(b, "stablehlo.subtract",
                         ir::CumReduce(b, m64, ir::ConstantI(b, 0, DType::S64), 0, "stablehlo.add"),
                         ir::Full(b, ir::ConstantI(b, 1, DType::S64), {n}));
  // Zero elements go to position `rows`, outside the result: dropped.
  pos = ir::Select(b, mask, pos, ir::Full(b, ir::ConstantI(b, rows, DType::S64), {n}));
  Value flat = ir::Put(b, ir::Full(b, ir::ConstantI(b, 0, DType::S64), {rows}), pos,
                       ir::Iota(b, {n}, 0, DType::S64));
  std::vector<Value> cols;
  int64_t stride = 1;
  std::vector<int64_t> strides(nd);
  for (int64_t d = nd - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= t.dims[d];
  }
  auto full = [&](int64_t v) { return ir::Full(b, ir::ConstantI(b, v, DType::S64), {rows}); };
  for (int64_t d = 0; d < nd; ++d) {
    Value c = ir::Binary(b, "stablehlo.divide", flat, full(strides[d]));
    c = ir::Binary(b, "stablehlo.remainder", c, full(t.dims[d]));
    cols.push_back(ir::Reshape(b, c, {rows, 1}));
  }
  Value r = ir::Concatenate(b, cols, 1);
  if (in.size() > 1) {  // rows past the count take the fill value
    Value count = ir::Reduce(b, m64, ir::ConstantI(b, 0, DType::S64), {0}, "stablehlo.add");
    Value valid = ir::Compare(b, ir::Iota(b, {rows, nd}, 0, DType::S64),
                              ir::Full(b, count, {rows, nd}), ir::Cmp::LT);
    r = ir::Select(b, valid, r, ir::Full(b, ir::Convert(b, in[1], DType::S64), {rows, nd}));
  }
  return {r};
}
constexpr lazy::Lowering kNonzero{"aten::nonzero", &LowerNonzero};

Tensor NonzeroRows(const Tensor& self, int64_t rows, const std::optional<int64_t>& fill) {
  Tensor r = EmptyTpu({rows, self.dim()}, at::kLong);
  if (rows == 0 || self.dim() == 0) return r;  // nothing to compute ([rows, 0] for 0-d)
  std::vector<lazy::Operand> in{OperandOf(self)};
  if (fill.has_value()) in.push_back(ScalarOperand(*fill, at::kLong));
  return Run1(kNonzero, {}, in, TypeOf({rows, self.dim()}, at::kLong));
}

Tensor nonzero_tpu(const Tensor& self) {
  CheckTpu("nonzero", self, "self");
  TORCH_CHECK(self.numel() < std::numeric_limits<int>::max(),
              "nonzero is not supported for tensors with more than INT_MAX elements");
  int64_t count = 0;
  if (self.numel() > 0) {
    count = Run1(kCountNonzero, {}, {OperandOf(self)}, TypeOf({}, at::kLong)).item<int64_t>();
  }
  return NonzeroRows(self, count, std::nullopt);
}
Tensor& nonzero_out(const Tensor& self, Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long "
              "but got scalar type ", out.scalar_type());
  TORCH_CHECK(self.device() == out.device(), "expected self and out to be on the same device, but "
              "got out on ", out.device(), " and self on ", self.device());
  Tensor r = nonzero_tpu(self);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}
Tensor nonzero_static_tpu(const Tensor& self, int64_t size, int64_t fill_value) {
  CheckTpu("nonzero_static", self, "self");
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer, but got ", size);
  if (self.numel() == 0) {
    Tensor r = EmptyTpu({size, self.dim()}, at::kLong);
    if (r.numel() > 0) r.fill_(fill_value);
    return r;
  }
  return NonzeroRows(self, size, fill_value);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index.Tensor", TORCH_FN(index_tensor));
  m.impl("index.Tensor_out", TORCH_FN(index_tensor_out));
  m.impl("_index_put_impl_", TORCH_FN(index_put_impl_));
  m.impl("masked_select", TORCH_FN(masked_select_tpu));
  m.impl("nonzero", TORCH_FN(nonzero_tpu));
  m.impl("nonzero.out", TORCH_FN(nonzero_out));
  m.impl("nonzero_static", TORCH_FN(nonzero_static_tpu));
  m.impl("masked_select.out", TORCH_FN(masked_select_out));
  m.impl("masked_scatter_", TORCH_FN(masked_scatter_));
}

}  // namespace tpu::ops
