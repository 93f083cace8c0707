// The batch norm entry points of PyTorch's training/inference split
// (_batch_norm_with_update, _batch_norm_no_update, batch_norm_backward),
// routed to native_batch_norm and its backward.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_batch_norm_backward.h>
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

// ---- batch norm entry points of the training/inference split ----

std::tuple<Tensor, Tensor, Tensor, Tensor> batch_norm_with_update_tpu(
    const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    Tensor& running_mean, Tensor& running_var, double momentum, double eps) {
  auto [o, m, r] = at::native_batch_norm(input, weight, bias, running_mean, running_var, true,
                                         momentum, eps);
  return {o, m, r, at::empty({0}, TpuOptions(at::kByte))};
}
std::tuple<Tensor, Tensor, Tensor, Tensor> batch_norm_no_update_tpu(
    const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    double momentum, double eps) {
  const bool have_stats = running_mean.has_value() && running_mean->defined();
  auto [o, m, r] = at::native_batch_norm(input, weight, bias, running_mean, running_var,
                                         !have_stats, momentum, eps);
  return {o, m, r, at::empty({0}, TpuOptions(at::kByte))};
}
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward_tpu(
    const Tensor& grad_out, const Tensor& input, const Tensor& weight,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    const std::optional<Tensor>& save_mean, const std::optional<Tensor>& save_var, bool update,
    double eps, std::array<bool, 3> mask, const Tensor&) {
  return at::native_batch_norm_backward(grad_out, input, weight, running_mean, running_var,
                                        save_mean, save_var, update, eps, mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_batch_norm_with_update", TORCH_FN(batch_norm_with_update_tpu));
  m.impl("_batch_norm_no_update", TORCH_FN(batch_norm_no_update_tpu));
  m.impl("batch_norm_backward", TORCH_FN(batch_norm_backward_tpu));
}

}  // namespace tpu::ops
