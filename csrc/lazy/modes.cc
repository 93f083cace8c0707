#include "lazy/modes.h"

#include <c10/util/ThreadLocalDebugInfo.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string_view>
#include <thread>
#include <type_traits>

namespace tpu::lazy {

namespace {
std::atomic<int> g_mode{0};
std::atomic<WarnFn> g_warn{nullptr};

// The scoped settings live in PyTorch's ThreadLocalDebugInfo, which is part
// of the thread-local state PyTorch carries into the threads that work for
// a thread (the autograd engine's device threads run backward()), so a
// `with` block also covers the backward pass started inside it. Each thread
// that sets a value pushes its own record once and then updates it.
template <typename Kind>
Kind MakeKind() {
  if constexpr (std::is_enum_v<Kind>) {
    return static_cast<Kind>(0x54);  // older torch: an enum; a value PyTorch does not use
  } else {
    static constexpr std::string_view kName = "torch_tpu scoped settings";
    return Kind(&kName);  // torch >= 2.13: a slot identified by a static string
  }
}
const c10::DebugInfoKind kKind = MakeKind<c10::DebugInfoKind>();
struct Scoped : c10::DebugInfoBase {
  int mode = -1;
  int64_t precision = -1;
  std::thread::id owner;
};
const Scoped* Current() { return static_cast<const Scoped*>(c10::ThreadLocalDebugInfo::get(kKind)); }
Scoped& Own() {
  auto* cur = static_cast<Scoped*>(c10::ThreadLocalDebugInfo::get(kKind));
  if (cur && cur->owner == std::this_thread::get_id()) return *cur;
  auto mine = std::make_shared<Scoped>();
  if (cur) *mine = *cur;
  mine->owner = std::this_thread::get_id();
  c10::ThreadLocalDebugInfo::_push(kKind, mine);
  return *mine;
}
}  // namespace

EagerMode CurrentMode() {
  const int t = ThreadMode();
  return static_cast<EagerMode>(t >= 0 ? t : g_mode.load());
}
void SetGlobalMode(EagerMode m) { g_mode.store(static_cast<int>(m)); }
EagerMode GlobalMode() { return static_cast<EagerMode>(g_mode.load()); }
void SetThreadMode(int m) { Own().mode = m; }
int ThreadMode() {
  const Scoped* s = Current();
  return s ? s->mode : -1;
}
void SetThreadPrecision(int64_t p) { Own().precision = p; }
int64_t ThreadPrecision() {
  const Scoped* s = Current();
  return s ? s->precision : -1;
}

void SetWarnHandler(WarnFn fn) { g_warn.store(fn); }
void Warn(const std::string& message) {
  if (WarnFn fn = g_warn.load()) {
    fn(message);
  } else {
    std::fprintf(stderr, "torch_tpu warning: %s\n", message.c_str());
  }
}

}  // namespace tpu::lazy
