// Shape and ordering ops: cat, constant_pad_nd, flip, roll, tril/triu,
// clamp, sort/topk and cumulative sums/products.
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/native_channel_shuffle.h>
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

// ---- cat ----

// ints = (dim); every input is converted to the result dtype.
VS LowerCat(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  VS xs;
  for (Value v : in) xs.push_back(ir::Convert(b, v, out[0].dtype));
  return {ir::Concatenate(b, xs, a.ints[0])};
}
constexpr lazy::Lowering kCat{"aten::cat", &LowerCat};

// Legacy behaviour kept by CPU: 1-d empty tensors are skipped whatever the
// other inputs' shapes.
bool LegacyEmpty(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

struct CatPlan {
  std::vector<int64_t> sizes;
  at::ScalarType dtype;
  int64_t dim = 0;
  std::vector<lazy::Operand> inputs;
};

// Validates as CPU does (its messages) and computes the result meta.
CatPlan PlanCat(const at::ITensorListRef& tensors, int64_t dim) {
  CatPlan p;
  std::vector<Tensor> ts;
  for (const Tensor& t : tensors) {
    CheckTpu("cat", t, "tensors");
    ts.push_back(t);
  }
  TORCH_CHECK(!ts.empty(), "torch.cat(): expected a non-empty list of Tensors");
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < ts.size(); ++i) {
    TORCH_CHECK(ts[i].dim() > 0, "zero-dimensional tensor (at position ", i,
                ") cannot be concatenated");
    if (!ref && !LegacyEmpty(ts[i])) ref = &ts[i];
  }
  p.dim = at::maybe_wrap_dim(dim, ref ? ref->dim() : 1);
  std::vector<int64_t> sizes = ref ? ref->sizes().vec() : std::vector<int64_t>{0};
  if (ref) sizes[p.dim] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& t = ts[i];
    if (LegacyEmpty(t)) continue;
    TORCH_CHECK(t.dim() == ref->dim(), "Tensors must have same number of dimensions: got ",
                ref->dim(), " and ", t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d == p.dim) continue;
      TORCH_CHECK(t.size(d) == ref->size(d), "Sizes of tensors must match except in dimension ",
                  p.dim, ". Expected size ", ref->size(d), " but got size ", t.size(d),
                  " for tensor number ", i, " in the list.");
    }
    sizes[p.dim] += t.size(p.dim);
    if (t.numel() > 0) p.inputs.push_back(OperandOf(t));
  }
  p.sizes = sizes;
  p.dtype = at::native::result_type(tensors);
  return p;
}

Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  CatPlan p = PlanCat(tensors, dim);
  if (p.inputs.empty()) return EmptyTpu(p.sizes, p.dtype);
  return Run1(kCat, {{p.dim}, {}, {}}, p.inputs, TypeOf(p.sizes, p.dtype));
}
Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, Tensor& out) {
  CatPlan p = PlanCat(tensors, dim);
  PrepareOut("cat", out, p.sizes, p.dtype);
  if (p.inputs.empty()) return out;
  RunInto(kCat, {{p.dim}, {}, {}}, p.inputs, {TypeOf(p.sizes, p.dtype)},
          {out});
  return out;
}

// ---- constant_pad_nd ----

// ins = (x, value); ints = (low..., high...). Negative padding crops.
VS LowerPad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const size_t r = a.ints.size() / 2;
  ir::Dims low(a.ints.begin(), a.ints.begin() + r), high(a.ints.begin() + r, a.ints.end());
  return {ir::Pad(b, in[0], ir::Convert(b, in[1], out[0].dtype), low, high, ir::Dims(r, 0))};
}
constexpr lazy::Lowering kPad{"aten::constant_pad_nd", &LowerPad};

Tensor constant_pad_nd(const Tensor& self, at::IntArrayRef pad, const c10::Scalar& value) {
  CheckTpu("constant_pad_nd", self, "self");
  Tensor meta = at::constant_pad_nd(MetaOf(self), pad, value);
  const int64_t r = self.dim();
  std::vector<int64_t> ints(2 * r, 0);
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int64_t d = r - 1 - static_cast<int64_t>(i);
    ints[d] = pad[2 * i];
    ints[r + d] = pad[2 * i + 1];
  }
  if (meta.numel() == 0 || self.numel() == 0) {
    // Nothing to read from self: the result is all `value` (or empty).
    Tensor out = EmptyTpu(meta.sizes(), self.scalar_type());
    if (out.numel() > 0) out.fill_(value);
    return out;
  }
  return Run1(kPad, {ints, {}, {}}, {OperandOf(self), ScalarOperand(value, self.scalar_type())},
              TypeOf(meta.sizes(), self.scalar_type()));
}

// ---- flip, roll ----

VS LowerFlip(Builder& b, const VS& in, const lazy::Attrs& a, const TT&) {
  return {ir::Reverse(b, in[0], a.ints)};
}
constexpr lazy::Lowering kFlip{"aten::flip", &LowerFlip};

Tensor flip(const Tensor& self, at::IntArrayRef dims) {
  CheckTpu("flip", self, "self");
  auto bits = at::dim_list_to_bitset(dims, self.dim());
  std::vector<int64_t> ds;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (bits[i] && self.size(i) > 1) ds.push_back(i);
  return Run1(kFlip, {ds, {}, {}}, {OperandOf(self)}, TypeOf(self.sizes(), self.scalar_type()));
}

// ints = (dim, shift) pairs with 0 < shift < size(dim).
VS LowerRoll(Builder& b, const VS& in, const lazy::Attrs& a, const TT&) {
  Value x = in[0];
  for (size_t i = 0; i + 1 < a.ints.size(); i += 2) {
    const ir::TensorType t = b.type(x);
    const int64_t d = a.ints[i], s = a.ints[i + 1], n = t.dims[d];
    ir::Dims start(t.rank(), 0), limit = t.dims, strides(t.rank(), 1);
    start[d] = n - s;
    Value tail = ir::Slice(b, x, start, limit, strides);
    start[d] = 0;
    limit[d] = n - s;
    Value head = ir::Slice(b, x, start, limit, strides);
    x = ir::Concatenate(b, {tail, head}, d);
  }
  return {x};
}
constexpr lazy::Lowering kRoll{"aten::roll", &LowerRoll};

Tensor roll_tpu(const Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  CheckTpu("roll", self, "self");
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty() && shifts.size() == 1) {
    if (self.numel() == 0) return self.clone();
    return roll_tpu(self.reshape({-1}), shifts, {0}).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ",
              shifts.size(), ", dims:", dims.size());
  std::vector<int64_t> ints;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = at::maybe_wrap_dim(dims[i], self.dim());
    const int64_t n = self.size(d);
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    ints.push_back(d);
    ints.push_back(s);
  }
  return Run1(kRoll, {ints, {}, {}}, {OperandOf(self)}, TypeOf(self.sizes(), self.scalar_type()));
}

// ---- tril / triu ----

// ints = (diagonal, upper). Keeps x where col - row <= k (tril) or >= k.
VS LowerTri(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::Dims& dims = out[0].dims;
  const int64_t r = static_cast<int64_t>(dims.size());
  Value row = ir::Iota(b, dims, r - 2, DType::S64);
  Value col = ir::Iota(b, dims, r - 1, DType::S64);
  Value diff = ir::Binary(b, "stablehlo.subtract", col, row);
  Value k = ir::Full(b, ir::ConstantI(b, a.ints[0], DType::S64), dims);
  Value keep = ir::Compare(b, diff, k, a.ints[1] ? ir::Cmp::GE : ir::Cmp::LE);
  Value x = ir::Convert(b, in[0], out[0].dtype);
  return {ir::Select(b, keep, x, ir::Full(b, ir::ConstantI(b, 0, out[0].dtype), dims))};
}
constexpr lazy::Lowering kTri{"aten::tril", &LowerTri};

void CheckTri(const char* name, const Tensor& self) {
  CheckTpu(name, self, "self");
  TORCH_CHECK(self.dim() >= 2, name, ": input tensor must have at least 2 dimensions");
}
Tensor Tri(const char* name, bool upper, const Tensor& self, int64_t k) {
  CheckTri(name, self);
  return Run1(kTri, {{k, upper}, {}, {}}, {OperandOf(self)},
              TypeOf(self.sizes(), self.scalar_type()));
}
Tensor& TriInto(const char* name, bool upper, const Tensor& self, int64_t k, Tensor& dst,
                bool inplace) {
  CheckTri(name, self);
  if (!inplace) PrepareOut(name, dst, self.sizes(), self.scalar_type());
  RunInto(kTri, {{k, upper}, {}, {}}, {OperandOf(self)},
          {TypeOf(self.sizes(), self.scalar_type())}, {dst});
  return dst;
}
Tensor tril(const Tensor& s, int64_t k) { return Tri("tril", false, s, k); }
Tensor triu(const Tensor& s, int64_t k) { return Tri("triu", true, s, k); }
Tensor& tril_(Tensor& s, int64_t k) { return TriInto("tril", false, s, k, s, true); }
Tensor& triu_(Tensor& s, int64_t k) { return TriInto("triu", true, s, k, s, true); }
Tensor& tril_out(const Tensor& s, int64_t k, Tensor& o) { return TriInto("tril", false, s, k, o, false); }
Tensor& triu_out(const Tensor& s, int64_t k, Tensor& o) { return TriInto("triu", true, s, k, o, false); }


// ---- clamp, clamp_min, clamp_max ----

// ins = (x[, lo][, hi]); ints = (has_lo, has_hi). Runs in the result dtype;
// NaN in x or in a bound gives NaN, as on CPU.
VS LowerClamp(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  auto arg = [&](size_t i) { return ir::BroadcastTo(b, ir::Convert(b, in[i], out[0].dtype), out[0].dims); };
  Value x = arg(0);
  size_t next = 1;
  if (a.ints[0]) x = ir::Max(b, x, arg(next++));
  if (a.ints[1]) x = ir::Min(b, x, arg(next++));
  return {x};
}
constexpr lazy::Lowering kClamp{"aten::clamp", &LowerClamp};

struct Bound {
  const c10::Scalar* scalar = nullptr;
  const Tensor* tensor = nullptr;
  bool present() const { return scalar || (tensor && tensor->defined()); }
};

// The result meta of clamp, as PyTorch's clamp meta functions: bounds take
// part in type promotion (scalars as wrapped numbers) and broadcast.
struct ClampMeta {
  std::vector<int64_t> sizes;
  at::ScalarType dtype;
};
ClampMeta MetaForClamp(const Tensor& self, Bound lo, Bound hi) {
  TORCH_CHECK(lo.present() || hi.present(),
              "torch.clamp: At least one of 'min' or 'max' must not be None");
  TORCH_CHECK(!at::isComplexType(self.scalar_type()), "clamp is not supported for complex types");
  ClampMeta m{self.sizes().vec(), self.scalar_type()};
  at::native::ResultTypeState st{};
  st = at::native::update_result_type_state(self, st);
  for (const Bound& bd : {lo, hi}) {
    if (bd.scalar) {
      TORCH_CHECK(!bd.scalar->isComplex(), "clamp is not supported for complex types");
      st = at::native::update_result_type_state(*bd.scalar, st);
    } else if (bd.present()) {
      st = at::native::update_result_type_state(*bd.tensor, st);
      m.sizes = at::infer_size(m.sizes, bd.tensor->sizes());
    }
  }
  m.dtype = at::native::result_type(st);
  return m;
}

// dst is null (functional), self (in-place) or out.
Tensor ClampRun(const Tensor& self, Bound lo, Bound hi, Tensor* dst, bool inplace) {
  CheckTpu("clamp", self, "self");
  const ClampMeta meta = MetaForClamp(self, lo, hi);
  const at::ScalarType rt = meta.dtype;
  std::vector<lazy::Operand> in{OperandOf(self)};
  for (const Bound& bd : {lo, hi}) {
    if (bd.scalar) in.push_back(ScalarOperand(*bd.scalar, rt));
    else if (bd.present()) {
      CheckTpu("clamp", *bd.tensor, "min/max");
      in.push_back(OperandOf(*bd.tensor));
    }
  }
  const lazy::Attrs attrs{{lo.present(), hi.present()}, {}, {}};
  const ir::TensorType tt = TypeOf(meta.sizes, rt);
  if (!dst) return Run1(kClamp, attrs, in, tt);
  if (inplace) {
    TORCH_CHECK(c10::canCast(rt, dst->scalar_type()), "result type ", rt,
                " can't be cast to the desired output type ", dst->scalar_type());
    TORCH_CHECK(dst->sizes().vec() == meta.sizes, "output with shape ", dst->sizes(),
                " doesn't match the broadcast shape ", at::IntArrayRef(meta.sizes));
  } else {
    PrepareOut("clamp", *dst, meta.sizes, rt);
  }
  RunInto(kClamp, attrs, in, {tt}, {*dst});
  return *dst;
}

const c10::Scalar* Opt(const std::optional<c10::Scalar>& s) { return s.has_value() ? &*s : nullptr; }
const Tensor* Opt(const std::optional<Tensor>& t) { return t.has_value() && t->defined() ? &*t : nullptr; }

Tensor clamp(const Tensor& s, const std::optional<c10::Scalar>& lo,
             const std::optional<c10::Scalar>& hi) {
  return ClampRun(s, {Opt(lo)}, {Opt(hi)}, nullptr, false);
}
Tensor& clamp_(Tensor& s, const std::optional<c10::Scalar>& lo,
               const std::optional<c10::Scalar>& hi) {
  ClampRun(s, {Opt(lo)}, {Opt(hi)}, &s, true);
  return s;
}
Tensor& clamp_out(const Tensor& s, const std::optional<c10::Scalar>& lo,
                  const std::optional<c10::Scalar>& hi, Tensor& o) {
  ClampRun(s, {Opt(lo)}, {Opt(hi)}, &o, false);
  return o;
}
Tensor clamp_t(const Tensor& s, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  return ClampRun(s, {nullptr, Opt(lo)}, {nullptr, Opt(hi)}, nullptr, false);
}
Tensor& clamp_t_(Tensor& s, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  ClampRun(s, {nullptr, Opt(lo)}, {nullptr, Opt(hi)}, &s, true);
  return s;
}
Tensor& clamp_t_out(const Tensor& s, const std::optional<Tensor>& lo,
                    const std::optional<Tensor>& hi, Tensor& o) {
  ClampRun(s, {nullptr, Opt(lo)}, {nullptr, Opt(hi)}, &o, false);
  return o;
}

#define TPU_CLAMP_SIDE(name, LO, HI)                                                   \
  Tensor name(const Tensor& s, const c10::Scalar& v) {                                 \
    return ClampRun(s, LO(&v, nullptr), HI(&v, nullptr), nullptr, false);              \
  }                                                                                    \
  Tensor& name##_(Tensor& s, const c10::Scalar& v) {                                   \
    ClampRun(s, LO(&v, nullptr), HI(&v, nullptr), &s, true);                           \
    return s;                                                                          \
  }                                                                                    \
  Tensor& name##_out(const Tensor& s, const c10::Scalar& v, Tensor& o) {               \
    ClampRun(s, LO(&v, nullptr), HI(&v, nullptr), &o, false);                          \
    return o;                                                                          \
  }                                                                                    \
  Tensor name##_t(const Tensor& s, const Tensor& v) {                                  \
    return ClampRun(s, LO(nullptr, &v), HI(nullptr, &v), nullptr, false);              \
  }                                                                                    \
  Tensor& name##_t_(Tensor& s, const Tensor& v) {                                      \
    ClampRun(s, LO(nullptr, &v), HI(nullptr, &v), &s, true);                           \
    return s;                                                                          \
  }                                                                                    \
  Tensor& name##_t_out(const Tensor& s, const Tensor& v, Tensor& o) {                  \
    ClampRun(s, LO(nullptr, &v), HI(nullptr, &v), &o, false);                          \
    return o;                                                                          \
  }
#define TPU_USE(sc, t) Bound{sc, t}
#define TPU_NONE(sc, t) Bound{}
TPU_CLAMP_SIDE(clamp_min, TPU_USE, TPU_NONE)
TPU_CLAMP_SIDE(clamp_max, TPU_NONE, TPU_USE)
#undef TPU_USE
#undef TPU_NONE
#undef TPU_CLAMP_SIDE

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

// ---- cumsum, cumprod ----

// ints = (dim, accumulate dtype, is_prod)
VS LowerCum(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto acc = static_cast<DType>(a.ints[1]);
  Value x = ir::Reshape(b, ir::Convert(b, in[0], acc), out[0].dims.empty() ? ir::Dims{1} : out[0].dims);
  const bool prod = a.ints[2] != 0;
  Value r = ir::CumReduce(b, x, ir::ConstantI(b, prod ? 1 : 0, acc), a.ints[0],
                          prod ? "stablehlo.multiply" : "stablehlo.add");
  return {ir::Reshape(b, ir::Convert(b, r, out[0].dtype), out[0].dims)};
}
constexpr lazy::Lowering kCum{"aten::cumsum", &LowerCum};

Tensor CumRun(const char* name, bool prod, const Tensor& self, int64_t dim,
              std::optional<at::ScalarType> dtype, Tensor* dst, bool inplace) {
  CheckTpu(name, self, "self");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::ScalarType rt = dtype.has_value() ? *dtype
                      : at::isIntegralType(self.scalar_type(), true) ? at::kLong
                                                                     : self.scalar_type();
  if (dst && !dtype.has_value() && !inplace) rt = dst->scalar_type();
  if (inplace) rt = self.scalar_type();
  const lazy::Attrs attrs{{d, IrCode(OpMathType(rt)), prod}, {}, {}};
  const ir::TensorType tt = TypeOf(self.sizes(), rt);
  if (!dst) {
    if (self.numel() == 0) return EmptyTpu(self.sizes(), rt);
    return Run1(kCum, attrs, {OperandOf(self)}, tt);
  }
  if (!inplace) {
    TORCH_CHECK(!dtype.has_value() || *dtype == dst->scalar_type(), "Expected out tensor to have dtype ",
                *dtype, ", but got ", dst->scalar_type(), " instead");
    PrepareOut(name, *dst, self.sizes(), rt);
  }
  RunInto(kCum, attrs, {OperandOf(self)}, {tt}, {*dst});
  return *dst;
}
Tensor cumsum(const Tensor& s, int64_t dim, std::optional<at::ScalarType> dt) {
  return CumRun("cumsum", false, s, dim, dt, nullptr, false);
}
Tensor& cumsum_(Tensor& s, int64_t dim, std::optional<at::ScalarType> dt) {
  CumRun("cumsum", false, s, dim, dt, &s, true);
  return s;
}
Tensor& cumsum_out(const Tensor& s, int64_t dim, std::optional<at::ScalarType> dt, Tensor& o) {
  CumRun("cumsum", false, s, dim, dt, &o, false);
  return o;
}
Tensor cumprod(const Tensor& s, int64_t dim, std::optional<at::ScalarType> dt) {
  return CumRun("cumprod", true, s, dim, dt, nullptr, false);
}
Tensor& cumprod_(Tensor& s, int64_t dim, std::optional<at::ScalarType> dt) {
  CumRun("cumprod", true, s, dim, dt, &s, true);
  return s;
}
Tensor& cumprod_out(const Tensor& s, int64_t dim, std::optional<at::ScalarType> dt, Tensor& o) {
  CumRun("cumprod", true, s, dim, dt, &o, false);
  return o;
}

// channel_shuffle: PyTorch's own reshape/permute composite, which runs on
// tpu's view and copy kernels; a fresh tensor even where that composite
// would return the input's storage (groups == 1).
Tensor channel_shuffle_tpu(const Tensor& self, int64_t groups) {
  CheckTpu("channel_shuffle", self, "self");
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but "
              "got input with sizes ", self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive. Value of "
              "groups:", groups);
  TORCH_CHECK(self.size(1) % groups == 0, "Number of channels must be divisible by groups. Got ",
              self.size(1), " channels and ", groups, " groups.");
  Tensor r = at::native_channel_shuffle(self, groups);
  return r.is_alias_of(self) ? r.clone() : r;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("channel_shuffle", TORCH_FN(channel_shuffle_tpu));
  m.impl("cat", TORCH_FN(cat));
  m.impl("cat.out", TORCH_FN(cat_out));
  m.impl("constant_pad_nd", TORCH_FN(constant_pad_nd));
  m.impl("flip", TORCH_FN(flip));
  m.impl("roll", TORCH_FN(roll_tpu));
  m.impl("tril", TORCH_FN(tril));
  m.impl("triu", TORCH_FN(triu));
  m.impl("tril_", TORCH_FN(tril_));
  m.impl("triu_", TORCH_FN(triu_));
  m.impl("tril.out", TORCH_FN(tril_out));
  m.impl("triu.out", TORCH_FN(triu_out));
  m.impl("clamp", TORCH_FN(clamp));
  m.impl("clamp_", TORCH_FN(clamp_));
  m.impl("clamp.out", TORCH_FN(clamp_out));
  m.impl("clamp.Tensor", TORCH_FN(clamp_t));
  m.impl("clamp_.Tensor", TORCH_FN(clamp_t_));
  m.impl("clamp.Tensor_out", TORCH_FN(clamp_t_out));
#define REG(name)                                         \
  m.impl(#name, TORCH_FN(name));                          \
  m.impl(#name "_", TORCH_FN(name##_));                   \
  m.impl(#name ".out", TORCH_FN(name##_out));             \
  m.impl(#name ".Tensor", TORCH_FN(name##_t));            \
  m.impl(#name "_.Tensor", TORCH_FN(name##_t_));          \
  m.impl(#name ".Tensor_out", TORCH_FN(name##_t_out));
  REG(clamp_min)
  REG(clamp_max)
#undef REG
  m.impl("sort.stable", TORCH_FN(sort_stable));
  m.impl("sort.values_stable", TORCH_FN(sort_values_stable));
  m.impl("topk", TORCH_FN(topk));
  m.impl("topk.values", TORCH_FN(topk_values));
  m.impl("cumsum", TORCH_FN(cumsum));
  m.impl("cumsum_", TORCH_FN(cumsum_));
  m.impl("cumsum.out", TORCH_FN(cumsum_out));
  m.impl("cumprod", TORCH_FN(cumprod));
  m.impl("cumprod_", TORCH_FN(cumprod_));
  m.impl("cumprod.out", TORCH_FN(cumprod_out));
}

}  // namespace tpu::ops
