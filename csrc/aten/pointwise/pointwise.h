// What the elementwise kernels (binary.cc, unary.cc) share: the result
// meta of an op and the check that an in-place form may write its result.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "aten/tensor_bridge.h"

namespace tpu::ops {

// Result meta of an elementwise op: broadcast shape and dtypes.
struct ElementwiseMeta {
  std::vector<int64_t> sizes;
  at::ScalarType compute;  // dtype the computation runs in
  at::ScalarType result;   // dtype of the result
};

// The value written by an in-place op must fit self: same shape as the
// broadcast result and a dtype self can hold (PyTorch's messages).
void CheckInplace(const char* op, const at::Tensor& self, const ElementwiseMeta& m);

}  // namespace tpu::ops
