// Reductions: sum, mean, amax/amin, max/min (with indices), argmax/argmin.
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/ops/dot.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/zeros.h>
#include <ATen/native/Resize.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/complex.h"

namespace tpu::ops {

namespace {

enum ReduceKind : int64_t { kSum = 0, kMean = 1, kMax = 2, kMin = 3, kProd = 4, kAny = 5, kAll = 6 };

// ints = (kind, accumulate dtype, dims...). The result is reshaped to the
// output type, which carries keepdim's size-1 dims.
VS LowerReduce(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto kind = static_cast<ReduceKind>(a.ints[0]);
  const auto acc = static_cast<DType>(a.ints[1]);
  ir::Dims dims(a.ints.begin() + 2, a.ints.end());
  Value x = ir::Convert(b, in[0], acc);
  Value init;
  std::string body;
  switch (kind) {
    case kSum: case kMean: init = ir::ConstantI(b, 0, acc); body = "stablehlo.add"; break;
    case kProd: init = ir::ConstantI(b, 1, acc); body = "stablehlo.multiply"; break;
    case kMax: init = ir::MinValue(b, acc); body = "stablehlo.maximum"; break;
    case kMin: init = ir::MaxValue(b, acc); body = "stablehlo.minimum"; break;
    case kAny: init = ir::ConstantI(b, 0, acc); body = "stablehlo.or"; break;
    case kAll: init = ir::ConstantI(b, 1, acc); body = "stablehlo.and"; break;
  }
  Value r = ir::Reduce(b, x, init, dims, body);
  if (kind == kMean) r = ir::Binary(b, "stablehlo.divide", r, ir::CountOver(b, x, dims));
  return {ir::Reshape(b, ir::Convert(b, r, out[0].dtype), out[0].dims)};
}
constexpr lazy::Lowering kReduce{"aten::reduce", &LowerReduce};

struct ReduceMeta {
  std::vector<int64_t> dims;   // sorted, wrapped
  std::vector<int64_t> sizes;  // result sizes
};

ReduceMeta MetaFor(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  ReduceMeta m;
  const int64_t nd = self.dim();
  if (nd == 0) {
    // A 0-d tensor reduces over nothing; dim 0 / -1 are accepted as on CPU.
    if (dim.has_value())
      for (int64_t d : *dim) at::maybe_wrap_dim(d, static_cast<int64_t>(0));
    return m;
  }
  std::vector<bool> reduced(nd, true);
  if (dim.has_value() && !dim->empty()) {
    // ATen's own mask: its 64-dim limit and duplicate-dim messages.
    const auto bits = at::dim_list_to_bitset(*dim, nd);
    for (int64_t i = 0; i < nd; ++i) reduced[i] = bits[i];
  }
  for (int64_t i = 0; i < nd; ++i) {
    if (reduced[i]) {
      m.dims.push_back(i);
      if (keepdim) m.sizes.push_back(1);
    } else {
      m.sizes.push_back(self.size(i));
    }
  }
  return m;
}

lazy::Attrs ReduceAttrs(ReduceKind k, at::ScalarType acc, const ReduceMeta& m) {
  lazy::Attrs a;
  a.ints = {k, static_cast<int64_t>(ToIr(acc))};
  a.ints.insert(a.ints.end(), m.dims.begin(), m.dims.end());
  return a;
}

at::ScalarType SumType(const Tensor& self, std::optional<at::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type();
}

Tensor sum_dim(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
               std::optional<at::ScalarType> dtype) {
  CheckTpu("sum", self, "self");
  ReduceMeta m = MetaFor(self, dim, keepdim);
  const auto rt = SumType(self, dtype);
  return Run1(kReduce, ReduceAttrs(kSum, OpMathType(rt), m), {OperandOf(self)}, TypeOf(m.sizes, rt));
}
Tensor& sum_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                std::optional<at::ScalarType> dtype, Tensor& out) {
  ReduceMeta m = MetaFor(self, dim, keepdim);
  const auto rt = dtype.value_or(out.scalar_type());
  PrepareOut("sum", out, m.sizes, rt);
  RunInto(kReduce, ReduceAttrs(kSum, OpMathType(rt), m), {OperandOf(self)}, {TypeOf(m.sizes, rt)},
          {out});
  return out;
}

Tensor prod_all(const Tensor& self, std::optional<at::ScalarType> dtype) {
  CheckTpu("prod", self, "self");
  ReduceMeta m = MetaFor(self, std::nullopt, false);
  const auto rt = SumType(self, dtype);
  return Run1(kReduce, ReduceAttrs(kProd, OpMathType(rt), m), {OperandOf(self)},
              TypeOf(m.sizes, rt));
}
Tensor& prod_dim_out(const Tensor& self, int64_t dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, Tensor& out) {
  CheckTpu("prod", self, "self");
  ReduceMeta m = MetaFor(self, at::IntArrayRef{dim}, keepdim);
  const auto rt = dtype.value_or(out.scalar_type());
  PrepareOut("prod", out, m.sizes, rt);
  RunInto(kReduce, ReduceAttrs(kProd, OpMathType(rt), m), {OperandOf(self)},
          {TypeOf(m.sizes, rt)}, {out});
  return out;
}
Tensor prod_dim(const Tensor& self, int64_t dim, bool keepdim,
                std::optional<at::ScalarType> dtype) {
  CheckTpu("prod", self, "self");
  ReduceMeta m = MetaFor(self, at::IntArrayRef{dim}, keepdim);
  const auto rt = SumType(self, dtype);
  return Run1(kReduce, ReduceAttrs(kProd, OpMathType(rt), m), {OperandOf(self)},
              TypeOf(m.sizes, rt));
}

at::ScalarType MeanType(const Tensor& self, std::optional<at::ScalarType> dtype) {
  const auto rt = dtype.value_or(self.scalar_type());
  TORCH_CHECK(at::isFloatingType(rt) || at::isComplexType(rt),
              "mean(): could not infer output dtype. ",
              (dtype.has_value() ? "Optional" : "Input"),
              " dtype must be either a floating point or complex dtype. Got: ", rt);
  return rt;
}
Tensor mean_dim(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                std::optional<at::ScalarType> dtype) {
  CheckTpu("mean", self, "self");
  const auto rt = MeanType(self, dtype);
  ReduceMeta m = MetaFor(self, dim, keepdim);
  return Run1(kReduce, ReduceAttrs(kMean, OpMathType(rt), m), {OperandOf(self)},
              TypeOf(m.sizes, rt));
}
Tensor& mean_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                 std::optional<at::ScalarType> dtype, Tensor& out) {
  const auto rt = MeanType(self, dtype.has_value() ? dtype : out.scalar_type());
  ReduceMeta m = MetaFor(self, dim, keepdim);
  PrepareOut("mean", out, m.sizes, rt);
  RunInto(kReduce, ReduceAttrs(kMean, OpMathType(rt), m), {OperandOf(self)}, {TypeOf(m.sizes, rt)},
          {out});
  return out;
}

Tensor Extreme(const char* name, ReduceKind k, const Tensor& self, at::OptionalIntArrayRef dim,
               bool keepdim) {
  CheckTpu(name, self, "self");
  ReduceMeta m = MetaFor(self, dim, keepdim);
  if (self.numel() == 0) {
    // As CPU: an empty slice has no extreme (IndexError); reducing only the
    // non-empty dims of an empty tensor gives an empty result.
    TORCH_CHECK(dim.has_value() && !dim->empty() && self.dim() > 0, name,
                "(): Expected reduction dim to be specified for input.numel() == 0."
                " Specify the reduction dim with the 'dim' argument.");
    for (int64_t d : m.dims)
      TORCH_CHECK_INDEX(self.size(d) != 0, name, "(): Expected reduction dim ", d,
                        " to have non-zero size.");
    return EmptyTpu(m.sizes, self.scalar_type());
  }
  return Run1(kReduce, ReduceAttrs(k, self.scalar_type(), m), {OperandOf(self)},
              TypeOf(m.sizes, self.scalar_type()));
}
Tensor amax(const Tensor& s, at::IntArrayRef dim, bool keepdim) {
  return Extreme("amax", kMax, s, dim, keepdim);
}
Tensor amin(const Tensor& s, at::IntArrayRef dim, bool keepdim) {
  return Extreme("amin", kMin, s, dim, keepdim);
}
Tensor max_all(const Tensor& s) { return Extreme("max", kMax, s, std::nullopt, false); }
Tensor min_all(const Tensor& s) { return Extreme("min", kMin, s, std::nullopt, false); }

Tensor BoolReduce(const char* name, ReduceKind k, const Tensor& self, at::OptionalIntArrayRef dim,
                  bool keepdim) {
  CheckTpu(name, self, "self");
  ReduceMeta m = MetaFor(self, dim, keepdim);
  const auto rt = self.scalar_type() == at::kByte ? at::kByte : at::kBool;
  return Run1(kReduce, ReduceAttrs(k, at::kBool, m), {OperandOf(self)}, TypeOf(m.sizes, rt));
}
// all / any with dim=[]: nothing is reduced (as CPU), each element tested.
Tensor NoDimsBool(const Tensor& s) {
  Tensor r = at::ne(s, 0);
  return s.scalar_type() == at::kByte ? r.to(at::kByte) : r;
}
// The out= forms: the result is bool or uint8, the out tensor's dtype.
Tensor& BoolReduceOut(const char* name, ReduceKind k, const Tensor& self,
                      at::OptionalIntArrayRef dim, bool keepdim, Tensor& out) {
  CheckTpu(name, self, "self");
  TORCH_CHECK(out.scalar_type() == at::kBool || out.scalar_type() == at::kByte, name,
              " only supports bool tensor for result, got: ", out.scalar_type());
  if (dim.has_value() && dim->empty()) {
    Tensor r = NoDimsBool(self);
    PrepareOut(name, out, r.sizes(), out.scalar_type());
    return out.copy_(r);
  }
  ReduceMeta m = MetaFor(self, dim, keepdim);
  PrepareOut(name, out, m.sizes, out.scalar_type());
  RunInto(kReduce, ReduceAttrs(k, at::kBool, m), {OperandOf(self)},
          {TypeOf(m.sizes, out.scalar_type())}, {out});
  return out;
}
Tensor any_dims(const Tensor& s, at::OptionalIntArrayRef d, bool k) {
  if (d.has_value() && d->empty()) return NoDimsBool(s);
  return BoolReduce("any", kAny, s, d, k);
}
Tensor all_dims(const Tensor& s, at::OptionalIntArrayRef d, bool k) {
  if (d.has_value() && d->empty()) return NoDimsBool(s);
  return BoolReduce("all", kAll, s, d, k);
}
Tensor& any_out(const Tensor& s, int64_t d, bool k, Tensor& o) {
  return BoolReduceOut("any", kAny, s, at::IntArrayRef{d}, k, o);
}
Tensor& all_out(const Tensor& s, int64_t d, bool k, Tensor& o) {
  return BoolReduceOut("all", kAll, s, at::IntArrayRef{d}, k, o);
}
Tensor& any_dims_out(const Tensor& s, at::OptionalIntArrayRef d, bool k, Tensor& o) {
  return BoolReduceOut("any", kAny, s, d, k, o);
}
Tensor& all_dims_out(const Tensor& s, at::OptionalIntArrayRef d, bool k, Tensor& o) {
  return BoolReduceOut("all", kAll, s, d, k, o);
}
Tensor& any_all_out(const Tensor& s, Tensor& o) { return BoolReduceOut("any", kAny, s, std::nullopt, false, o); }
Tensor& all_all_out(const Tensor& s, Tensor& o) { return BoolReduceOut("all", kAll, s, std::nullopt, false, o); }
Tensor any_all(const Tensor& s) { return BoolReduce("any", kAny, s, std::nullopt, false); }
Tensor all_all(const Tensor& s) { return BoolReduce("all", kAll, s, std::nullopt, false); }
Tensor any_dim(const Tensor& s, int64_t d, bool k) {
  return BoolReduce("any", kAny, s, at::IntArrayRef{d}, k);
}
Tensor all_dim(const Tensor& s, int64_t d, bool k) {
  return BoolReduce("all", kAll, s, at::IntArrayRef{d}, k);
}

// ---- values and indices along one dim ----

// ints = (dim, is_max); outputs (values, indices) shaped as the out types.
VS LowerArgReduce(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  auto [v, i] = ir::ArgReduce(b, in[0], a.ints[0], a.ints[1] != 0);
  return {ir::Reshape(b, v, out[0].dims), ir::Reshape(b, i, out[1].dims)};
}
constexpr lazy::Lowering kArgReduce{"aten::max.dim", &LowerArgReduce};

std::tuple<Tensor, Tensor> MaxMinDim(const char* name, bool is_max, const Tensor& self,
                                     int64_t dim, bool keepdim) {
  CheckTpu(name, self, "self");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(self.dim() == 0 || self.size(d) > 0, name, "(): Expected reduction dim ", d,
              " to have non-zero size.");
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  ReduceMeta m = MetaFor(self, at::IntArrayRef{d}, keepdim);
  if (self.dim() == 0) m.sizes = {};
  auto r = Run(kArgReduce, {{self.dim() == 0 ? 0 : d, is_max ? 1 : 0}, {}, {}}, {OperandOf(x)},
               {TypeOf(m.sizes, self.scalar_type()), TypeOf(m.sizes, at::kLong)});
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> max_dim(const Tensor& s, int64_t dim, bool keepdim) {
  return MaxMinDim("max", true, s, dim, keepdim);
}
std::tuple<Tensor, Tensor> min_dim(const Tensor& s, int64_t dim, bool keepdim) {
  return MaxMinDim("min", false, s, dim, keepdim);
}
std::tuple<Tensor&, Tensor&> max_dim_out(const Tensor& s, int64_t dim, bool keepdim, Tensor& v,
                                         Tensor& i) {
  auto [rv, ri] = max_dim(s, dim, keepdim);
  at::native::resize_output(v, rv.sizes());
  at::native::resize_output(i, ri.sizes());
  v.copy_(rv);
  i.copy_(ri);
  return {v, i};
}
std::tuple<Tensor&, Tensor&> min_dim_out(const Tensor& s, int64_t dim, bool keepdim, Tensor& v,
                                         Tensor& i) {
  auto [rv, ri] = min_dim(s, dim, keepdim);
  at::native::resize_output(v, rv.sizes());
  at::native::resize_output(i, ri.sizes());
  v.copy_(rv);
  i.copy_(ri);
  return {v, i};
}

Tensor ArgMaxMin(const char* name, bool is_max, const Tensor& self, std::optional<int64_t> dim,
                 bool keepdim) {
  if (!dim.has_value()) {
    Tensor r = std::get<1>(MaxMinDim(name, is_max, self.reshape({-1}), 0, false));
    if (keepdim) r = r.reshape(std::vector<int64_t>(self.dim(), 1));
    return r;
  }
  return std::get<1>(MaxMinDim(name, is_max, self, *dim, keepdim));
}
Tensor Argmax(const Tensor& s, std::optional<int64_t> dim, bool keepdim) {
  return ArgMaxMin("argmax", true, s, dim, keepdim);
}
Tensor Argmin(const Tensor& s, std::optional<int64_t> dim, bool keepdim) {
  return ArgMaxMin("argmin", false, s, dim, keepdim);
}
// out= of argmax/argmin: the dtype structured kernels require, with their message.
void CheckIndexOut(const char* op, const Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, op, ": Expected out tensor to have dtype long int, "
              "but got ", out.dtype(), " instead");
}
Tensor& argmax_out(const Tensor& s, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  Tensor r = Argmax(s, dim, keepdim);
  CheckIndexOut("argmax", out);
  PrepareOut("argmax", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}
Tensor& argmin_out(const Tensor& s, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  Tensor r = Argmin(s, dim, keepdim);
  CheckIndexOut("argmin", out);
  PrepareOut("argmin", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}


// ---- vector norms, equal, vdot ----

// ins = (x); ints = (accumulate dtype, dims...); floats = (ord).
VS LowerVectorNorm(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto acc = static_cast<DType>(a.ints[0]);
  ir::Dims dims(a.ints.begin() + 1, a.ints.end());
  const double ord = a.floats[0];
  Value x = ir::Convert(b, in[0], acc);
  const ir::TensorType xt = b.type(x);
  auto c = [&](double v, const ir::Dims& d) { return ir::Full(b, ir::ConstantF(b, v, acc), d); };
  Value ab = ir::Unary(b, "stablehlo.abs", x);
  Value r;
  if (std::isinf(ord)) {
    r = ord > 0 ? ir::Reduce(b, ab, ir::ConstantF(b, 0.0, acc), dims, "stablehlo.maximum")
                : ir::Reduce(b, ab, ir::MaxValue(b, acc), dims, "stablehlo.minimum");
  } else if (ord == 0) {
    r = ir::Reduce(b, ir::Convert(b, ir::Compare(b, x, c(0, xt.dims), ir::Cmp::NE), acc),
                   ir::ConstantF(b, 0.0, acc), dims, "stablehlo.add");
  } else if (ord == 1) {
    r = ir::Reduce(b, ab, ir::ConstantF(b, 0.0, acc), dims, "stablehlo.add");
  } else if (ord == 2) {
    r = ir::Reduce(b, ir::Binary(b, "stablehlo.multiply", ab, ab), ir::ConstantF(b, 0.0, acc),
                   dims, "stablehlo.add");
    r = ir::Unary(b, "stablehlo.sqrt", r);
  } else {
    r = ir::Reduce(b, ir::Binary(b, "stablehlo.power", ab, c(ord, xt.dims)),
                   ir::ConstantF(b, 0.0, acc), dims, "stablehlo.add");
    r = ir::Binary(b, "stablehlo.power", r, c(1.0 / ord, b.type(r).dims));
  }
  return {ir::Reshape(b, ir::Convert(b, r, out[0].dtype), out[0].dims)};
}
constexpr lazy::Lowering kVectorNorm{"aten::linalg_vector_norm", &LowerVectorNorm};

// Result dtype and the validation of linalg.vector_norm.
at::ScalarType NormType(const char* op, const Tensor& self, std::optional<at::ScalarType> dtype) {
  CheckTpu(op, self, "self");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              op, ": Expected a floating point or complex tensor as input. Got ",
              self.scalar_type());
  if (at::isComplexType(self.scalar_type())) {
    // The norm of |z|: a real result of the matching precision.
    if (dtype.has_value()) {
      TORCH_CHECK(at::isComplexType(*dtype), op, ": dtype should be complex for complex input, but got ",
                  *dtype);
      return c10::toRealValueType(*dtype);
    }
    return c10::toRealValueType(self.scalar_type());
  }
  if (dtype.has_value()) {
    TORCH_CHECK(at::isFloatingType(*dtype), op, ": dtype should be floating point, but got ",
                *dtype);
    return *dtype;
  }
  return self.scalar_type();
}

void VectorNormInto(const char* op, const Tensor& self_in, double ord, at::OptionalIntArrayRef dim,
                    bool keepdim, at::ScalarType rt, const Tensor* out, Tensor* result) {
  const Tensor self = self_in.is_complex() ? ComplexToReal("abs", self_in) : self_in;
  ReduceMeta m = MetaFor(self, dim, keepdim);
  if (self.numel() == 0 && (ord < 0 || std::isinf(ord))) {
    // No identity for these norms: an empty reduced dimension is an error
    // (CPU's words, the missing space included).
    auto ord_str = [&] { return std::isinf(ord) ? std::string(ord > 0 ? "inf" : "-inf") : c10::str(ord); };
    if (!dim.has_value() || dim->empty())
      TORCH_CHECK(false, "linalg.vector_norm cannot compute the ", ord_str(),
                  " norm on an empty tensor because the operation does not have an identity");
    for (int64_t d : *dim) {
      const int64_t w = c10::maybe_wrap_dim(d, self.dim());
      TORCH_CHECK(self.size(w) != 0, "linalg.vector_norm cannot compute the ", ord_str(),
                  " norm on the dimension ", w, "because this dimension is empty and the operation "
                  "does not have an identity");
    }
  }
  lazy::Attrs a{{static_cast<int64_t>(ToIr(OpMathType(rt)))}, {ord}, {}};
  a.ints.insert(a.ints.end(), m.dims.begin(), m.dims.end());
  if (out) {
    PrepareOut(op, *out, m.sizes, rt);
    RunInto(kVectorNorm, a, {OperandOf(self)}, {TypeOf(m.sizes, rt)}, {*out});
  } else {
    *result = Run1(kVectorNorm, a, {OperandOf(self)}, TypeOf(m.sizes, rt));
  }
}

Tensor linalg_vector_norm(const Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim,
                          bool keepdim, std::optional<at::ScalarType> dtype) {
  const auto rt = NormType("linalg.vector_norm", self, dtype);
  Tensor r;
  VectorNormInto("linalg.vector_norm", self, ord.toDouble(), dim, keepdim, rt, nullptr, &r);
  return r;
}
Tensor& linalg_vector_norm_out(const Tensor& self, const c10::Scalar& ord,
                               at::OptionalIntArrayRef dim, bool keepdim,
                               std::optional<at::ScalarType> dtype, Tensor& out) {
  const auto rt = NormType("linalg.vector_norm", self, dtype);
  VectorNormInto("linalg.vector_norm", self, ord.toDouble(), dim, keepdim, rt, &out, nullptr);
  return out;
}
Tensor& norm_out(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim,
                 bool keepdim, Tensor& out) {
  const auto rt = NormType("norm", self, std::nullopt);
  VectorNormInto("norm", self, p.has_value() ? p->toDouble() : 2.0, dim, keepdim, rt, &out,
                 nullptr);
  return out;
}
Tensor& norm_dtype_out(const Tensor& self, const std::optional<c10::Scalar>& p,
                       at::IntArrayRef dim, bool keepdim, at::ScalarType dtype, Tensor& out) {
  const auto rt = NormType("norm", self, dtype);
  VectorNormInto("norm", self, p.has_value() ? p->toDouble() : 2.0, dim, keepdim, rt, &out,
                 nullptr);
  return out;
}

bool equal_tpu(const Tensor& self, const Tensor& other) {
  CheckTpu("equal", self, "self");
  CheckTpu("equal", other, "other");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "Expected object of scalar type ",
              self.scalar_type(), " but got scalar type ", other.scalar_type(),
              " for argument 'other'");
  if (self.sizes() != other.sizes()) return false;
  if (self.numel() == 0) return true;
  return all_all(at::eq(self, other)).item<bool>();
}

Tensor vdot_tpu(const Tensor& self, const Tensor& other) {
  CheckTpu("vdot", self, "self");
  CheckTpu("vdot", other, "other");
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(),
              "D and ", other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(),
              "vdot : expected both vectors to have same dtype, but found ", self.scalar_type(),
              " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [",
              self.numel(), "] and src [", other.numel(),
              "] to have the same number of elements, but got ", self.numel(), " and ",
              other.numel(), " elements respectively");
  return at::dot(self.is_complex() ? self.conj() : self, other);
}

// ---- scans with a custom combiner: logcumsumexp, cummax / cummin ----

// Inclusive scan along `dim` as a reduce_window spanning the whole dim,
// padded below with `inits` (one per operand).
std::vector<Value> Scan(Builder& b, const std::vector<Value>& xs, const std::vector<Value>& inits,
                        int64_t dim, const ir::RegionFn& body) {
  const ir::TensorType t = b.type(xs[0]);
  const int64_t r = t.rank(), n = t.dims[dim];
  if (xs.size() > 1) {
    // A scan of several operands (values and indices) as log2(n) doubling
    // steps of elementwise combines (Hillis-Steele): XLA CPU's rewrite of
    // long variadic reduce_windows fails to compile (a shape RET_CHECK at
    // n = 100). `body` then combines whole tensors, so it must not make
    // constants of its own.
    std::vector<Value> acc = xs;
    for (int64_t step = 1; step < n; step *= 2) {
      std::vector<Value> args = acc;
      for (size_t i = 0; i < acc.size(); ++i) {
        ir::Dims lo(r, 0), hi(r, 0), limit = b.type(acc[i]).dims;
        lo[dim] = step;
        limit[dim] = n - step;
        Value head = ir::Slice(b, acc[i], ir::Dims(r, 0), limit, ir::Dims(r, 1));
        args.push_back(ir::Pad(b, head, inits[i], lo, hi, ir::Dims(r, 0)));
      }
      acc = body(b, args);
    }
    return acc;
  }
  ir::Window w{ir::Dims(r, 1), ir::Dims(r, 1), ir::Dims(r, 1), ir::Dims(r, 0), ir::Dims(r, 0)};
  w.dims[dim] = n;
  w.pad_lo[dim] = n - 1;
  return ir::ReduceWindow(b, xs, inits, w, body);
}

// ins = (x); ints = (dim, compute dtype)
VS LowerLogCumSumExp(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto ct = static_cast<DType>(a.ints[1]);
  Value x = ir::Convert(b, in[0], ct);
  Value r = Scan(b, {x}, {ir::MinValue(b, ct)}, a.ints[0], [](Builder& rb, const VS& v) {
    Value m = ir::Max(rb, v[0], v[1]);
    Value d = ir::Unary(rb, "stablehlo.negate",
                        ir::Unary(rb, "stablehlo.abs", ir::Binary(rb, "stablehlo.subtract", v[0], v[1])));
    Value l = ir::Binary(rb, "stablehlo.add", m,
                         ir::Unary(rb, "stablehlo.log_plus_one", ir::Unary(rb, "stablehlo.exponential", d)));
    // Equal operands (also both infinite): x + log 2.
    Value same = ir::Binary(rb, "stablehlo.add", v[0],
                            ir::ConstantF(rb, M_LN2, rb.type(v[0]).dtype));
    return VS{ir::Select(rb, ir::Compare(rb, v[0], v[1], ir::Cmp::EQ), same, l)};
  })[0];
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kLogCumSumExp{"aten::_logcumsumexp", &LowerLogCumSumExp};

Tensor logcumsumexp_tpu(const Tensor& self, int64_t dim) {
  CheckTpu("logcumsumexp", self, "self");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "logcumsumexp(): expected a floating point input, got ", self.scalar_type());
  if (self.dim() == 0) return self.clone();
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  if (self.numel() == 0) return EmptyTpu(self.sizes(), self.scalar_type());
  return Run1(kLogCumSumExp, {{d, IrCode(OpMathType(self.scalar_type()))}, {}, {}},
              {OperandOf(self)}, TypeOf(self.sizes(), self.scalar_type()));
}
Tensor& logcumsumexp_out_tpu(const Tensor& self, int64_t dim, Tensor& out) {
  Tensor r = logcumsumexp_tpu(self, dim);
  PrepareOut("logcumsumexp", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

// ins = (x); ints = (dim, is_max); out = (values, indices s64). CPU keeps the
// last index among equal values, and NaN, once seen, stays.
VS LowerCumExtreme(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t dim = a.ints[0];
  const bool is_max = a.ints[1] != 0;
  const ir::TensorType t = b.type(in[0]);
  Value idx = ir::Iota(b, t.dims, dim, DType::S64);
  const bool is_float = ir::IsFloat(t.dtype);
  auto r = Scan(b, {in[0], idx},
                {is_max ? ir::MinValue(b, t.dtype) : ir::MaxValue(b, t.dtype),
                 ir::ConstantI(b, -1, DType::S64)},
                dim, [is_max, is_float](Builder& rb, const VS& v) {
                  Value av = v[0], ai = v[1], bv = v[2], bi = v[3];
                  // a wins if it is "more extreme", or equal with a later index.
                  Value better = ir::Compare(rb, av, bv, is_max ? ir::Cmp::GT : ir::Cmp::LT);
                  Value tie = ir::Binary(rb, "stablehlo.and", ir::Compare(rb, av, bv, ir::Cmp::EQ),
                                         ir::Compare(rb, ai, bi, ir::Cmp::GT));
                  Value pick = ir::Binary(rb, "stablehlo.or", better, tie);
                  if (is_float) {
                    Value an = ir::Compare(rb, av, av, ir::Cmp::NE);
                    Value bn = ir::Compare(rb, bv, bv, ir::Cmp::NE);
                    Value both = ir::Binary(rb, "stablehlo.and", an, bn);
                    Value later = ir::Compare(rb, ai, bi, ir::Cmp::GT);
                    pick = ir::Select(rb, both, later,
                                      ir::Select(rb, an, an, ir::Binary(rb, "stablehlo.and",
                                                                        ir::Unary(rb, "stablehlo.not", bn), pick)));
                  }
                  return VS{ir::Select(rb, pick, av, bv), ir::Select(rb, pick, ai, bi)};
                });
  return {ir::Convert(b, r[0], out[0].dtype), r[1]};
}
constexpr lazy::Lowering kCumExtreme{"aten::_cummax_helper", &LowerCumExtreme};

void CumExtremeHelper(const Tensor& self, Tensor& values, Tensor& indices, int64_t dim,
                      bool is_max) {
  const char* op = is_max ? "cummax" : "cummin";
  CheckTpu(op, self, "self");
  if (self.numel() == 0) return;
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  const int64_t d = self.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, self.dim());
  Tensor v = values.dim() == 0 ? values.reshape({1}) : values;
  Tensor i = indices.dim() == 0 ? indices.reshape({1}) : indices;
  RunInto(kCumExtreme, {{d, is_max ? 1 : 0}, {}, {}}, {OperandOf(x)},
          {TypeOf(x.sizes(), values.scalar_type()), TypeOf(x.sizes(), at::kLong)}, {v, i});
}
void cummax_helper_tpu(const Tensor& self, Tensor& values, Tensor& indices, int64_t dim) {
  CumExtremeHelper(self, values, indices, dim, true);
}
void cummin_helper_tpu(const Tensor& self, Tensor& values, Tensor& indices, int64_t dim) {
  CumExtremeHelper(self, values, indices, dim, false);
}

// ---- median, kthvalue: a sort along the dim, NaN last ----

// ins = (x [.., n, ..]); ints = (dim, k (0-based), nan_propagates); out =
// (values, indices) with dim removed. The k-th smallest of a stable sort;
// with nan_propagates (median), a NaN anywhere in the slice gives NaN and
// its first index.
VS LowerKth(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t dim = a.ints[0], k = a.ints[1];
  const ir::TensorType t = b.type(in[0]);
  const bool is_float = ir::IsFloat(t.dtype);
  Value idx = ir::Iota(b, t.dims, dim, DType::S64);
  auto sorted = ir::Sort(b, {in[0], idx}, dim, true, [is_float](Builder& rb, const VS& v) {
    Value lt = ir::Compare(rb, v[0], v[1], ir::Cmp::LT);
    if (!is_float) return VS{lt};
    Value an = ir::Compare(rb, v[0], v[0], ir::Cmp::NE);
    Value bn = ir::Compare(rb, v[1], v[1], ir::Cmp::NE);
    // a < b, or b is NaN and a is not.
    return VS{ir::Binary(rb, "stablehlo.or", lt,
                         ir::Binary(rb, "stablehlo.and", bn, ir::Unary(rb, "stablehlo.not", an)))};
  });
  ir::Dims start(t.rank(), 0), limit = t.dims, one(t.rank(), 1);
  start[dim] = k;
  limit[dim] = k + 1;
  Value v = ir::Reshape(b, ir::Slice(b, sorted[0], start, limit, one), out[0].dims);
  Value i = ir::Reshape(b, ir::Slice(b, sorted[1], start, limit, one), out[1].dims);
  if (a.ints[2] == 2) {  // nanmedian: the lower median of the non-NaN values of each slice
    ir::Dims keep;
    for (int64_t j = 0; j < t.rank(); ++j)
      if (j != dim) keep.push_back(j);
    Value valid = ir::Convert(b, ir::Compare(b, in[0], in[0], ir::Cmp::EQ), DType::S64);
    Value cnt = ir::Reduce(b, valid, ir::ConstantI(b, 0, DType::S64), {dim}, "stablehlo.add");
    const ir::Dims cd = b.type(cnt).dims;
    Value kk = ir::Binary(b, "stablehlo.divide",
                          ir::Binary(b, "stablehlo.maximum",
                                     ir::Binary(b, "stablehlo.subtract", cnt, ir::Full(b, ir::ConstantI(b, 1, DType::S64), cd)),
                                     ir::Full(b, ir::ConstantI(b, 0, DType::S64), cd)),
                          ir::Full(b, ir::ConstantI(b, 2, DType::S64), cd));
    Value pick = ir::Compare(b, ir::Iota(b, t.dims, dim, DType::S64), ir::BroadcastInDim(b, kk, t.dims, keep),
                             ir::Cmp::EQ);
    Value zv = ir::Full(b, ir::ConstantI(b, 0, t.dtype), t.dims);
    Value zi = ir::Full(b, ir::ConstantI(b, 0, DType::S64), t.dims);
    v = ir::Reshape(b, ir::Reduce(b, ir::Select(b, pick, sorted[0], zv), ir::ConstantI(b, 0, t.dtype), {dim},
                                  "stablehlo.add"), out[0].dims);
    // All-NaN slices: the sorted first element (a NaN).
    Value first = ir::Reshape(b, ir::Slice(b, sorted[0], ir::Dims(t.rank(), 0), [&] {
      ir::Dims l = t.dims;
      l[dim] = 1;
      return l;
    }(), one), out[0].dims);
    Value none = ir::Compare(b, ir::Reshape(b, cnt, out[0].dims),
                             ir::Full(b, ir::ConstantI(b, 0, DType::S64), out[0].dims), ir::Cmp::EQ);
    v = ir::Select(b, none, first, v);
    i = ir::Reshape(b, ir::Reduce(b, ir::Select(b, pick, sorted[1], zi), ir::ConstantI(b, 0, DType::S64), {dim},
                                  "stablehlo.add"), out[1].dims);
  } else if (a.ints[2] && is_float) {
    const int64_t n = t.dims[dim];
    ir::Dims first = t.dims, fs(t.rank(), 0);
    fs[dim] = n - 1;  // NaNs sort last: the last element is NaN if any is
    Value lastv = ir::Reshape(b, ir::Slice(b, sorted[0], fs, t.dims, one), out[0].dims);
    Value nan = ir::Compare(b, lastv, lastv, ir::Cmp::NE);
    // The first NaN's position: the first sorted slot holding a NaN.
    Value isnan = ir::Compare(b, sorted[0], sorted[0], ir::Cmp::NE);
    Value pos = ir::Select(b, isnan, sorted[1],
                           ir::Full(b, ir::ConstantI(b, std::numeric_limits<int64_t>::max(), DType::S64), t.dims));
    Value nan_idx = ir::Reshape(b, ir::Reduce(b, pos, ir::ConstantI(b, std::numeric_limits<int64_t>::max(), DType::S64),
                                              {dim}, "stablehlo.minimum"), out[1].dims);
    v = ir::Select(b, nan, lastv, v);
    i = ir::Select(b, nan, nan_idx, i);
  }
  return {v, i};
}
constexpr lazy::Lowering kKth{"aten::kthvalue", &LowerKth};

std::tuple<Tensor, Tensor> KthAlong(const char* op, const Tensor& self, int64_t k0, int64_t dim,
                                    bool keepdim, int64_t nan_mode) {
  CheckTpu(op, self, "self");
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  const int64_t d = at::maybe_wrap_dim(dim, x.dim());
  TORCH_CHECK_INDEX(x.size(d) > 0, op, "(): Expected reduction dim ", d, " to have non-zero size.");
  std::vector<int64_t> os;
  for (int64_t j = 0; j < x.dim(); ++j)
    if (j != d) os.push_back(x.size(j));
  if (c10::multiply_integers(os) == 0) {  // other dims empty: an empty result
    std::vector<int64_t> ks = os;
    if (keepdim) ks.insert(ks.begin() + d, 1);
    return {EmptyTpu(ks, self.scalar_type()), EmptyTpu(ks, at::kLong)};
  }
  auto r = Run(kKth, {{d, k0, nan_mode}, {}, {}}, {OperandOf(x)},
               {TypeOf(os, self.scalar_type()), TypeOf(os, at::kLong)});
  Tensor v = r[0], i = r[1];
  if (self.dim() == 0) return {v.reshape({}), i.reshape({})};
  if (keepdim) {
    v = v.unsqueeze(d);
    i = i.unsqueeze(d);
  }
  return {v, i};
}

std::tuple<Tensor, Tensor> kthvalue_tpu(const Tensor& self, int64_t k, int64_t dim, bool keepdim) {
  const int64_t n = self.dim() == 0 ? 1 : self.size(at::maybe_wrap_dim(dim, self.dim()));
  TORCH_CHECK_INDEX(n > 0, "kthvalue(): Expected reduction dim ", at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1)),
                    " to have non-zero size.");
  TORCH_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ", dim);
  return KthAlong("kthvalue", self, k - 1, dim, keepdim, 0);
}
std::tuple<Tensor&, Tensor&> kthvalue_out_tpu(const Tensor& self, int64_t k, int64_t dim,
                                              bool keepdim, Tensor& v, Tensor& i) {
  auto [rv, ri] = kthvalue_tpu(self, k, dim, keepdim);
  at::native::resize_output(v, rv.sizes());
  at::native::resize_output(i, ri.sizes());
  v.copy_(rv);
  i.copy_(ri);
  return {v, i};
}
std::tuple<Tensor&, Tensor&> median_dim_out_tpu(const Tensor& self, int64_t dim, bool keepdim,
                                                Tensor& v, Tensor& i) {
  const int64_t n = self.dim() == 0 ? 1 : self.size(at::maybe_wrap_dim(dim, self.dim()));
  auto [rv, ri] = KthAlong("median", self, (n - 1) / 2, dim, keepdim, 1);
  at::native::resize_output(v, rv.sizes());
  at::native::resize_output(i, ri.sizes());
  v.copy_(rv);
  i.copy_(ri);
  return {v, i};
}
Tensor median_tpu(const Tensor& self) {
  CheckTpu("median", self, "self");
  if (self.numel() == 0) {
    Tensor r = EmptyTpu({}, self.scalar_type());
    return r.fill_(std::numeric_limits<double>::quiet_NaN());
  }
  Tensor flat = self.reshape({-1});
  return std::get<0>(KthAlong("median", flat, (flat.numel() - 1) / 2, 0, false, 1));
}
std::tuple<Tensor&, Tensor&> nanmedian_dim_out_tpu(const Tensor& self, int64_t dim, bool keepdim,
                                                   Tensor& v, Tensor& i) {
  auto [rv, ri] = KthAlong("nanmedian", self, 0, dim, keepdim,
                           at::isFloatingType(self.scalar_type()) ? 2 : 1);
  if (!at::isFloatingType(self.scalar_type())) {
    const int64_t n = self.dim() == 0 ? 1 : self.size(at::maybe_wrap_dim(dim, self.dim()));
    std::tie(rv, ri) = KthAlong("nanmedian", self, (n - 1) / 2, dim, keepdim, 0);
  }
  at::native::resize_output(v, rv.sizes());
  at::native::resize_output(i, ri.sizes());
  v.copy_(rv);
  i.copy_(ri);
  return {v, i};
}
Tensor nanmedian_tpu(const Tensor& self) {
  CheckTpu("nanmedian", self, "self");
  if (self.numel() == 0) {
    Tensor r = EmptyTpu({}, self.scalar_type());
    return r.fill_(std::numeric_limits<double>::quiet_NaN());
  }
  Tensor flat = self.reshape({-1});
  if (!at::isFloatingType(self.scalar_type()))
    return std::get<0>(KthAlong("nanmedian", flat, (flat.numel() - 1) / 2, 0, false, 0));
  return std::get<0>(KthAlong("nanmedian", flat, 0, 0, false, 2));
}

// ---- aminmax, count_nonzero ----

std::tuple<Tensor&, Tensor&> aminmax_out_tpu(const Tensor& self, std::optional<int64_t> dim,
                                             bool keepdim, Tensor& mn, Tensor& mx) {
  CheckTpu("aminmax", self, "self");
  Tensor lo, hi;
  if (dim.has_value() && self.numel() == 0) {
    const int64_t d = at::maybe_wrap_dim(*dim, std::max<int64_t>(self.dim(), 1));
    TORCH_CHECK(self.dim() == 0 || self.size(d) != 0, "aminmax(): Expected reduction dim ", d,
                " to have non-zero size.");
    ReduceMeta m = MetaFor(self, at::IntArrayRef{*dim}, keepdim);
    lo = EmptyTpu(m.sizes, self.scalar_type());
    hi = EmptyTpu(m.sizes, self.scalar_type());
  } else if (dim.has_value()) {
    lo = Extreme("aminmax", kMin, self, at::IntArrayRef{*dim}, keepdim);
    hi = Extreme("aminmax", kMax, self, at::IntArrayRef{*dim}, keepdim);
  } else {
    TORCH_CHECK(self.numel() > 0, "aminmax(): cannot compute aminmax over an empty dimension as "
                "the operation has no identity.");
    lo = Extreme("aminmax", kMin, self, std::nullopt, false);
    hi = Extreme("aminmax", kMax, self, std::nullopt, false);
    if (keepdim) {
      std::vector<int64_t> ones(self.dim(), 1);
      lo = lo.reshape(ones);
      hi = hi.reshape(ones);
    }
  }
  at::native::resize_output(mn, lo.sizes());
  at::native::resize_output(mx, hi.sizes());
  mn.copy_(lo);
  mx.copy_(hi);
  return {mn, mx};
}
std::tuple<Tensor, Tensor> aminmax_tpu(const Tensor& self, std::optional<int64_t> dim,
                                       bool keepdim) {
  Tensor mn = EmptyTpu({0}, self.scalar_type()), mx = EmptyTpu({0}, self.scalar_type());
  aminmax_out_tpu(self, dim, keepdim, mn, mx);
  return {mn, mx};
}

Tensor count_nonzero_tpu(const Tensor& self, at::IntArrayRef dims) {
  CheckTpu("count_nonzero", self, "self");
  ReduceMeta m = MetaFor(self, dims.empty() ? at::OptionalIntArrayRef() : dims, false);
  Tensor nz = at::ne(self, 0);
  return Run1(kReduce, ReduceAttrs(kSum, at::kLong, m), {OperandOf(nz)}, TypeOf(m.sizes, at::kLong));
}

// ---- trace ----

// ins = (x [r, c]); ints = (accumulate dtype)
VS LowerTrace(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto acc = static_cast<DType>(a.ints[0]);
  Value x = ir::Convert(b, in[0], acc);
  const ir::Dims d = b.type(x).dims;
  Value diag = ir::Compare(b, ir::Iota(b, d, 0, DType::S64), ir::Iota(b, d, 1, DType::S64),
                           ir::Cmp::EQ);
  x = ir::Select(b, diag, x, ir::Full(b, ir::ConstantI(b, 0, acc), d));
  Value r = ir::Reduce(b, x, ir::ConstantI(b, 0, acc), {0, 1}, "stablehlo.add");
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kTrace{"aten::trace", &LowerTrace};

Tensor trace_tpu(const Tensor& self) {
  CheckTpu("trace", self, "self");
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  const auto rt = SumType(self, std::nullopt);
  if (self.numel() == 0) return at::zeros({}, self.options().dtype(rt));
  return Run1(kTrace, {{IrCode(OpMathType(rt))}, {}, {}}, {OperandOf(self)}, TypeOf({}, rt));
}
}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.dim_IntList", TORCH_FN(sum_dim));
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
  m.impl("prod", TORCH_FN(prod_all));
  m.impl("prod.dim_int", TORCH_FN(prod_dim));
  m.impl("prod.int_out", TORCH_FN(prod_dim_out));
  m.impl("mean.dim", TORCH_FN(mean_dim));
  m.impl("mean.out", TORCH_FN(mean_out));
  m.impl("amax", TORCH_FN(amax));
  m.impl("amin", TORCH_FN(amin));
  m.impl("max", TORCH_FN(max_all));
  m.impl("min", TORCH_FN(min_all));
  m.impl("any", TORCH_FN(any_all));
  m.impl("all", TORCH_FN(all_all));
  m.impl("any.dim", TORCH_FN(any_dim));
  m.impl("all.dim", TORCH_FN(all_dim));
  m.impl("any.dims", TORCH_FN(any_dims));
  m.impl("all.dims", TORCH_FN(all_dims));
  m.impl("any.out", TORCH_FN(any_out));
  m.impl("all.out", TORCH_FN(all_out));
  m.impl("any.dims_out", TORCH_FN(any_dims_out));
  m.impl("all.dims_out", TORCH_FN(all_dims_out));
  m.impl("any.all_out", TORCH_FN(any_all_out));
  m.impl("all.all_out", TORCH_FN(all_all_out));
  m.impl("max.dim", TORCH_FN(max_dim));
  m.impl("min.dim", TORCH_FN(min_dim));
  m.impl("max.dim_max", TORCH_FN(max_dim_out));
  m.impl("min.dim_min", TORCH_FN(min_dim_out));
  m.impl("argmax", TORCH_FN(Argmax));
  m.impl("argmin", TORCH_FN(Argmin));
  m.impl("argmax.out", TORCH_FN(argmax_out));
  m.impl("argmin.out", TORCH_FN(argmin_out));
  m.impl("linalg_vector_norm", TORCH_FN(linalg_vector_norm));
  m.impl("linalg_vector_norm.out", TORCH_FN(linalg_vector_norm_out));
  m.impl("norm.out", TORCH_FN(norm_out));
  m.impl("norm.dtype_out", TORCH_FN(norm_dtype_out));
  m.impl("equal", TORCH_FN(equal_tpu));
  m.impl("vdot", TORCH_FN(vdot_tpu));
  m.impl("_logcumsumexp", TORCH_FN(logcumsumexp_tpu));
  m.impl("_logcumsumexp.out", TORCH_FN(logcumsumexp_out_tpu));
  m.impl("_cummax_helper", TORCH_FN(cummax_helper_tpu));
  m.impl("_cummin_helper", TORCH_FN(cummin_helper_tpu));
  m.impl("kthvalue.values", TORCH_FN(kthvalue_out_tpu));
  m.impl("median.dim_values", TORCH_FN(median_dim_out_tpu));
  m.impl("median", TORCH_FN(median_tpu));
  m.impl("nanmedian.dim_values", TORCH_FN(nanmedian_dim_out_tpu));
  m.impl("nanmedian", TORCH_FN(nanmedian_tpu));
  m.impl("aminmax", TORCH_FN(aminmax_tpu));
  m.impl("aminmax.out", TORCH_FN(aminmax_out_tpu));
  m.impl("count_nonzero.dim_IntList", TORCH_FN(count_nonzero_tpu));
  m.impl("trace", TORCH_FN(trace_tpu));
}

}  // namespace tpu::ops
