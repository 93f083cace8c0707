// nansum (NaN counted as zero) and the out= forms of amax / amin.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/complex.h"
#include "aten/kernel_helpers.h"
#include "aten/indexing/index_checks.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

namespace {

// ---- nansum, amax/amin out= ----

Tensor nansum_tpu(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  Tensor x = at::isFloatingType(self.scalar_type())
                 ? at::where(at::isnan(self), at::zeros({}, TpuOptions(self.scalar_type())), self)
                 : self;
  return at::sum(x, dim, keepdim, dtype);
}
Tensor& nansum_out_tpu(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, Tensor& out) {
  return CopyInto("nansum", nansum_tpu(self, dim, keepdim, dtype.has_value() ? dtype : out.scalar_type()),
              out);
}

Tensor& amax_out_tpu(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "Expected the dtype for input and out to "
              "match, but got ", self.scalar_type(), " for input's dtype and ", out.scalar_type(),
              " for out's dtype.");
  return CopyInto("amax", at::amax(self, dim, keepdim), out);
}
Tensor& amin_out_tpu(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "Expected the dtype for input and out to "
              "match, but got ", self.scalar_type(), " for input's dtype and ", out.scalar_type(),
              " for out's dtype.");
  return CopyInto("amin", at::amin(self, dim, keepdim), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nansum", TORCH_FN(nansum_tpu));
  m.impl("nansum.out", TORCH_FN(nansum_out_tpu));
  m.impl("amax.out", TORCH_FN(amax_out_tpu));
  m.impl("amin.out", TORCH_FN(amin_out_tpu));
}

}  // namespace tpu::ops
