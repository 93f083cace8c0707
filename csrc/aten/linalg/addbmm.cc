// addbmm: beta * self + alpha * the sum over the batch of b1 @ b2.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
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

using at::Tensor;
using ir::Builder;
using ir::DType;
using ir::Value;
using VS = std::vector<Value>;
using TT = std::vector<ir::TensorType>;

namespace {

// ---- addbmm ----

Tensor Addbmm(const Tensor& self, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
              const c10::Scalar& alpha) {
  TORCH_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b1.size(0) == b2.size(0), "batch1 and batch2 must have same number of batches, got ",
              b1.size(0), " and ", b2.size(0));
  TORCH_CHECK(b1.size(2) == b2.size(1), "Incompatible matrix sizes for bmm (", b1.size(1), "x",
              b1.size(2), " and ", b2.size(1), "x", b2.size(2), ")");
  // beta * self + alpha * sum_b b1[b] @ b2[b] as one addmm over (b, k), so
  // that a low-precision result is rounded once, not once per step.
  const int64_t nb = b1.size(0), n = b1.size(1), k = b1.size(2), m = b2.size(2);
  return at::addmm(self.expand({n, m}), b1.permute({1, 0, 2}).reshape({n, nb * k}),
                   b2.reshape({nb * k, m}), beta, alpha);
}
Tensor addbmm_tpu(const Tensor& self, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
                  const c10::Scalar& alpha) {
  return Addbmm(self, b1, b2, beta, alpha);
}
Tensor& addbmm_out_tpu(const Tensor& self, const Tensor& b1, const Tensor& b2,
                       const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  return CopyInto("addbmm", Addbmm(self, b1, b2, beta, alpha), out);
}
Tensor& addbmm__tpu(Tensor& self, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
                    const c10::Scalar& alpha) {
  Tensor r = Addbmm(self, b1, b2, beta, alpha);
  TORCH_CHECK(r.sizes() == self.sizes(), "addbmm_: result shape ", r.sizes(),
              " does not match self ", self.sizes());
  return self.copy_(r);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addbmm", TORCH_FN(addbmm_tpu));
  m.impl("addbmm.out", TORCH_FN(addbmm_out_tpu));
  m.impl("addbmm_", TORCH_FN(addbmm__tpu));
}

}  // namespace tpu::ops
