// TPU matmul precision (design §8): DEFAULT = 1 bf16 pass, HIGH = 3 passes,
// HIGHEST = f32-accurate. The mode of the calling thread goes into each
// matmul's attrs, so it is part of the cache key.
#pragma once

#include <cstdint>

#include "ir/ops.h"

namespace tpu::ops {

enum class Precision : int64_t { kDefault = 0, kHigh = 1, kHighest = 2 };

// The thread-local override if set (torch.tpu.precision), else the mode
// mapped from torch.set_float32_matmul_precision once the program has
// called it (SetFollowTorchPrecision), else DEFAULT.
Precision CurrentPrecision();
void SetFollowTorchPrecision(bool follow);
bool FollowTorchPrecision();
// -1 clears the override.
void SetPrecisionOverride(int64_t mode);
int64_t PrecisionOverride();

// dot_general of f32 operands with the precision's numerics on any plugin
// (explicit bf16 splitting); other dtypes accumulate in f32.
ir::Value PreciseDot(ir::Builder& b, ir::Value lhs, ir::Value rhs, const ir::DotDims& dd,
                     const ir::TensorType& out, Precision p);

}  // namespace tpu::ops
