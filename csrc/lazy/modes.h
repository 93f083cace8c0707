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
// -1 clears the override.
void SetThreadMode(int m);
int ThreadMode();

// Called with a warning for the user (installed by the extension so the
// message becomes a Python warning); the default prints to stderr.
using WarnFn = void (*)(const std::string&);
void SetWarnHandler(WarnFn fn);
void Warn(const std::string& message);

}  // namespace tpu::lazy
