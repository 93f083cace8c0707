// Weight norm (the fused interface: dim first or last), forward and
// backward.
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/layer_norm.h>
#include <ATen/ops/div.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"
#include "aten/kernel_helpers.h"
#include "aten/reduction/moments.h"

namespace tpu::ops {

namespace {

// ---- weight norm (the fused interface: dim first or last) ----

std::vector<int64_t> OtherDims(const Tensor& v, int64_t dim) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < v.dim(); ++i)
    if (i != dim) d.push_back(i);
  return d;
}

std::tuple<Tensor, Tensor> weight_norm_interface_tpu(const Tensor& v, const Tensor& g,
                                                     int64_t dim) {
  CheckTpu("_weight_norm_interface", v, "v");
  CheckTpu("_weight_norm_interface", g, "g");
  TORCH_CHECK(v.device() == g.device(), "weight_norm: v and g must be on the same device");
  const int64_t d = dim < 0 ? dim + v.dim() : dim;
  TORCH_CHECK(d == 0 || d == v.dim() - 1, "fused kernels can only be applied for first or last dim");
  const auto acc = OpMathType(v.scalar_type());
  Tensor vf = v.to(acc);
  Tensor norm = at::linalg_vector_norm(vf, 2, OtherDims(v, d), /*keepdim=*/true);
  Tensor w = at::mul(vf, at::div(g.to(acc), norm)).to(v.scalar_type());
  return {w, norm};
}

std::tuple<Tensor, Tensor> weight_norm_interface_backward_tpu(const Tensor& grad_w,
                                                              const Tensor& saved_v,
                                                              const Tensor& saved_g,
                                                              const Tensor& saved_norms,
                                                              int64_t dim) {
  CheckTpu("_weight_norm_interface_backward", grad_w, "grad_w");
  const int64_t d = dim < 0 ? dim + saved_v.dim() : dim;
  TORCH_CHECK(d == 0 || d == saved_v.dim() - 1,
              "fused kernels can only be applied for first or last dim");
  const auto acc = OpMathType(saved_v.scalar_type());
  Tensor gw = grad_w.to(acc), v = saved_v.to(acc), g = saved_g.to(acc), n = saved_norms.to(acc);
  Tensor s = at::sum(at::mul(gw, v), OtherDims(saved_v, d), /*keepdim=*/true);
  Tensor grad_g = at::div(s, n);
  Tensor grad_v = at::mul(at::div(g, n), at::sub(gw, at::mul(v, at::div(s, at::mul(n, n)))));
  return {grad_v.to(saved_v.scalar_type()), grad_g.to(saved_g.scalar_type())};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_weight_norm_interface", TORCH_FN(weight_norm_interface_tpu));
  m.impl("_weight_norm_interface_backward", TORCH_FN(weight_norm_interface_backward_tpu));
}

}  // namespace tpu::ops
