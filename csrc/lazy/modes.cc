#include "lazy/modes.h"

#include <atomic>
#include <cstdio>

namespace tpu::lazy {

namespace {
std::atomic<int> g_mode{0};
thread_local int t_mode = -1;
std::atomic<WarnFn> g_warn{nullptr};
}  // namespace

EagerMode CurrentMode() { return static_cast<EagerMode>(t_mode >= 0 ? t_mode : g_mode.load()); }
void SetGlobalMode(EagerMode m) { g_mode.store(static_cast<int>(m)); }
EagerMode GlobalMode() { return static_cast<EagerMode>(g_mode.load()); }
void SetThreadMode(int m) { t_mode = m; }
int ThreadMode() { return t_mode; }

void SetWarnHandler(WarnFn fn) { g_warn.store(fn); }
void Warn(const std::string& message) {
  if (WarnFn fn = g_warn.load()) {
    fn(message);
  } else {
    std::fprintf(stderr, "torch_tpu warning: %s\n", message.c_str());
  }
}

}  // namespace tpu::lazy
