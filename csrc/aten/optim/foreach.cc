// The _foreach_* ops (the list ops of PyTorch's optimizers and of
// clip_grad_norm_) as one launch per call in Strict Eager. PyTorch's
// composite kernels for them loop over the list and call the per-tensor op,
// which in Strict Eager is a launch per tensor: an AdamW step over the 51
// parameters of a small GPT made 344 launches (8 now). Here a foreach op
// runs that same composite kernel with the executor batching what it
// records, and launches the batch as one program when the op returns, so
// the values are the per-tensor ops' own. Fused Eager defers the ops anyway
// and Debug Eager keeps launching and waiting op by op, so both run the
// composite kernel as it is; so does a torch.compile capture.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <string>

#include "lazy/executor.h"
#include "lazy/modes.h"

namespace tpu::ops {

namespace {

void RunComposite(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  c10::Dispatcher::singleton().callBoxedForDispatchKey(
      op, c10::DispatchKey::CompositeExplicitAutograd, stack);
}

void ForeachInOneLaunch(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  lazy::Executor& ex = lazy::Executor::Get();
  if (lazy::CurrentMode() != lazy::EagerMode::kDeferNever || ex.capturing()) {
    RunComposite(op, stack);
    return;
  }
  ex.BeginBatch();
  try {
    RunComposite(op, stack);
  } catch (...) {
    // What was recorded before the failure still runs; the op's own error
    // is the one reported.
    try {
      ex.EndBatch();
    } catch (...) {
    }
    throw;
  }
  ex.EndBatch();
}

// Every aten::_foreach_* overload with a composite kernel and no tpu kernel
// of its own (the list grows with PyTorch releases).
bool RegisterForeachOps() {
  static torch::Library lib(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                            __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    constexpr const char kPrefix[] = "aten::_foreach_";
    if (name.name.rfind(kPrefix, 0) != 0) continue;
    const auto op = dispatcher.findOp(name);
    if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
        op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
      continue;
    }
    std::string id = name.name.substr(6);  // without "aten::"
    if (!name.overload_name.empty()) id += "." + name.overload_name;
    lib.impl(id.c_str(), torch::CppFunction::makeFromBoxedFunction<&ForeachInOneLaunch>());
  }
  return true;
}

const bool kRegistered = RegisterForeachOps();

}  // namespace

}  // namespace tpu::ops
