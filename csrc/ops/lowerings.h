// Shared lowering helpers used by several ATen kernels.
#pragma once

#include "ir/ops.h"
#include "lazy/lowering.h"

namespace tpu::ops {

// inputs[0] broadcast to out_types[0]'s dims and converted to its dtype.
std::vector<ir::Value> LowerCopy(ir::Builder& b, const std::vector<ir::Value>& in,
                                 const lazy::Attrs&, const std::vector<ir::TensorType>& out);
inline constexpr lazy::Lowering kCopy{"aten::copy_", &LowerCopy};

}  // namespace tpu::ops
