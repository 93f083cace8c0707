// Eager execution modes. All three record ops the same way and compile
// them through the same cache; they differ in when the recorded ops run.
#pragma once

#include <cstdint>
#include <string>

namespace tpu::lazy {

enum class EagerMode : int {
  kDeferNever = 0,                // Strict: each op is launched at once, asynchronously
  kDeferNeverLaunchBlocking = 1,  // Debug: launched at once and waited for
  kDeferAndFuse = 2,              // Fused: ops wait and run as one program when needed
};

// The calling thread's mode: its scoped override if set, else the global.
EagerMode CurrentMode();
void SetGlobalMode(EagerMode m);
EagerMode GlobalMode();
// -1 clears the override. Scoped overrides follow the thread's work into
// the threads PyTorch runs it on (autograd's backward threads).
void SetThreadMode(int m);
int ThreadMode();
// The scoped matmul-precision override (aten/precision.h), stored the same way.
void SetThreadPrecision(int64_t p);
int64_t ThreadPrecision();

// Called with a warning for the user (installed by the extension so the
// message becomes a Python warning); the default prints to stderr.
using WarnFn = void (*)(const std::string&);
void SetWarnHandler(WarnFn fn);
void Warn(const std::string& message);

}  // namespace tpu::lazy
