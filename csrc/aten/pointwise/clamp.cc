// clamp, clamp_min and clamp_max (scalar and tensor bounds).
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
  if (!dst) return RunElementwise(kClamp, attrs, in, tt, {&self});
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
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
}

}  // namespace tpu::ops
