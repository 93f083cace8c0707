// renorm: each slice along a dim scaled to a p-norm of at most maxnorm.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"

namespace tpu::ops {

namespace {

// ---- renorm ----

// renorm: each slice along dim scaled to p-norm at most maxnorm, as CPU
// (factor maxnorm / (norm + 1e-7) where the norm exceeds maxnorm).
Tensor Renorm(const Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm) {
  CheckTpu("renorm", self, "self");
  TORCH_CHECK(!self.is_complex(), "renorm: expected a real tensor, got ", self.scalar_type());
  TORCH_CHECK(p.toDouble() > 0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(maxnorm.toDouble() >= 0, "renorm: expected maxnorm to be >= 0 but got ",
              maxnorm.toDouble());
  TORCH_CHECK(self.dim() > 1, "renorm: input needs at least 2 dimensions, got ", self.dim(),
              " dimensions");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> other;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (i != d) other.push_back(i);
  const auto acc = OpMathType(self.scalar_type());
  Tensor norm = at::linalg_vector_norm(self, p, other, /*keepdim=*/true, acc);
  const double mx = maxnorm.toDouble();
  Tensor factor = at::where(at::gt(norm, mx), at::div(at::full_like(norm, mx), at::add(norm, 1e-7)),
                            at::ones_like(norm));
  return at::mul(self, factor).to(self.scalar_type());
}
Tensor renorm_tpu(const Tensor& self, const c10::Scalar& p, int64_t dim,
                  const c10::Scalar& maxnorm) {
  return Renorm(self, p, dim, maxnorm);
}
Tensor& renorm_out_tpu(const Tensor& self, const c10::Scalar& p, int64_t dim,
                       const c10::Scalar& maxnorm, Tensor& out) {
  Tensor r = Renorm(self, p, dim, maxnorm);
  PrepareOut("renorm", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}
Tensor& renorm__tpu(Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm) {
  return self.copy_(Renorm(self, p, dim, maxnorm));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("renorm", TORCH_FN(renorm_tpu));
  m.impl("renorm.out", TORCH_FN(renorm_out_tpu));
  m.impl("renorm_", TORCH_FN(renorm__tpu));
}

}  // namespace tpu::ops
