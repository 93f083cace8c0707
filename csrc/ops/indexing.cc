// Indexing ops: index_select, gather, scatter (+ reductions), index_add,
// index_copy, index_fill_, advanced indexing (index / index_put_),
// masked_select, masked_scatter_ and embedding's backward.
//
// Out-of-range indices: CPU raises; on the device that check would need a
// host sync per op, so it is done only where the indices are on the host
// already (CPU index tensors, bool masks we convert on the host). Indices
// that live on the device are not checked: XLA clamps a gather's start
// index into range and drops scatter updates that fall outside. Negative
// indices are wrapped Python-style everywhere (CPU's index_select, gather
// and scatter raise for them instead).
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/add.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/take_along_dim.h>
#include <ATen/ops/tril_indices.h>
#include <ATen/ops/triu_indices.h>
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
#include "ops/bridge.h"
#include "ops/index_checks.h"
#include "ops/common.h"

namespace tpu::ops {

using at::Tensor;
using ir::Builder;
using ir::DType;
using ir::Value;
using VS = std::vector<Value>;
using TT = std::vector<ir::TensorType>;

namespace {

const c10::Device kTpu(c10::DeviceType::PrivateUse1, 0);

// ---- index_select: x[..., index, ...] along one dim ----

// ins = (x, index); ints = (dim). Result reshaped to the output type.
VS LowerIndexSelect(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t dim = a.ints[0];
  const ir::TensorType xt = b.type(in[0]);
  const int64_t k = b.type(in[1]).numel();
  Value idx = ir::Reshape(b, WrapIndex(b, in[1], xt.dims[dim]), {k, 1});
  ir::GatherDims gd;
  for (int64_t i = 0; i < xt.rank(); ++i)
    if (i != dim) gd.offset_dims.push_back(i);
  gd.collapsed_slice_dims = {dim};
  gd.start_index_map = {dim};
  gd.index_vector_dim = 1;
  ir::Dims slice = xt.dims, odims = xt.dims;
  slice[dim] = 1;
  odims[dim] = k;
  Value r = ir::Gather(b, in[0], idx, gd, slice, ir::TensorType{xt.dtype, odims});
  return {ir::Reshape(b, r, out[0].dims)};
}
constexpr lazy::Lowering kIndexSelect{"aten::index_select", &LowerIndexSelect};

Tensor OnTpu(const Tensor& t) { return t.device().is_cpu() ? t.to(kTpu) : t; }

Tensor IndexSelectRun(const Tensor& self, int64_t dim, const Tensor& index, Tensor* out) {
  CheckTpu("index_select", self, "self");
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> sizes = self.sizes().vec();
  if (self.dim() > 0) sizes[d] = index.numel();
  const bool empty = self.numel() == 0 || index.numel() == 0;
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  CheckIndexRange({"aten::index_select", true, false, "index out of range in self", "", false},
                  index, x.size(d));
  const ir::TensorType tt = TypeOf(sizes, self.scalar_type());
  if (out) {
    PrepareOut("index_select", *out, sizes, self.scalar_type());
    if (!empty)
      RunInto(kIndexSelect, {{d}, {}, {}}, {OperandOf(x), OperandOf(OnTpu(index))}, {tt}, {*out});
    return *out;
  }
  if (empty) return EmptyTpu(sizes, self.scalar_type());
  return Run1(kIndexSelect, {{d}, {}, {}}, {OperandOf(x), OperandOf(OnTpu(index))}, tt);
}
Tensor index_select(const Tensor& s, int64_t dim, const Tensor& i) {
  return IndexSelectRun(s, dim, i, nullptr);
}
Tensor& index_select_out(const Tensor& s, int64_t dim, const Tensor& i, Tensor& o) {
  IndexSelectRun(s, dim, i, &o);
  return o;
}

// ---- gather / scatter along a dim (element-wise index) ----

// Linear positions into x (row-major) of the elements that index (shaped
// like `index`) selects along `dim`.
Value LinearIndex(Builder& b, Value index, const ir::Dims& xdims, int64_t dim) {
  const ir::Dims idims = b.type(index).dims;
  Value lin;
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(xdims.size()) - 1; d >= 0; --d) {
    Value coord = d == dim ? WrapIndex(b, index, xdims[d]) : ir::Iota(b, idims, d, DType::S64);
    if (stride != 1)
      coord = ir::Binary(b, "stablehlo.multiply", coord,
                         ir::Full(b, ir::ConstantI(b, stride, DType::S64), idims));
    lin = lin.valid() ? ir::Binary(b, "stablehlo.add", lin, coord) : coord;
    stride *= xdims[d];
  }
  return lin;
}

Value Flat(Builder& b, Value x) { return ir::Reshape(b, x, {b.type(x).numel()}); }

// ins = (x, index); ints = (dim)
VS LowerGather(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::TensorType xt = b.type(in[0]);
  Value lin = LinearIndex(b, in[1], xt.dims, a.ints[0]);
  return {ir::Reshape(b, ir::Take(b, Flat(b, in[0]), lin), out[0].dims)};
}
constexpr lazy::Lowering kGather{"aten::gather", &LowerGather};

// Scatters `upd` (shaped like index) into x at index's positions along dim.
Value ScatterAlong(Builder& b, Value x, Value index, Value upd, int64_t dim,
                   const std::string& body) {
  const ir::TensorType xt = b.type(x);
  Value lin = LinearIndex(b, index, xt.dims, dim);
  ir::ScatterDims sd;
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = b.type(lin).rank();
  return ir::Reshape(b, ir::Scatter(b, Flat(b, x), lin, upd, sd, body), xt.dims);
}

// The first index.shape elements of src (scatter reads only those).
Value SrcFor(Builder& b, Value src, Value index) {
  const ir::TensorType st = b.type(src);
  const ir::Dims idims = b.type(index).dims;
  return ir::Slice(b, src, ir::Dims(st.rank(), 0), idims, ir::Dims(st.rank(), 1));
}

enum ScatterReduce : int64_t { kNone = 0, kSum = 1, kProd = 2, kMean = 3, kAmax = 4, kAmin = 5 };

const char* ReduceBody(int64_t r) {
  switch (r) {
    case kSum: case kMean: return "stablehlo.add";
    case kProd: return "stablehlo.multiply";
    case kAmax: return "stablehlo.maximum";
    case kAmin: return "stablehlo.minimum";
    default: return "";
  }
}

// ins = (self, index, src); src is a 0-d value (scatter.value) or a tensor.
// ints = (dim, reduce, include_self)
VS LowerScatter(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t dim = a.ints[0], red = a.ints[1];
  const bool include_self = a.ints[2] != 0;
  Value x = ir::Convert(b, in[0], out[0].dtype);
  const ir::TensorType xt = b.type(x);
  const ir::TensorType it = b.type(in[1]);
  Value src = ir::Convert(b, in[2], xt.dtype);
  src = b.type(src).rank() == 0 ? ir::Full(b, src, it.dims) : SrcFor(b, src, in[1]);
  if (red == kNone) return {ScatterAlong(b, x, in[1], src, dim, "")};
  Value base = x;
  if (!include_self) {
    // Positions that receive updates start from the reduction's identity.
    Value init;
    switch (red) {
      case kProd: init = ir::ConstantI(b, 1, xt.dtype); break;
      case kAmax: init = ir::MinValue(b, xt.dtype); break;
      case kAmin: init = ir::MaxValue(b, xt.dtype); break;
      default: init = ir::ConstantI(b, 0, xt.dtype);
    }
    base = ScatterAlong(b, x, in[1], ir::Full(b, init, it.dims), dim, "");
  }
  Value r = ScatterAlong(b, base, in[1], src, dim, ReduceBody(red));
  if (red == kMean) {
    Value zeros = ir::Full(b, ir::ConstantI(b, include_self ? 1 : 0, xt.dtype), xt.dims);
    Value cnt = ScatterAlong(b, zeros, in[1], ir::Full(b, ir::ConstantI(b, 1, xt.dtype), it.dims),
                             dim, "stablehlo.add");
    Value zero = ir::Full(b, ir::ConstantI(b, 0, xt.dtype), xt.dims);
    Value one = ir::Full(b, ir::ConstantI(b, 1, xt.dtype), xt.dims);
    cnt = ir::Select(b, ir::Compare(b, cnt, zero, ir::Cmp::EQ), one, cnt);
    if (ir::IsFloat(xt.dtype)) {
      r = ir::Binary(b, "stablehlo.divide", r, cnt);
    } else {  // floor division, as CPU's integer mean
      Value q = ir::Binary(b, "stablehlo.divide", r, cnt);
      Value rem = ir::Binary(b, "stablehlo.remainder", r, cnt);
      Value adjust = ir::Binary(b, "stablehlo.and", ir::Compare(b, rem, zero, ir::Cmp::NE),
                                ir::Compare(b, rem, zero, ir::Cmp::LT));
      r = ir::Select(b, adjust, ir::Binary(b, "stablehlo.subtract", q, one), q);
    }
  }
  return {r};
}
constexpr lazy::Lowering kScatter{"aten::scatter", &LowerScatter};

Tensor GatherRun(const Tensor& self, int64_t dim, const Tensor& index, Tensor* out) {
  CheckTpu("gather", self, "self");
  CheckTpu("gather", index, "index");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::native::scatter_gather_dtype_check("gather", self, index, std::nullopt);
  if (index.numel() != 0) at::native::gather_shape_check(self, d, index);
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  Tensor i = index.dim() == 0 ? index.reshape({1}) : index;
  const bool empty = self.numel() == 0 || index.numel() == 0;
  if (!empty)
    CheckIndexRange(OutOfBoundsRule("aten::gather", false, false, d, x.size(d)), i, x.size(d));
  const ir::TensorType tt = TypeOf(index.sizes(), self.scalar_type());
  if (out) {
    PrepareOut("gather", *out, index.sizes(), self.scalar_type());
    if (!empty) RunInto(kGather, {{d}, {}, {}}, {OperandOf(x), OperandOf(i)}, {tt}, {*out});
    return *out;
  }
  if (empty) return EmptyTpu(index.sizes(), self.scalar_type());
  return Run1(kGather, {{d}, {}, {}}, {OperandOf(x), OperandOf(i)}, tt);
}
Tensor gather(const Tensor& s, int64_t dim, const Tensor& i, bool) { return GatherRun(s, dim, i, nullptr); }
Tensor& gather_out(const Tensor& s, int64_t dim, const Tensor& i, bool, Tensor& o) {
  GatherRun(s, dim, i, &o);
  return o;
}

int64_t ReduceCode(c10::string_view r, bool two) {
  if (two) {
    if (r == "sum") return kSum;
    if (r == "prod") return kProd;
    if (r == "mean") return kMean;
    if (r == "amax") return kAmax;
    if (r == "amin") return kAmin;
    TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", r);
  }
  if (r == "add") return kSum;
  if (r == "multiply") return kProd;
  TORCH_CHECK(false, "reduce argument must be either add or multiply.");
}

// Writes scatter's result into dst (self for the in-place forms, out) or
// returns a new tensor. Validates with PyTorch's own scatter checks.
Tensor ScatterRun(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                  const c10::Scalar* value, int64_t red, bool include_self, Tensor* dst) {
  CheckTpu("scatter", self, "self");
  CheckTpu("scatter", index, "index");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  const std::optional<Tensor> src_opt = src ? std::optional<Tensor>(*src) : std::nullopt;
  at::native::scatter_gather_dtype_check("scatter", self, index, src_opt);
  at::native::scatter_shape_check(self, d, index, src_opt);
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  Tensor i = index.dim() == 0 ? index.reshape({1}) : index;
  CheckIndexRange(OutOfBoundsRule("aten::scatter", false, false, d, x.size(d)), i, x.size(d));
  std::vector<lazy::Operand> in{OperandOf(x), OperandOf(i)};
  if (src) {
    CheckTpu("scatter", *src, "src");
    Tensor s = src->dim() == 0 ? src->reshape({1}) : *src;
    in.push_back(OperandOf(s));
  } else {
    in.push_back(ScalarOperand(*value, self.scalar_type()));
  }
  const lazy::Attrs attrs{{d, red, include_self}, {}, {}};
  const ir::TensorType tt = TypeOf(x.sizes(), self.scalar_type());
  if (index.numel() == 0) {  // nothing scattered: self unchanged
    if (!dst) return self.clone();
    if (!dst->is_same(self)) {
      at::native::resize_output(*dst, self.sizes());
      dst->copy_(self);
    }
    return *dst;
  }
  if (!dst) return Run1(kScatter, attrs, in, tt).view(self.sizes());
  if (!dst->is_same(self)) PrepareOut("scatter", *dst, self.sizes(), self.scalar_type());
  RunInto(kScatter, attrs, in, {tt}, {dst->dim() == 0 ? dst->view({1}) : *dst});
  return *dst;
}

Tensor& scatter_src_out(const Tensor& s, int64_t dim, const Tensor& i, const Tensor& src, Tensor& o) {
  ScatterRun(s, dim, i, &src, nullptr, kNone, true, &o);
  return o;
}
Tensor& scatter_value_out(const Tensor& s, int64_t dim, const Tensor& i, const c10::Scalar& v,
                          Tensor& o) {
  ScatterRun(s, dim, i, nullptr, &v, kNone, true, &o);
  return o;
}
Tensor& scatter_reduce_out(const Tensor& s, int64_t dim, const Tensor& i, const Tensor& src,
                           c10::string_view reduce, Tensor& o) {
  ScatterRun(s, dim, i, &src, nullptr, ReduceCode(reduce, false), true, &o);
  return o;
}
Tensor& scatter_value_reduce_out(const Tensor& s, int64_t dim, const Tensor& i,
                                 const c10::Scalar& v, c10::string_view reduce, Tensor& o) {
  ScatterRun(s, dim, i, nullptr, &v, ReduceCode(reduce, false), true, &o);
  return o;
}
Tensor& scatter_add_out(const Tensor& s, int64_t dim, const Tensor& i, const Tensor& src,
                        Tensor& o) {
  ScatterRun(s, dim, i, &src, nullptr, kSum, true, &o);
  return o;
}
Tensor& scatter_reduce_two_out(const Tensor& s, int64_t dim, const Tensor& i, const Tensor& src,
                               c10::string_view reduce, bool include_self, Tensor& o) {
  ScatterRun(s, dim, i, &src, nullptr, ReduceCode(reduce, true), include_self, &o);
  return o;
}


// ---- index_add / index_copy: rows of source written at index along dim ----

// ins = (self, index, source[, alpha]); ints = (dim, accumulate)
VS LowerIndexAdd(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t dim = a.ints[0];
  Value x = ir::Convert(b, in[0], out[0].dtype);
  const ir::TensorType xt = b.type(x);
  Value src = ir::Convert(b, in[2], xt.dtype);
  const ir::TensorType st = b.type(src);
  if (in.size() > 3)
    src = ir::Binary(b, "stablehlo.multiply", src, ir::Full(b, ir::Convert(b, in[3], xt.dtype), st.dims));
  const int64_t k = st.dims[dim];
  Value idx = ir::Reshape(b, WrapIndex(b, in[1], xt.dims[dim]), {k, 1});
  ir::ScatterDims sd;
  for (int64_t i = 0; i < st.rank(); ++i)
    if (i != dim) sd.update_window_dims.push_back(i);
  sd.inserted_window_dims = {dim};
  sd.scatter_dims_to_operand_dims = {dim};
  sd.index_vector_dim = 1;
  return {ir::Scatter(b, x, idx, src, sd, a.ints[1] ? "stablehlo.add" : "")};
}
constexpr lazy::Lowering kIndexAdd{"aten::index_add", &LowerIndexAdd};

void IndexAddRun(const char* name, const Tensor& self, int64_t dim, const Tensor& index,
                 const Tensor& source, const c10::Scalar* alpha, Tensor& out) {
  CheckTpu(name, self, "self");
  CheckTpu(name, index, "index");
  CheckTpu(name, source, "source");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t size = self.dim() == 0 ? 1 : self.size(d);
  if (std::strcmp(name, "index_copy") == 0) {
    CheckIndexRange(OutOfBoundsRule("aten::index_copy", true, false, d, size, "index_copy_(): "),
                    index, size);
  } else {
    CheckIndexRange(OutOfBoundsRule("aten::index_add", false, false, d, size), index, size);
  }
  if (!out.is_same(self)) PrepareOut(name, out, self.sizes(), self.scalar_type());
  if (index.numel() == 0) {
    if (!out.is_same(self)) out.copy_(self);
    return;
  }
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  Tensor s = source.dim() == 0 ? source.reshape({1}) : source;
  std::vector<lazy::Operand> in{OperandOf(x), OperandOf(OnTpu(index)), OperandOf(s)};
  if (alpha && !(alpha->toComplexDouble() == c10::complex<double>(1, 0)))
    in.push_back(ScalarOperand(*alpha, self.scalar_type()));
  RunInto(kIndexAdd, {{d, alpha != nullptr}, {}, {}}, in,
          {TypeOf(x.sizes(), self.scalar_type())}, {out.dim() == 0 ? out.view({1}) : out});
}
void CheckIndexAdd(const char* name, const Tensor& self, int64_t dim, const Tensor& index,
                   const Tensor& source) {
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, name, "(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, name,
              "(): Expected dtype int32/int64 for index");
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), name, "(): self (",
              self.scalar_type(), ") and source (", source.scalar_type(),
              ") must have the same scalar type");
  TORCH_CHECK(self.dim() == source.dim() || (self.dim() <= 1 && source.dim() <= 1), name,
              "(): When source and destination are not scalars, their dimensionality must "
              "match. Source dimensionality (", source.dim(), "), destination dimensionality (",
              self.dim(), ")");
  const int64_t n = source.dim() == 0 ? 1 : source.size(d);
  TORCH_CHECK(index.numel() == n, name, "(): Number of indices (", index.numel(),
              ") should be equal to source.size(dim) (", n, ")");
  for (int64_t i = 0; i < self.dim() && self.dim() == source.dim(); ++i)
    if (i != d)
      TORCH_CHECK(self.size(i) == source.size(i), name, "(): source and destination slices "
                  "have inconsistent shapes at dimension ", i, ": self ", self.sizes(),
                  ", source ", source.sizes());
}

Tensor& index_add_out(const Tensor& s, int64_t dim, const Tensor& i, const Tensor& src,
                      const c10::Scalar& alpha, Tensor& o) {
  CheckIndexAdd("index_add_", s, dim, i, src);
  IndexAddRun("index_add", s, dim, i, src, &alpha, o);
  return o;
}
Tensor& index_copy_out(const Tensor& s, int64_t dim, const Tensor& i, const Tensor& src,
                       Tensor& o) {
  CheckIndexAdd("index_copy_", s, dim, i, src);
  IndexAddRun("index_copy", s, dim, i, src, nullptr, o);
  return o;
}

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
              {TypeOf(self.sizes(), self.scalar_type())}, {self});
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
          {self});
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

// ---- embedding backward ----

// ins = (grad [N, D], indices [N]); ints = (num_weights, padding_idx, scale)
VS LowerEmbeddingBackward(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t nw = a.ints[0], pad = a.ints[1];
  const DType acc = ir::IsFloat(out[0].dtype) && ir::BitWidth(out[0].dtype) < 32 ? DType::F32
                                                                                  : out[0].dtype;
  Value g = ir::Convert(b, in[0], acc);
  const ir::Dims gd = b.type(g).dims;  // [N, D]
  const int64_t n = gd[0];
  Value idx = ir::Convert(b, in[1], DType::S64);
  Value keep = ir::Compare(b, idx, ir::Full(b, ir::ConstantI(b, pad, DType::S64), {n}), ir::Cmp::NE);
  g = ir::Select(b, ir::BroadcastInDim(b, keep, gd, {0}), g,
                 ir::Full(b, ir::ConstantI(b, 0, acc), gd));
  if (a.ints[2]) {  // scale_grad_by_freq: divide each row by its index's count
    ir::ScatterDims cd;
    cd.inserted_window_dims = {0};
    cd.scatter_dims_to_operand_dims = {0};
    cd.index_vector_dim = 1;
    Value counts = ir::Scatter(b, ir::Full(b, ir::ConstantI(b, 0, acc), {nw}), idx,
                               ir::Full(b, ir::ConstantI(b, 1, acc), {n}), cd, "stablehlo.add");
    Value c = ir::Take(b, counts, idx);
    g = ir::Binary(b, "stablehlo.divide", g, ir::BroadcastInDim(b, c, gd, {0}));
  }
  ir::ScatterDims sd;
  sd.update_window_dims = {1};
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value r = ir::Scatter(b, ir::Full(b, ir::ConstantI(b, 0, acc), {nw, gd[1]}),
                        ir::Reshape(b, idx, {n, 1}), g, sd, "stablehlo.add");
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kEmbeddingBackward{"aten::embedding_dense_backward",
                                            &LowerEmbeddingBackward};

Tensor embedding_dense_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights,
                                int64_t padding_idx, bool scale_grad_by_freq) {
  CheckTpu("embedding_dense_backward", grad, "grad_output");
  CheckTpu("embedding_dense_backward", indices, "indices");
  const int64_t d = grad.size(-1);
  const int64_t n = indices.numel();
  if (n == 0) return at::zeros({num_weights, d}, grad.options());
  return Run1(kEmbeddingBackward, {{num_weights, padding_idx, scale_grad_by_freq}, {}, {}},
              {OperandOf(grad.reshape({n, d})), OperandOf(indices.reshape({n}))},
              TypeOf({num_weights, d}, grad.scalar_type()));
}


// ---- index_fill_: value written at index along dim ----

// ins = (self, index, value); ints = (dim)
VS LowerIndexFill(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t dim = a.ints[0];
  Value x = in[0];
  const ir::TensorType xt = b.type(x);
  const int64_t k = b.type(in[1]).numel();
  ir::Dims udims = xt.dims;
  udims[dim] = k;
  Value upd = ir::Full(b, ir::Reshape(b, ir::Convert(b, in[2], xt.dtype), {}), udims);
  Value idx = ir::Reshape(b, WrapIndex(b, in[1], xt.dims[dim]), {k, 1});
  ir::ScatterDims sd;
  for (int64_t i = 0; i < xt.rank(); ++i)
    if (i != dim) sd.update_window_dims.push_back(i);
  sd.inserted_window_dims = {dim};
  sd.scatter_dims_to_operand_dims = {dim};
  sd.index_vector_dim = 1;
  return {ir::Scatter(b, x, idx, upd, sd, "")};
}
constexpr lazy::Lowering kIndexFill{"aten::index_fill_", &LowerIndexFill};

Tensor& IndexFillRun(Tensor& self, int64_t dim, const Tensor& index, lazy::Operand value) {
  CheckTpu("index_fill_", self, "self");
  CheckTpu("index_fill_", index, "index");
  TORCH_CHECK_INDEX(index.dim() <= 1, "Index has to be a vector/scalar");
  TORCH_CHECK(index.scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (self.numel() > 0) {
    const int64_t size = self.dim() == 0 ? 1 : self.size(d);
    CheckIndexRange(OutOfBoundsRule("aten::index_fill_", true, true, d, size), index, size);
  }
  if (index.numel() == 0 || self.numel() == 0) return self;
  Tensor x = self.dim() == 0 ? self.view({1}) : self;
  RunInto(kIndexFill, {{d}, {}, {}}, {OperandOf(x), OperandOf(OnTpu(index)), value},
          {TypeOf(x.sizes(), self.scalar_type())}, {x});
  return self;
}
Tensor& index_fill_scalar(Tensor& s, int64_t dim, const Tensor& i, const c10::Scalar& v) {
  TORCH_CHECK(s.is_complex() || !v.isComplex(),
              "index_fill_(): Converting complex Scalar to non-complex type is not supported");
  return IndexFillRun(s, dim, i, ScalarOperand(v, s.scalar_type()));
}
Tensor& index_fill_tensor(Tensor& s, int64_t dim, const Tensor& i, const Tensor& v) {
  TORCH_CHECK(v.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got "
              "tensor with ", v.dim(), " dimension(s).");
  return IndexFillRun(s, dim, i, OperandOf(v));
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

// CPU raises when source has fewer elements than mask has true values; that
// count lives on the device, so it is not checked here (the last source
// element is repeated instead).
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
  if (self.numel() == 0 || source.numel() == 0) return self;
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
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)),
              "torch.histc: range of [", lo, ", ", hi, "] is not finite");
  Tensor flat = self.reshape({-1});
  if (lo == hi && flat.numel() > 0) {
    lo = flat.min().item<double>();
    hi = flat.max().item<double>();
  }
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

// ---- take, put_ ----

// ins = (flat [n], index [m...]); out = index-shaped.
VS LowerTake(Builder& b, const VS& in, const lazy::Attrs&, const TT&) {
  const int64_t n = b.type(in[0]).dims[0];
  return {ir::Take(b, in[0], WrapIndex(b, in[1], n))};
}
constexpr lazy::Lowering kTake{"aten::take", &LowerTake};

IndexRule TakeRule(const char* op, int64_t numel) {
  return {op, true, true, "out of range: tried to access index ",
          " on a tensor of " + std::to_string(numel) + " elements."};
}

Tensor take_tpu(const Tensor& self, const Tensor& index) {
  CheckTpu("take", self, "self");
  CheckTpu("take", index, "index");
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, "
                    "but got ", index.scalar_type());
  TORCH_CHECK_INDEX(!(self.numel() == 0 && index.numel() != 0),
                    "take(): tried to take from an empty tensor");
  if (index.numel() == 0) return EmptyTpu(index.sizes(), self.scalar_type());
  CheckIndexRange(TakeRule("aten::take", self.numel()), index, self.numel());
  return Run1(kTake, {}, {OperandOf(self.reshape({-1})), OperandOf(index)},
              TypeOf(index.sizes(), self.scalar_type()));
}
Tensor& take_out_tpu(const Tensor& self, const Tensor& index, Tensor& out) {
  Tensor r = take_tpu(self, index);
  PrepareOut("take", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

// ins = (flat self [n], index [m], source [m]); ints = (accumulate).
VS LowerPut(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t n = b.type(in[0]).dims[0];
  Value idx = WrapIndex(b, in[1], n);
  Value src = ir::Convert(b, in[2], out[0].dtype);
  if (a.ints[0]) {
    const bool pred = out[0].dtype == DType::PRED;
    Value add = ir::ScatterAddAlong(b, pred ? ir::Convert(b, src, DType::S64) : src, 0, idx, n);
    if (pred) add = ir::Convert(b, add, DType::PRED);
    return {ir::Binary(b, pred ? "stablehlo.or" : "stablehlo.add", in[0], add)};
  }
  return {ir::Put(b, in[0], idx, src)};
}
constexpr lazy::Lowering kPut{"aten::put_", &LowerPut};

Tensor& put_tpu(Tensor& self, const Tensor& index, const Tensor& source, bool accumulate) {
  CheckTpu("put_", self, "self");
  CheckTpu("put_", index, "index");
  CheckTpu("put_", source, "source");
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, "put_(): Expected a long tensor for index, "
                    "but got ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "put_(): self and source expected to "
              "have the same dtype, but got self.dtype = ", self.scalar_type(),
              " and source.dtype = ", source.scalar_type());
  TORCH_CHECK(index.numel() == source.numel(), "put_(): Expected source and index to have the "
              "same number of elements, but got source.numel() = ", source.numel(),
              ", index.numel() = ", index.numel());
  if (index.numel() == 0) return self;
  TORCH_CHECK_INDEX(self.numel() > 0, "put_(): Tried to put elements into an empty tensor");
  CheckIndexRange(TakeRule("aten::put_", self.numel()), index, self.numel());
  Tensor flat = self.reshape({-1});
  Tensor r = Run1(kPut, {{accumulate ? 1 : 0}, {}, {}},
                  {OperandOf(flat), OperandOf(index.reshape({-1})), OperandOf(source.reshape({-1}))},
                  TypeOf({self.numel()}, self.scalar_type()));
  self.copy_(r.view(self.sizes()));
  return self;
}

// ---- tril_indices / triu_indices: computed on the host, uploaded ----

Tensor TriIndices(bool lower, int64_t row, int64_t col, int64_t offset,
                  std::optional<at::ScalarType> dtype) {
  const auto dt = dtype.value_or(at::kLong);
  Tensor host = lower ? at::tril_indices(row, col, offset, at::TensorOptions().dtype(dt))
                      : at::triu_indices(row, col, offset, at::TensorOptions().dtype(dt));
  return host.to(c10::Device(c10::DeviceType::PrivateUse1, 0));
}
Tensor tril_indices_tpu(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>) {
  return TriIndices(true, row, col, offset, dtype);
}
Tensor triu_indices_tpu(int64_t row, int64_t col, int64_t offset, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout>, std::optional<at::Device>, std::optional<bool>) {
  return TriIndices(false, row, col, offset, dtype);
}

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

// ---- embedding_renorm_: rows at the indices scaled to at most max_norm ----

// ins = (weight [V, D], indices [L]); floats = (max_norm, norm_type).
VS LowerEmbeddingRenorm(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::Dims d = b.type(in[0]).dims;
  const DType ct = ir::BitWidth(out[0].dtype) < 32 ? DType::F32 : out[0].dtype;
  const int64_t v = d[0], l = b.type(in[1]).dims[0];
  const double max_norm = a.floats[0], p = a.floats[1];
  Value w = ir::Convert(b, in[0], ct);
  Value ab = ir::Unary(b, "stablehlo.abs", w);
  Value norm;
  if (std::isinf(p)) {
    norm = ir::Reduce(b, ab, ir::ConstantF(b, 0.0, ct), {1}, "stablehlo.maximum");
  } else if (p == 1) {
    norm = ir::Reduce(b, ab, ir::ConstantF(b, 0.0, ct), {1}, "stablehlo.add");
  } else {
    Value pw = ir::Binary(b, "stablehlo.power", ab, ir::Full(b, ir::ConstantF(b, p, ct), d));
    norm = ir::Reduce(b, pw, ir::ConstantF(b, 0.0, ct), {1}, "stablehlo.add");
    norm = ir::Binary(b, "stablehlo.power", norm, ir::Full(b, ir::ConstantF(b, 1.0 / p, ct), {v}));
  }
  Value touched = ir::ScatterAddAlong(b, ir::Full(b, ir::ConstantI(b, 1, DType::S64), {l}), 0,
                                      WrapIndex(b, in[1], v), v);
  Value over = ir::Binary(b, "stablehlo.and",
                          ir::Compare(b, touched, ir::Full(b, ir::ConstantI(b, 0, DType::S64), {v}), ir::Cmp::GT),
                          ir::Compare(b, norm, ir::Full(b, ir::ConstantF(b, max_norm, ct), {v}), ir::Cmp::GT));
  Value scale = ir::Binary(b, "stablehlo.divide", ir::Full(b, ir::ConstantF(b, max_norm, ct), {v}),
                           ir::Binary(b, "stablehlo.add", norm, ir::Full(b, ir::ConstantF(b, 1e-7, ct), {v})));
  scale = ir::Select(b, over, scale, ir::Full(b, ir::ConstantF(b, 1.0, ct), {v}));
  Value r = ir::Binary(b, "stablehlo.multiply", w, ir::BroadcastInDim(b, scale, d, {0}));
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kEmbeddingRenorm{"aten::embedding_renorm_", &LowerEmbeddingRenorm};

Tensor& embedding_renorm_tpu(Tensor& self, const Tensor& indices, double max_norm,
                             double norm_type) {
  CheckTpu("embedding_renorm_", self, "self");
  CheckTpu("embedding_renorm_", indices, "indices");
  TORCH_CHECK(self.dim() == 2, "embedding_renorm_: self must be 2-D");
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_renorm_: expected indices of type Long or Int, got ",
              indices.scalar_type());
  if (indices.numel() == 0 || self.numel() == 0) return self;
  RunInto(kEmbeddingRenorm, {{}, {max_norm, norm_type}, {}},
          {OperandOf(self), OperandOf(indices.reshape({-1}))},
          {TypeOf(self.sizes(), self.scalar_type())}, {self});
  return self;
}
}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", TORCH_FN(index_select));
  m.impl("index_select.out", TORCH_FN(index_select_out));
  m.impl("gather", TORCH_FN(gather));
  m.impl("gather.out", TORCH_FN(gather_out));
  // The functional and in-place scatter forms are PyTorch's structured
  // wrappers around these out= kernels (they run the meta checks first).
  m.impl("scatter.src_out", TORCH_FN(scatter_src_out));
  m.impl("scatter.value_out", TORCH_FN(scatter_value_out));
  m.impl("scatter.reduce_out", TORCH_FN(scatter_reduce_out));
  m.impl("scatter.value_reduce_out", TORCH_FN(scatter_value_reduce_out));
  m.impl("scatter_add.out", TORCH_FN(scatter_add_out));
  m.impl("scatter_reduce.two_out", TORCH_FN(scatter_reduce_two_out));
  m.impl("index_add.out", TORCH_FN(index_add_out));
  m.impl("index_copy.out", TORCH_FN(index_copy_out));
  m.impl("index.Tensor", TORCH_FN(index_tensor));
  m.impl("index.Tensor_out", TORCH_FN(index_tensor_out));
  m.impl("_index_put_impl_", TORCH_FN(index_put_impl_));
  m.impl("masked_select", TORCH_FN(masked_select_tpu));
  m.impl("nonzero", TORCH_FN(nonzero_tpu));
  m.impl("nonzero.out", TORCH_FN(nonzero_out));
  m.impl("nonzero_static", TORCH_FN(nonzero_static_tpu));
  m.impl("searchsorted.Tensor", TORCH_FN(searchsorted_tensor));
  m.impl("searchsorted.Scalar", TORCH_FN(searchsorted_scalar));
  m.impl("bucketize.Tensor", TORCH_FN(bucketize_tensor));
  m.impl("bucketize.Scalar", TORCH_FN(bucketize_scalar));
  m.impl("bincount", TORCH_FN(bincount_tpu));
  m.impl("histc", TORCH_FN(histc_tpu));
  m.impl("repeat_interleave.Tensor", TORCH_FN(repeat_interleave_tensor));
  m.impl("take", TORCH_FN(take_tpu));
  m.impl("take.out", TORCH_FN(take_out_tpu));
  m.impl("put_", TORCH_FN(put_tpu));
  m.impl("tril_indices", TORCH_FN(tril_indices_tpu));
  m.impl("triu_indices", TORCH_FN(triu_indices_tpu));
  m.impl("_unique2", TORCH_FN(unique2_tpu));
  m.impl("unique_consecutive", TORCH_FN(unique_consecutive_tpu));
  m.impl("embedding_renorm_", TORCH_FN(embedding_renorm_tpu));
  m.impl("masked_select.out", TORCH_FN(masked_select_out));
  m.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
  m.impl("index_fill_.int_Scalar", TORCH_FN(index_fill_scalar));
  m.impl("index_fill_.int_Tensor", TORCH_FN(index_fill_tensor));
  m.impl("masked_scatter_", TORCH_FN(masked_scatter_));
}

}  // namespace tpu::ops
