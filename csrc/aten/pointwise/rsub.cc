// rsub with a tensor: other - alpha * self.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/sub.h>
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

// ---- rsub ----

Tensor rsub_tensor_tpu(const Tensor& self, const Tensor& other, const c10::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("rsub.Tensor", TORCH_FN(rsub_tensor_tpu));
}

}  // namespace tpu::ops
