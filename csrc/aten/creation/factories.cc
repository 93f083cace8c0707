// Factory functions: arange, linspace and eye (iota formulas on the device),
// _efficientzerotensor (the zero tensors autograd makes for unused
// gradients, materialized as zeros) and tril_indices / triu_indices
// (computed on the host, uploaded).
#include <ATen/native/RangeUtils.h>
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
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

// ---- arange, linspace, eye ----

// ins = (start, step) as 0-d operands of the compute dtype.
VS LowerArange(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const auto ct = static_cast<DType>(at.ints[0]);
  const ir::Dims& d = out[0].dims;
  Value i = ir::Iota(b, d, 0, ct);
  Value r = ir::Binary(b, "stablehlo.add", ir::Full(b, ir::Convert(b, in[0], ct), d),
                       ir::Binary(b, "stablehlo.multiply", i, ir::Full(b, ir::Convert(b, in[1], ct), d)));
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kArange{"aten::arange", &LowerArange};

Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                   Tensor& out) {
  const auto dt = out.scalar_type();
  int64_t size = 0;
  if (at::isIntegralType(dt, true)) {
    at::native::arange_check_bounds(start, end, step);
    const int64_t s = start.toLong(), e = end.toLong(), st = step.toLong();
    size = st > 0 ? std::max<int64_t>(0, (e - s + st - 1) / st)
                  : std::max<int64_t>(0, (s - e - st - 1) / -st);
  } else {
    at::native::arange_check_bounds(start, end, step);
    size = static_cast<int64_t>(
        std::ceil((end.toDouble() - start.toDouble()) / step.toDouble()));
    size = std::max<int64_t>(size, 0);
  }
  at::native::resize_output(out, {size});
  if (size == 0) return out;
  const auto ct = at::isIntegralType(dt, true) ? at::kLong
                  : dt == at::kDouble          ? at::kDouble
                                               : at::kFloat;
  RunInto(kArange, {{static_cast<int64_t>(ToIr(ct))}, {}, {}},
          {ScalarOperand(start, ct), ScalarOperand(step, ct)}, {TypeOf({size}, dt)}, {out});
  return out;
}

// ins = (start, end) as 0-d of the compute dtype; ints = (compute dtype,
// steps). As CPU: start + i*step for the first half, end - (steps-1-i)*step
// for the second.
VS LowerLinspace(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const auto ct = static_cast<DType>(at.ints[0]);
  const int64_t steps = at.ints[1];
  const ir::Dims& d = out[0].dims;
  Value start = ir::Full(b, ir::Convert(b, in[0], ct), d);
  if (steps == 1) return {ir::Convert(b, start, out[0].dtype)};
  Value end = ir::Full(b, ir::Convert(b, in[1], ct), d);
  Value step = ir::Binary(b, "stablehlo.divide", ir::Binary(b, "stablehlo.subtract", end, start),
                          ir::Full(b, ir::ConstantF(b, static_cast<double>(steps - 1), ct), d));
  Value i = ir::Iota(b, d, 0, ct);
  Value lo = ir::Binary(b, "stablehlo.add", start, ir::Binary(b, "stablehlo.multiply", step, i));
  Value back = ir::Binary(b, "stablehlo.subtract",
                          ir::Full(b, ir::ConstantF(b, static_cast<double>(steps - 1), ct), d), i);
  Value hi = ir::Binary(b, "stablehlo.subtract", end, ir::Binary(b, "stablehlo.multiply", step, back));
  Value first = ir::Compare(b, ir::Iota(b, d, 0, DType::S64),
                            ir::Full(b, ir::ConstantI(b, steps / 2, DType::S64), d), ir::Cmp::LT);
  return {ir::Convert(b, ir::Select(b, first, lo, hi), out[0].dtype)};
}
constexpr lazy::Lowering kLinspace{"aten::linspace", &LowerLinspace};

Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps,
                     Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  CheckTpu("linspace", out, "out");
  at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  const auto dt = out.scalar_type();
  TORCH_CHECK(!at::isComplexType(dt), "linspace: complex outputs are not supported on tpu yet");
  const auto ct = at::isIntegralType(dt, true) || dt == at::kDouble ? at::kDouble : at::kFloat;
  RunInto(kLinspace, {{static_cast<int64_t>(ToIr(ct)), steps}, {}, {}},
          {ScalarOperand(start, ct), ScalarOperand(end, ct)}, {TypeOf({steps}, dt)}, {out});
  return out;
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
  m.impl("eye.out", TORCH_FN(eye_out));
  m.impl("eye.m_out", TORCH_FN(eye_m_out));
  m.impl("_efficientzerotensor", TORCH_FN(efficientzerotensor_tpu));
  m.impl("tril_indices", TORCH_FN(tril_indices_tpu));
  m.impl("triu_indices", TORCH_FN(triu_indices_tpu));
}

}  // namespace tpu::ops
