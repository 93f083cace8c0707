// Ops without a tpu lowering raise NotImplementedError naming the op; they
// never run on the CPU behind the user's back.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace tpu::device {

namespace {

void Unsupported(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "The operator '", op.schema().operator_name(),
                              "' is not implemented for the tpu device. Move the tensors to CPU "
                              "for this op (tensor.cpu()) and back with .to('tpu').");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&Unsupported>());
}

}  // namespace tpu::device
