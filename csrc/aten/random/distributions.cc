// The random distributions built on uniform_ and normal_: exponential,
// cauchy, geometric, log_normal and normal with tensor parameters.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/add.h>
#include <ATen/ops/ceil.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/full.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/min.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tan.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "lazy/executor.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/complex.h"
#include "aten/kernel_helpers.h"
#include "aten/indexing/index_checks.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

namespace {

// ---- random distributions, from uniform_ / normal_ ----

void CheckFloat(const char* op, const Tensor& self) {
  CheckTpu(op, self, "self");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, " expects a floating point tensor, got ",
              self.scalar_type());
}
Tensor& exponential__tpu(Tensor& self, double lambd, std::optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  CheckFloat("exponential_", self);
  Tensor u = at::empty(self.sizes(), TpuOptions(at::kFloat)).uniform_(0, 1, gen);
  return self.copy_(at::mul(at::log1p(at::mul(u, -1.0)), -1.0 / lambd));
}
Tensor& cauchy__tpu(Tensor& self, double median, double sigma, std::optional<at::Generator> gen) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  CheckFloat("cauchy_", self);
  Tensor u = at::empty(self.sizes(), TpuOptions(at::kFloat)).uniform_(0, 1, gen);
  return self.copy_(at::add(at::mul(at::tan(at::mul(at::sub(u, 0.5), M_PI)), sigma), median));
}
Tensor& geometric__tpu(Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  CheckTpu("geometric_", self, "self");
  Tensor u = at::empty(self.sizes(), TpuOptions(at::kFloat)).uniform_(0, 1, gen);
  // 1 - u is in (0, 1]: log of it is finite.
  Tensor r = at::ceil(at::mul(at::log(at::rsub(u, 1.0)), 1.0 / std::log1p(-p)));
  return self.copy_(at::where(at::lt(r, 1.0), at::full({}, 1.0, TpuOptions(at::kFloat)), r));
}
Tensor& log_normal__tpu(Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  CheckFloat("log_normal_", self);
  Tensor z = at::empty(self.sizes(), TpuOptions(self.scalar_type())).normal_(mean, std, gen);
  return self.copy_(at::exp(z));
}

// As CPU and CUDA: a host read of min(std) (not while a graph is captured,
// where it would end the capture).
void CheckStd(const Tensor& std) {
  TORCH_CHECK(!std.is_complex(), "normal expects standard deviation to be non-complex");
  if (std.numel() == 0 || lazy::Executor::Get().capturing()) return;
  TORCH_CHECK(at::min(std).ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
}

Tensor NormalOf(const Tensor& mean, const Tensor& std, std::optional<at::Generator> gen) {
  auto shape = at::infer_size(mean.sizes(), std.sizes());
  auto dt = at::result_type(mean, std);
  TORCH_CHECK(at::isFloatingType(dt), "normal expects floating point mean and std, got ", dt);
  Tensor z = at::empty(shape, TpuOptions(dt)).normal_(0, 1, gen);
  return at::add(at::mul(z, std), mean);
}
Tensor normal_tt_tpu(const Tensor& mean, const Tensor& std, std::optional<at::Generator> gen) {
  CheckStd(std);
  return NormalOf(mean, std, gen);
}
Tensor normal_tf_tpu(const Tensor& mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  return NormalOf(mean, at::full({}, std, TpuOptions(mean.scalar_type())), gen);
}
Tensor normal_ft_tpu(double mean, const Tensor& std, std::optional<at::Generator> gen) {
  CheckStd(std);
  return NormalOf(at::full({}, mean, TpuOptions(std.scalar_type())), std, gen);
}
Tensor& normal_tt_out_tpu(const Tensor& mean, const Tensor& std, std::optional<at::Generator> gen,
                          Tensor& out) {
  return CopyInto("normal", normal_tt_tpu(mean, std, gen), out);
}
Tensor& normal_tf_out_tpu(const Tensor& mean, double std, std::optional<at::Generator> gen,
                          Tensor& out) {
  return CopyInto("normal", normal_tf_tpu(mean, std, gen), out);
}
Tensor& normal_ft_out_tpu(double mean, const Tensor& std, std::optional<at::Generator> gen,
                          Tensor& out) {
  return CopyInto("normal", normal_ft_tpu(mean, std, gen), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("exponential_", TORCH_FN(exponential__tpu));
  m.impl("cauchy_", TORCH_FN(cauchy__tpu));
  m.impl("geometric_", TORCH_FN(geometric__tpu));
  m.impl("log_normal_", TORCH_FN(log_normal__tpu));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normal_tt_tpu));
  m.impl("normal.Tensor_float", TORCH_FN(normal_tf_tpu));
  m.impl("normal.float_Tensor", TORCH_FN(normal_ft_tpu));
  m.impl("normal.Tensor_Tensor_out", TORCH_FN(normal_tt_out_tpu));
  m.impl("normal.Tensor_float_out", TORCH_FN(normal_tf_out_tpu));
  m.impl("normal.float_Tensor_out", TORCH_FN(normal_ft_out_tpu));
}

}  // namespace tpu::ops
