// tril_indices / triu_indices: computed on the host, uploaded.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/tril_indices.h>
#include <ATen/ops/triu_indices.h>
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

using at::Tensor;
using ir::Builder;
using ir::DType;
using ir::Value;
using VS = std::vector<Value>;
using TT = std::vector<ir::TensorType>;

namespace {

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
  m.impl("tril_indices", TORCH_FN(tril_indices_tpu));
  m.impl("triu_indices", TORCH_FN(triu_indices_tpu));
}

}  // namespace tpu::ops
