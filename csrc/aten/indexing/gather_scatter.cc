// Indexing along one dim: index_select, gather, scatter (+ reductions),
// index_add, index_copy, index_fill_, take and put_.
#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
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

Tensor& IndexFillRun(Tensor& self, int64_t dim, const Tensor& index_in, lazy::Operand value) {
  CheckTpu("index_fill_", self, "self");
  // An index on the host is taken, as CPU takes it (it is only read).
  TORCH_CHECK(index_in.device().is_cpu() || index_in.device() == self.device(),
              "index_fill_: expected the index on ", self.device(), " or the CPU, got ",
              index_in.device());
  const Tensor index = OnTpu(index_in);
  TORCH_CHECK_INDEX(index.dim() <= 1, "Index has to be a vector/scalar");
  TORCH_CHECK(index.scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (self.numel() > 0) {
    const int64_t size = self.dim() == 0 ? 1 : self.size(d);
    CheckIndexRange(OutOfBoundsRule("aten::index_fill_", true, true, d, size), index, size);
  }
  const bool expanded = WarnIfExpandedWrite(self, "index_fill_", "tensor[mask] = scalar");
  at::assert_no_overlap(self, index);
  if (index.numel() == 0 || self.numel() == 0) return self;
  Tensor x = self.dim() == 0 ? self.view({1}) : self;
  RunInto(kIndexFill, {{d}, {}, {}}, {OperandOf(x), OperandOf(index), value},
          {TypeOf(x.sizes(), self.scalar_type())}, {x}, expanded);
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
  // repeated indices leave which value lands unspecified, on every device
  if (!accumulate) at::globalContext().alertNotDeterministic("put_");
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
  m.impl("take", TORCH_FN(take_tpu));
  m.impl("take.out", TORCH_FN(take_out_tpu));
  m.impl("put_", TORCH_FN(put_tpu));
  m.impl("index_fill_.int_Scalar", TORCH_FN(index_fill_scalar));
  m.impl("index_fill_.int_Tensor", TORCH_FN(index_fill_tensor));
}

}  // namespace tpu::ops
