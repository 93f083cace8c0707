#include "device/fallback.h"
#include "profiler/trace.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>

namespace tpu::device {

namespace {

std::atomic<bool> g_cpu_fallback{false};

void Fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  TORCH_CHECK_NOT_IMPLEMENTED(
      g_cpu_fallback.load(), "The operator '", name,
      "' is not implemented for the tpu device. Move the tensors to CPU for this op "
      "(tensor.cpu()) and back with .to('tpu'), or enable the CPU fallback with "
      "torch_tpu.cpu_fallback_mode(True) or TORCH_TPU_CPU_FALLBACK=1 (slower: the data "
      "travels to the host and back).");
  profiler::NoteCpuFallback(c10::toString(name));
  static std::mutex mu;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (warned.insert(c10::toString(name)).second)
      TORCH_WARN("The operator '", name, "' has no tpu lowering and runs on the CPU "
                 "(torch_tpu.cpu_fallback_mode is on); this copies its data to the host and back.");
  }
  at::native::cpu_fallback(op, stack);
}

}  // namespace

void SetCpuFallback(bool enabled) { g_cpu_fallback.store(enabled); }
bool CpuFallbackEnabled() { return g_cpu_fallback.load(); }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&Fallback>());
}

}  // namespace tpu::device
