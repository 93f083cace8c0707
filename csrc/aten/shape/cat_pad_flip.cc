// Shape ops that move or pad data: cat, constant_pad_nd, flip, roll and
// tril/triu.
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/constant_pad_nd.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/kernel_helpers.h"

namespace tpu::ops {

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

// The layout of cat's result, as CPU's: the inputs' common suggested memory
// format (channels-last in, channels-last out), else contiguous. Legacy
// empty 1-d inputs do not vote.
at::MemoryFormat CatMemoryFormat(const at::ITensorListRef& tensors) {
  std::optional<at::MemoryFormat> fmt;
  for (const Tensor& t : tensors) {
    if (t.dim() == 1 && t.numel() == 0) continue;
    const at::MemoryFormat f = t.suggest_memory_format();
    if (fmt.has_value() && *fmt != f) return at::MemoryFormat::Contiguous;
    fmt = f;
  }
  return fmt.value_or(at::MemoryFormat::Contiguous);
}

Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  CatPlan p = PlanCat(tensors, dim);
  if (p.inputs.empty()) return EmptyTpu(p.sizes, p.dtype);
  Tensor r = Run1(kCat, {{p.dim}, {}, {}}, p.inputs, TypeOf(p.sizes, p.dtype));
  const at::MemoryFormat fmt = CatMemoryFormat(tensors);
  return fmt == at::MemoryFormat::Contiguous ? r : r.contiguous(fmt);
}
Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, Tensor& out) {
  CatPlan p = PlanCat(tensors, dim);
  TORCH_CHECK_TYPE(at::canCast(p.dtype, out.scalar_type()),
                   "torch.cat(): input types can't be cast to the desired output type ",
                   out.scalar_type());
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
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
}

}  // namespace tpu::ops
