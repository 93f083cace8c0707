// Factory functions: arange, range, linspace, logspace and eye (iota
// formulas on the device),
// _efficientzerotensor (the zero tensors autograd makes for unused
// gradients, materialized as zeros) and tril_indices / triu_indices
// (computed on the host, uploaded).
#include <ATen/native/RangeUtils.h>
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/polar.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>
#include <ATen/ops/tril_indices.h>
#include <ATen/ops/triu_indices.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <c10/util/irange.h>
#include <sstream>
#include <cstring>
#include <limits>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/complex.h"
#include "aten/kernel_helpers.h"
#include "aten/indexing/index_checks.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

namespace {

// ---- arange, range, linspace, logspace, eye ----

// The range factories write `n` values in row-major order into `out`,
// which keeps its shape when it already holds n elements (as on CPU:
// torch.arange(4, out=x.narrow(1, 1, 2)) fills a 2x2 view).
void PrepareRangeOut(const char* op, Tensor& out, int64_t n) {
  CheckTpu(op, out, "out");
  if (out.numel() != n) out.resize_({n});
}

// `n` values of iota in `ct`, and the result reshaped to the output.
Value IotaN(Builder& b, const ir::TensorType& o, DType ct) {
  return ir::Iota(b, {o.numel()}, 0, ct);
}
Value ToOut(Builder& b, Value v, const ir::TensorType& o) {
  return ir::Reshape(b, ir::Convert(b, v, o.dtype), o.dims);
}

// ins = (start, step) as 0-d operands of the compute dtype: start + i*step.
VS LowerArange(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const auto ct = static_cast<DType>(at.ints[0]);
  const ir::Dims d{out[0].numel()};
  Value i = IotaN(b, out[0], ct);
  Value r = ir::Binary(b, "stablehlo.add", ir::Full(b, ir::Convert(b, in[0], ct), d),
                       ir::Binary(b, "stablehlo.multiply", i, ir::Full(b, ir::Convert(b, in[1], ct), d)));
  return {ToOut(b, r, out[0])};
}
constexpr lazy::Lowering kArange{"aten::arange", &LowerArange};

// CPU computes arange and range in the accumulate type: int64 for integers,
// double for floating types.
at::ScalarType RangeAccType(at::ScalarType dt) {
  return at::isIntegralType(dt, true) ? at::kLong : at::kDouble;
}

void RunArange(const c10::Scalar& start, const c10::Scalar& step, Tensor& out) {
  const auto ct = RangeAccType(out.scalar_type());
  RunInto(kArange, {{static_cast<int64_t>(ToIr(ct))}, {}, {}},
          {ScalarOperand(start, ct), ScalarOperand(step, ct)},
          {TypeOf(out.sizes(), out.scalar_type())}, {out});
}

Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                   Tensor& out) {
  const auto dt = out.scalar_type();
  int64_t size = 0;
  at::native::arange_check_bounds(start, end, step);
  if (at::isIntegralType(dt, true)) {
    const int64_t s = start.toLong(), e = end.toLong(), st = step.toLong();
    size = st > 0 ? std::max<int64_t>(0, (e - s + st - 1) / st)
                  : std::max<int64_t>(0, (s - e - st - 1) / -st);
  } else {
    const double sz = std::ceil((end.toDouble() - start.toDouble()) / step.toDouble());
    TORCH_CHECK(sz >= 0 && sz <= static_cast<double>(std::numeric_limits<int64_t>::max()),
                "invalid size, possible overflow?");
    size = static_cast<int64_t>(sz);
  }
  if (out.numel() != size && out.numel() > 0) {
    TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ",
               out.numel(), " which does not match the computed number of elements ", size,
               ". Note that this may occur as a result of rounding error. "
               "The out tensor will be resized to a tensor of shape (", size, ",).");
  }
  PrepareRangeOut("arange", out, size);
  if (size == 0) return out;
  RunArange(start, step, out);
  return out;
}

// torch.range (deprecated, end inclusive): floor((end - start) / step) + 1
// values, with CPU's checks and messages.
Tensor& range_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                  Tensor& out) {
  const auto dt = out.scalar_type();
  TORCH_CHECK(!at::isComplexType(dt), "range_out not supported for complex dtype ", dt);
  int64_t size;
  if (at::isIntegralType(dt, true)) {
    const int64_t s = start.toLong(), e = end.toLong(), st = step.toLong();
    TORCH_CHECK(st != 0, "step must be nonzero");
    TORCH_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
                "upper bound and larger bound inconsistent with step sign");
    size = (e - s) / st + 1;
  } else {
    const double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
    TORCH_CHECK(st > 0 || st < 0, "step must be nonzero");
    TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "unsupported range: ", s, " -> ", e);
    TORCH_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
                "upper bound and larger bound inconsistent with step sign");
    size = static_cast<int64_t>((e - s) / st + 1);
  }
  PrepareRangeOut("range", out, size);
  if (size > 0) RunArange(start, step, out);
  return out;
}

// ins = (start, end, step) as 0-d of the compute dtype (the step computed
// on the host, as CPU computes it); ints = (compute dtype, steps, log?) and
// floats = (base) for logspace. As CPU: start + i*step for the first half,
// end - (steps-1-i)*step for the second; logspace raises base to that power.
VS LowerLinspace(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const auto ct = static_cast<DType>(at.ints[0]);
  const int64_t steps = at.ints[1];
  const bool log = at.ints.size() > 2 && at.ints[2];
  const ir::Dims d{out[0].numel()};
  Value start = ir::Full(b, ir::Convert(b, in[0], ct), d);
  Value r;
  if (steps == 1) {
    r = start;
  } else {
    Value end = ir::Full(b, ir::Convert(b, in[1], ct), d);
    Value step = ir::Full(b, ir::Convert(b, in[2], ct), d);
    Value i = ir::Iota(b, d, 0, ct);
    Value lo = ir::Binary(b, "stablehlo.add", start, ir::Binary(b, "stablehlo.multiply", step, i));
    Value back = ir::Binary(b, "stablehlo.subtract",
                            ir::Full(b, ir::ConstantF(b, static_cast<double>(steps - 1), ct), d), i);
    Value hi = ir::Binary(b, "stablehlo.subtract", end, ir::Binary(b, "stablehlo.multiply", step, back));
    Value first = ir::Compare(b, ir::Iota(b, d, 0, DType::S64),
                              ir::Full(b, ir::ConstantI(b, steps / 2, DType::S64), d), ir::Cmp::LT);
    r = ir::Select(b, first, lo, hi);
  }
  if (log) {
    r = ir::Binary(b, "stablehlo.power", ir::Full(b, ir::ConstantF(b, at.floats[0], ct), d), r);
  }
  return {ToOut(b, r, out[0])};
}
constexpr lazy::Lowering kLinspace{"aten::linspace", &LowerLinspace};

// `v` as the tensor's dtype would hold it (CPU casts start and end first).
c10::Scalar AsDtype(const c10::Scalar& v, at::ScalarType dt) {
  if (at::isIntegralType(dt, true)) return c10::Scalar(v.toLong());
  if (dt == at::kHalf) return c10::Scalar(static_cast<double>(v.toHalf()));
  if (dt == at::kBFloat16) return c10::Scalar(static_cast<double>(v.toBFloat16()));
  if (dt == at::kFloat) return c10::Scalar(static_cast<double>(v.toFloat()));
  return c10::Scalar(v.toDouble());
}

Tensor& Spaced(const char* op, const c10::Scalar& start, const c10::Scalar& end, int64_t steps,
               std::optional<double> log_base, Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  PrepareRangeOut(op, out, steps);
  if (steps == 0) return out;
  const auto dt = out.scalar_type();
  if (at::isComplexType(dt)) {
    // The two parts are independent linspaces (the step is a complex number
    // times a real index). logspace: base^(a + ib) = base^a * e^(i b ln base).
    const auto s = start.toComplexDouble(), e = end.toComplexDouble();
    Tensor parts = at::view_as_real(out);
    Tensor re = parts.select(-1, 0), im = parts.select(-1, 1);
    Spaced(op, s.real(), e.real(), steps, std::nullopt, re);
    Spaced(op, s.imag(), e.imag(), steps, std::nullopt, im);
    if (log_base.has_value()) {
      const double b = *log_base;
      out.copy_(at::polar(at::pow(b, re), at::mul(im, std::log(b))));
    }
    return out;
  }
  // linspace: integers step in double, floating types in their own precision
  // (f32 for the 16-bit ones); logspace: the exponent and the power in double.
  const bool log = log_base.has_value();
  const auto ct = log || at::isIntegralType(dt, true) || dt == at::kDouble ? at::kDouble : at::kFloat;
  lazy::Attrs attrs{{static_cast<int64_t>(ToIr(ct)), steps, log ? 1 : 0}, {}, {}};
  if (log) attrs.floats.push_back(*log_base);
  const c10::Scalar lo = AsDtype(start, dt), hi = AsDtype(end, dt);
  const double denom = static_cast<double>(std::max<int64_t>(steps - 1, 1));
  const c10::Scalar step =
      ct == at::kFloat
          ? c10::Scalar(static_cast<double>((hi.toFloat() - lo.toFloat()) / static_cast<float>(denom)))
          : c10::Scalar((hi.toDouble() - lo.toDouble()) / denom);
  RunInto(kLinspace, std::move(attrs),
          {ScalarOperand(lo, ct), ScalarOperand(hi, ct), ScalarOperand(step, ct)},
          {TypeOf(out.sizes(), dt)}, {out});
  return out;
}
Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps,
                     Tensor& out) {
  return Spaced("linspace", start, end, steps, std::nullopt, out);
}
Tensor& logspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, double base,
                     Tensor& out) {
  return Spaced("logspace", start, end, steps, base, out);
}

// out = [n, m]: 1 on the diagonal.
VS LowerEye(Builder& b, const VS&, const lazy::Attrs&, const TT& out) {
  const ir::Dims& d = out[0].dims;
  Value diag = ir::Compare(b, ir::Iota(b, d, 0, DType::S64), ir::Iota(b, d, 1, DType::S64),
                           ir::Cmp::EQ);
  return {ir::Convert(b, diag, out[0].dtype)};
}
constexpr lazy::Lowering kEye{"aten::eye", &LowerEye};

Tensor& eye_m_out(int64_t n, int64_t m, Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  CheckTpu("eye", out, "out");
  at::native::resize_output(out, {n, m});
  if (n == 0 || m == 0) return out;
  RunInto(kEye, {}, {}, {TypeOf({n, m}, out.scalar_type())}, {out});
  return out;
}
Tensor& eye_out(int64_t n, Tensor& out) { return eye_m_out(n, n, out); }

// ---- _efficientzerotensor ----

Tensor efficientzerotensor_tpu(c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device>,
                               std::optional<bool>) {
  std::vector<int64_t> s;
  for (const auto& v : size) s.push_back(v.expect_int());
  return at::zeros(s, TpuOptions(dtype.value_or(c10::typeMetaToScalarType(at::get_default_dtype()))));
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("arange.start_out", TORCH_FN(arange_out));
  m.impl("linspace.out", TORCH_FN(linspace_out));
  m.impl("logspace.out", TORCH_FN(logspace_out));
  m.impl("range.out", TORCH_FN(range_out));
  m.impl("eye.out", TORCH_FN(eye_out));
  m.impl("eye.m_out", TORCH_FN(eye_m_out));
  m.impl("_efficientzerotensor", TORCH_FN(efficientzerotensor_tpu));
  m.impl("tril_indices", TORCH_FN(tril_indices_tpu));
  m.impl("triu_indices", TORCH_FN(triu_indices_tpu));
}

}  // namespace tpu::ops
