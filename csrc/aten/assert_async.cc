// _assert_async / _assert_async.msg (torch._check on tensors, e.g. inside
// transformers' MoE code under torch.compile). CUDA checks on the device
// and reports later; here the value is read and checked at once, so a
// failing assert raises on the line that made it (a compiled graph holding
// one runs op by op).
#include <torch/library.h>

#include "aten/tensor_bridge.h"

namespace tpu::ops {
namespace {

void Check(const at::Tensor& self, c10::string_view msg) {
  CheckTpu("_assert_async", self, "self");
  TORCH_CHECK(self.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
  TORCH_CHECK(self.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  if (!self.item().toBool()) {
    TORCH_CHECK(false, msg.empty() ? std::string("Expected Tensor with single nonzero value, but got zero")
                                   : std::string(msg));
  }
}

void assert_async(const at::Tensor& self) { Check(self, ""); }
void assert_async_msg(const at::Tensor& self, c10::string_view msg) { Check(self, msg); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_assert_async", TORCH_FN(assert_async));
  m.impl("_assert_async.msg", TORCH_FN(assert_async_msg));
}

}  // namespace tpu::ops
