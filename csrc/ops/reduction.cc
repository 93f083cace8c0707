// Reductions: sum, mean, amax/amin, max/min (with indices), argmax/argmin.
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/ops/dot.h>
#include <ATen/ops/eq.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "ops/bridge.h"

namespace tpu::ops {

using at::Tensor;
using ir::Builder;
using ir::DType;
using ir::Value;
using VS = std::vector<Value>;
using TT = std::vector<ir::TensorType>;

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
  std::vector<bool> reduced(nd, false);
  if (!dim.has_value() || dim->empty()) {
    std::fill(reduced.begin(), reduced.end(), true);
  } else {
    for (int64_t d : *dim) {
      const int64_t w = at::maybe_wrap_dim(d, nd);
      TORCH_CHECK(!reduced[w], "dim ", w, " appears multiple times in the list of dims");
      reduced[w] = true;
    }
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
    TORCH_CHECK(false, name, "(): Expected reduction dim to be specified for input.numel() == 0."
                " Specify the reduction dim with the 'dim' argument.");
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
  TORCH_CHECK(self.dim() == 0 || self.size(d) > 0, name, "(): Expected reduction dim ", d,
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
Tensor& argmax_out(const Tensor& s, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  Tensor r = Argmax(s, dim, keepdim);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}
Tensor& argmin_out(const Tensor& s, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  Tensor r = Argmin(s, dim, keepdim);
  at::native::resize_output(out, r.sizes());
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
  TORCH_CHECK(!at::isComplexType(self.scalar_type()), op,
              ": complex inputs are not supported on tpu yet");
  if (dtype.has_value()) {
    TORCH_CHECK(at::isFloatingType(*dtype), op, ": dtype should be floating point, but got ",
                *dtype);
    return *dtype;
  }
  return self.scalar_type();
}

void VectorNormInto(const char* op, const Tensor& self, double ord, at::OptionalIntArrayRef dim,
                    bool keepdim, at::ScalarType rt, const Tensor* out, Tensor* result) {
  ReduceMeta m = MetaFor(self, dim, keepdim);
  if (self.numel() == 0)
    TORCH_CHECK(ord >= 0 && !std::isinf(ord), op, ": Expected a non-empty tensor for ord ", ord);
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
}

}  // namespace tpu::ops
