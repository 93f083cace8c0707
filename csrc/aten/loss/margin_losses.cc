// multi_margin_loss and multilabel_margin_loss (forward and backward), as
// compositions of tpu ops following CPU's definitions:
//   multi_margin: sum_{i != y} max(0, margin - x[y] + x[i])^p * w[y] / C
//   multilabel_margin: sum_{j target} sum_{i not target} max(0, 1 - x[y_j] + x[i]) / C
// with the targets of a row read up to its first -1.
#include <ATen/core/Reduction.h>
#include <ATen/ops/add.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cumprod.h>
#include <ATen/ops/div.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"

namespace tpu::ops {

namespace {

Tensor Reduce(const Tensor& loss, int64_t reduction, at::IntArrayRef none_shape) {
  if (reduction == at::Reduction::Mean) return at::mean(loss);
  if (reduction == at::Reduction::Sum) return at::sum(loss);
  return loss.reshape(none_shape);
}
// d loss / d per-sample loss, shaped (N, 1).
Tensor GradScale(const Tensor& grad_output, int64_t reduction, int64_t n) {
  if (reduction == at::Reduction::None) return grad_output.reshape({n, 1});
  Tensor g = grad_output.reshape({1, 1});
  return reduction == at::Reduction::Mean ? at::div(g, static_cast<double>(n)) : g;
}

// ---- multi_margin_loss ----

struct MM {
  Tensor x2, t, onehot, z, wy;  // z = margin - x[y] + x (N, C), unclamped
  int64_t n, c;
};
MM MultiMarginParts(const Tensor& self, const Tensor& target, const c10::Scalar& margin,
                    const std::optional<Tensor>& weight) {
  CheckTpu("multi_margin_loss", self, "self");
  TORCH_CHECK(self.dim() <= 2 && (self.dim() == 0 || self.numel() > 0 || self.dim() == 2),
              "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ",
              self.sizes());
  MM m;
  m.x2 = self.dim() <= 1 ? self.reshape({1, -1}) : self;
  m.n = m.x2.size(0);
  m.c = m.x2.size(1);
  TORCH_CHECK(target.numel() == m.n && target.dim() <= 1, "inconsistent target size, expected ",
              m.n, " but got ", target.sizes());
  m.t = target.reshape({m.n, 1}).to(at::kLong);
  Tensor xy = m.x2.gather(1, m.t);
  m.z = at::add(at::sub(m.x2, xy), margin);
  m.onehot = at::zeros({m.n, m.c}, m.x2.options().dtype(at::kBool)).scatter(1, m.t, true);
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK(weight->dim() <= 1 && weight->numel() == m.c, "inconsistent weight size, expected ",
                m.c, " but got ", weight->sizes());
    m.wy = weight->reshape({-1}).index_select(0, m.t.reshape({-1})).reshape({m.n, 1});
  }
  return m;
}

Tensor multi_margin_loss_tpu(const Tensor& self, const Tensor& target, const c10::Scalar& p,
                             const c10::Scalar& margin, const std::optional<Tensor>& weight,
                             int64_t reduction) {
  TORCH_CHECK(p.toLong() == 1 || p.toLong() == 2, "only p == 1 and p == 2 supported");
  MM m = MultiMarginParts(self, target, margin, weight);
  Tensor h = at::clamp_min(m.z, 0);
  if (p.toLong() == 2) h = at::mul(h, h);
  if (m.wy.defined()) h = at::mul(h, m.wy);
  h = at::where(m.onehot, at::zeros({}, h.options()), h);
  Tensor loss = at::div(at::sum(h, 1), static_cast<double>(m.c));
  std::vector<int64_t> none_shape = target.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{m.n};
  return Reduce(loss, reduction, none_shape);
}

Tensor multi_margin_loss_backward_tpu(const Tensor& grad_output, const Tensor& self,
                                      const Tensor& target, const c10::Scalar& p,
                                      const c10::Scalar& margin, const std::optional<Tensor>& weight,
                                      int64_t reduction) {
  MM m = MultiMarginParts(self, target, margin, weight);
  Tensor pos = at::gt(m.z, 0);
  Tensor g = p.toLong() == 2 ? at::mul(at::clamp_min(m.z, 0), 2.0) : pos.to(m.z.scalar_type());
  g = at::where(at::logical_and(pos, at::logical_not(m.onehot)), g, at::zeros({}, g.options()));
  if (m.wy.defined()) g = at::mul(g, m.wy);
  g = at::div(g, static_cast<double>(m.c));
  Tensor gy = at::neg(at::sum(g, 1, /*keepdim=*/true));
  g = at::where(m.onehot, gy, g);
  g = at::mul(g, GradScale(grad_output, reduction, m.n));
  return g.reshape(self.sizes());
}

// ---- multilabel_margin_loss ----

struct ML {
  Tensor x2, tc, valid, is_target, z;  // z (N, S, C) = 1 - x[y_j] + x[i], masked to 0
  int64_t n, c;
};
ML MultilabelParts(const Tensor& self, const Tensor& target) {
  CheckTpu("multilabel_margin_loss", self, "self");
  TORCH_CHECK(self.dim() <= 2, "Expected non-empty vector or matrix with optional 0-dim batch "
              "size, but got: ", self.sizes());
  TORCH_CHECK(target.sizes() == self.sizes(), "inconsistent target size: ", target.sizes(),
              " for input of size: ", self.sizes());
  ML m;
  m.x2 = self.dim() <= 1 ? self.reshape({1, -1}) : self;
  m.n = m.x2.size(0);
  m.c = m.x2.size(1);
  Tensor t = target.reshape({m.n, m.c}).to(at::kLong);
  m.valid = at::cumprod(at::ge(t, 0).to(at::kLong), 1).to(at::kBool);  // up to the first -1
  m.tc = at::where(m.valid, t, at::zeros({}, t.options()));
  Tensor hits = at::zeros({m.n, m.c}, m.x2.options()).scatter_add(1, m.tc, m.valid.to(m.x2.scalar_type()));
  m.is_target = at::gt(hits, 0);
  Tensor xy = m.x2.gather(1, m.tc);                                        // (N, S)
  Tensor z = at::rsub(at::sub(xy.unsqueeze(2), m.x2.unsqueeze(1)), 1.0);   // (N, S, C)
  Tensor keep = at::logical_and(m.valid.unsqueeze(2), at::logical_not(m.is_target).unsqueeze(1));
  m.z = at::where(keep, z, at::zeros({}, z.options()));
  return m;
}

std::tuple<Tensor, Tensor> multilabel_margin_loss_forward_tpu(const Tensor& self, const Tensor& target,
                                                              int64_t reduction) {
  ML m = MultilabelParts(self, target);
  Tensor loss = at::div(at::sum(at::clamp_min(m.z, 0), {1, 2}), static_cast<double>(m.c));
  std::vector<int64_t> none_shape = self.dim() <= 1 ? std::vector<int64_t>{} : std::vector<int64_t>{m.n};
  return {Reduce(loss, reduction, none_shape),
          m.is_target.to(self.scalar_type()).reshape(self.sizes())};
}

Tensor multilabel_margin_loss_backward_tpu(const Tensor& grad_output, const Tensor& self,
                                           const Tensor& target, int64_t reduction,
                                           const Tensor& is_target) {
  (void)is_target;
  ML m = MultilabelParts(self, target);
  Tensor g = at::div(at::gt(m.z, 0).to(self.scalar_type()), static_cast<double>(m.c));  // (N, S, C)
  Tensor gi = at::sum(g, 1);                                                          // + d/dx[i]
  Tensor gy = at::neg(at::sum(g, 2));                                                 // - d/dx[y_j]
  Tensor grad = gi.scatter_add(1, m.tc, gy);
  grad = at::mul(grad, GradScale(grad_output, reduction, m.n));
  return grad.reshape(self.sizes());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multi_margin_loss", TORCH_FN(multi_margin_loss_tpu));
  m.impl("multi_margin_loss_backward", TORCH_FN(multi_margin_loss_backward_tpu));
  m.impl("multilabel_margin_loss_forward", TORCH_FN(multilabel_margin_loss_forward_tpu));
  m.impl("multilabel_margin_loss_backward", TORCH_FN(multilabel_margin_loss_backward_tpu));
}

}  // namespace tpu::ops
