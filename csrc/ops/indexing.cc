// Indexing ops: index_select, gather, scatter (+ reductions), index_add,
// index_copy, advanced indexing (index / index_put_), masked_select and
// embedding's backward.
//
// Out-of-range indices: CPU raises; on the device that check would need a
// host sync per op, so it is done only where the indices are on the host
// already (CPU index tensors, bool masks we convert on the host). Indices
// that live on the device are not checked: XLA clamps a gather's start
// index into range and drops scatter updates that fall outside.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/scatter.h>
#include <ATen/ops/scatter_add.h>
#include <ATen/ops/scatter_reduce.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "ops/bridge.h"
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

void CheckIndexHost(const Tensor& index, int64_t size, const char* msg_op) {
  // Cheap only when the indices are on the host already.
  if (!index.device().is_cpu() || index.numel() == 0) return;
  const int64_t lo = index.min().item<int64_t>(), hi = index.max().item<int64_t>();
  TORCH_CHECK_INDEX(lo >= -size && hi < size, msg_op);
}

Tensor OnTpu(const Tensor& t) { return t.device().is_cpu() ? t.to(kTpu) : t; }

Tensor IndexSelectRun(const Tensor& self, int64_t dim, const Tensor& index, Tensor* out) {
  CheckTpu("index_select", self, "self");
  Tensor meta = at::index_select(MetaOf(self), dim, MetaOf(index));
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  CheckIndexHost(index, x.size(d), "index out of range in self");
  const ir::TensorType tt = TypeOf(meta.sizes(), self.scalar_type());
  if (out) {
    PrepareOut("index_select", *out, meta.sizes(), self.scalar_type());
    if (meta.numel() > 0)
      RunInto(kIndexSelect, {{d}, {}, {}}, {OperandOf(x), OperandOf(OnTpu(index))}, {tt}, {*out});
    return *out;
  }
  if (meta.numel() == 0) return EmptyTpu(meta.sizes(), self.scalar_type());
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
  Tensor meta = at::gather(MetaOf(self), dim, MetaOf(index));
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  Tensor i = index.dim() == 0 ? index.reshape({1}) : index;
  const ir::TensorType tt = TypeOf(meta.sizes(), self.scalar_type());
  if (out) {
    PrepareOut("gather", *out, meta.sizes(), self.scalar_type());
    if (meta.numel() > 0) RunInto(kGather, {{d}, {}, {}}, {OperandOf(x), OperandOf(i)}, {tt}, {*out});
    return *out;
  }
  if (meta.numel() == 0) return EmptyTpu(meta.sizes(), self.scalar_type());
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
// returns a new tensor. `meta` has run the functional op on meta tensors.
Tensor ScatterRun(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                  const c10::Scalar* value, int64_t red, bool include_self, Tensor* dst) {
  CheckTpu("scatter", self, "self");
  CheckTpu("scatter", index, "index");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  Tensor i = index.dim() == 0 ? index.reshape({1}) : index;
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
  at::scatter(MetaOf(s), dim, MetaOf(i), MetaOf(src));
  ScatterRun(s, dim, i, &src, nullptr, kNone, true, &o);
  return o;
}
Tensor& scatter_value_out(const Tensor& s, int64_t dim, const Tensor& i, const c10::Scalar& v,
                          Tensor& o) {
  at::scatter(MetaOf(s), dim, MetaOf(i), v);
  ScatterRun(s, dim, i, nullptr, &v, kNone, true, &o);
  return o;
}
Tensor& scatter_reduce_out(const Tensor& s, int64_t dim, const Tensor& i, const Tensor& src,
                           c10::string_view reduce, Tensor& o) {
  at::scatter(MetaOf(s), dim, MetaOf(i), MetaOf(src), reduce);
  ScatterRun(s, dim, i, &src, nullptr, ReduceCode(reduce, false), true, &o);
  return o;
}
Tensor& scatter_value_reduce_out(const Tensor& s, int64_t dim, const Tensor& i,
                                 const c10::Scalar& v, c10::string_view reduce, Tensor& o) {
  at::scatter(MetaOf(s), dim, MetaOf(i), v, reduce);
  ScatterRun(s, dim, i, nullptr, &v, ReduceCode(reduce, false), true, &o);
  return o;
}
Tensor& scatter_add_out(const Tensor& s, int64_t dim, const Tensor& i, const Tensor& src,
                        Tensor& o) {
  at::scatter_add(MetaOf(s), dim, MetaOf(i), MetaOf(src));
  ScatterRun(s, dim, i, &src, nullptr, kSum, true, &o);
  return o;
}
Tensor& scatter_reduce_two_out(const Tensor& s, int64_t dim, const Tensor& i, const Tensor& src,
                               c10::string_view reduce, bool include_self, Tensor& o) {
  at::scatter_reduce(MetaOf(s), dim, MetaOf(i), MetaOf(src), reduce, include_self);
  ScatterRun(s, dim, i, &src, nullptr, ReduceCode(reduce, true), include_self, &o);
  return o;
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
}

}  // namespace tpu::ops
