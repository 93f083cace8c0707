// What happens to an op without a tpu lowering: by default it raises
// NotImplementedError naming the op; with the opt-in CPU fallback it runs on
// CPU (arguments copied over and results back), warning once per op.
#pragma once

namespace tpu::device {

void SetCpuFallback(bool enabled);
bool CpuFallbackEnabled();

}  // namespace tpu::device
