// Helpers shared by the shape, indexing and normalization kernels.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "ir/ops.h"
#include "ops/bridge.h"

namespace tpu::ops {

// A meta tensor with t's sizes, strides and dtype. Running an ATen op on
// meta arguments validates them with PyTorch's own checks and messages and
// gives the result's sizes and dtype without touching data. Only for ops
// whose meta kernel is C++: many are Python decompositions once
// torch._meta_registrations is loaded (about 0.1-2 ms a call, and they may
// raise other exception types than CPU does).
at::Tensor MetaOf(const at::Tensor& t);

// Runs `op`; output i goes into *dsts[i] when dsts[i] is non-null (in-place
// update of an existing tensor, e.g. batch norm's running stats) and into a
// new tensor otherwise. Returns the new tensors (undefined where written
// in place).
std::vector<at::Tensor> RunMixed(const lazy::Lowering& op, const lazy::Attrs& attrs,
                                 const std::vector<lazy::Operand>& inputs,
                                 const std::vector<ir::TensorType>& out_types,
                                 const std::vector<const at::Tensor*>& dsts);

// Integer indices with negative values wrapped by `size` (idx + size where
// idx < 0), converted to s64. Out-of-range values are not detected on the
// device (that would need a host sync); XLA clamps gather starts and drops
// scatter updates that fall outside.
ir::Value WrapIndex(ir::Builder& b, ir::Value idx, int64_t size);

}  // namespace tpu::ops
