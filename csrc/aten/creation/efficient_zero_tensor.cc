// _efficientzerotensor (the zero tensors autograd makes for unused
// gradients), materialized as zeros.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/complex.h"
#include "aten/kernel_helpers.h"
#include "aten/indexing/index_checks.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

using at::Tensor;
using ir::Builder;
using ir::DType;
using ir::Value;
using VS = std::vector<Value>;
using TT = std::vector<ir::TensorType>;

namespace {

// ---- _efficientzerotensor ----

Tensor efficientzerotensor_tpu(c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device>,
                               std::optional<bool>) {
  std::vector<int64_t> s;
  for (const auto& v : size) s.push_back(v.expect_int());
  return at::zeros(s, TpuOptions(dtype.value_or(c10::typeMetaToScalarType(at::get_default_dtype()))));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_efficientzerotensor", TORCH_FN(efficientzerotensor_tpu));
}

}  // namespace tpu::ops
