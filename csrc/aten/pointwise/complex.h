// Complex helpers other op files call (pointwise/complex.cc).
#pragma once

#include <ATen/core/Tensor.h>

namespace tpu::ops {

// abs or angle ("abs" / "angle") of a complex tpu tensor: a real tensor of
// the matching precision.
at::Tensor ComplexToReal(const char* op, const at::Tensor& self);

}  // namespace tpu::ops
