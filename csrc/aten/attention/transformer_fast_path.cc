// The "fast path" ops that nn.MultiheadAttention and nn.TransformerEncoderLayer
// call in inference (eval mode, no grad) on devices PyTorch lists as fast-path
// capable, PrivateUse1 among them. Each is the same math as the modules'
// ordinary path, written with ATen ops (so it records and fuses like any other
// tpu code), with the fast path's own mask rule: a mask marks positions that
// are left out (a float mask counts as true where it is non-zero).
#include <ATen/ops/_native_multi_head_attention.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/softmax.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"

namespace tpu::ops {

namespace {

// The mask as [B or 1, H or 1, L or 1, S], true where a key is left out.
// mask_type 0: [L, S]; 1: key padding [B, S]; 2: broadcastable to [B, H, L, S].
Tensor LeftOut(const Tensor& mask, std::optional<int64_t> mask_type, int64_t b, int64_t s) {
  Tensor m = mask.scalar_type() == at::kBool ? mask : mask.ne(0);
  const int64_t type = mask_type.value_or(m.dim() == 2 && m.size(0) == b ? 1 : 2);
  if (type == 1) return m.view({b, 1, 1, s});
  if (type == 0 || m.dim() == 2) return m.view({1, 1, m.size(0), m.size(1)});
  while (m.dim() < 4) m = m.unsqueeze(0);
  return m;
}

std::tuple<Tensor, Tensor> native_mha(const Tensor& query, const Tensor& key, const Tensor& value,
                                      int64_t embed_dim, int64_t num_head,
                                      const Tensor& qkv_weight, const Tensor& qkv_bias,
                                      const Tensor& proj_weight, const Tensor& proj_bias,
                                      const std::optional<Tensor>& mask, bool need_weights,
                                      bool average_attn_weights,
                                      std::optional<int64_t> mask_type) {
  const char* op = "_native_multi_head_attention";
  for (const Tensor* t : {&query, &key, &value, &qkv_weight, &qkv_bias, &proj_weight, &proj_bias})
    CheckTpu(op, *t, "input");
  TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3, op,
              ": expected 3-D query, key and value (batch first), got ", query.dim(), "-D, ",
              key.dim(), "-D and ", value.dim(), "-D");
  TORCH_CHECK(query.size(2) == embed_dim, op, ": query's last dim ", query.size(2),
              " is not embed_dim ", embed_dim);
  TORCH_CHECK(embed_dim % num_head == 0, op, ": embed_dim must be divisible by num_head");
  const int64_t b = query.size(0), l = query.size(1), s = key.size(1);
  const int64_t h = num_head, d = embed_dim / num_head;
  auto w = qkv_weight.split(embed_dim, 0);
  auto bias = qkv_bias.split(embed_dim, 0);
  auto heads = [&](const Tensor& x, int64_t n) { return x.view({b, n, h, d}).transpose(1, 2); };
  Tensor q = heads(at::linear(query, w[0], bias[0]), l).mul(1.0 / std::sqrt(double(d)));
  Tensor k = heads(at::linear(key, w[1], bias[1]), s);
  Tensor v = heads(at::linear(value, w[2], bias[2]), s);
  Tensor scores = at::matmul(q, k.transpose(-2, -1));  // [B, H, L, S]
  Tensor weights;
  if (mask.has_value() && mask->defined()) {
    Tensor out = LeftOut(*mask, mask_type, b, s);
    scores = scores.masked_fill(out, -std::numeric_limits<double>::infinity());
  }
  weights = at::softmax(scores, -1);  // a row with every key left out is NaN, as on CPU
  Tensor ctx = at::matmul(weights, v).transpose(1, 2).reshape({b, l, embed_dim});
  Tensor proj = at::linear(ctx, proj_weight, proj_bias);
  if (!need_weights) return {proj, Tensor()};
  if (average_attn_weights) weights = weights.sum(1).div(h);
  return {proj, weights};
}

Tensor encoder_layer_fwd(const Tensor& src, int64_t embed_dim, int64_t num_heads,
                         const Tensor& qkv_weight, const Tensor& qkv_bias,
                         const Tensor& proj_weight, const Tensor& proj_bias, bool use_gelu,
                         bool norm_first, double eps, const Tensor& norm_weight_1,
                         const Tensor& norm_bias_1, const Tensor& norm_weight_2,
                         const Tensor& norm_bias_2, const Tensor& ffn_weight_1,
                         const Tensor& ffn_bias_1, const Tensor& ffn_weight_2,
                         const Tensor& ffn_bias_2, const std::optional<Tensor>& mask,
                         std::optional<int64_t> mask_type) {
  CheckTpu("_transformer_encoder_layer_fwd", src, "src");
  const std::vector<int64_t> shape{embed_dim};
  auto attend = [&](const Tensor& x) {
    return std::get<0>(at::_native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight,
                                                        qkv_bias, proj_weight, proj_bias, mask,
                                                        false, true, mask_type));
  };
  auto ffn = [&](const Tensor& x) {
    Tensor hdn = at::linear(x, ffn_weight_1, ffn_bias_1);
    hdn = use_gelu ? at::gelu(hdn) : at::relu(hdn);
    return at::linear(hdn, ffn_weight_2, ffn_bias_2);
  };
  auto ln1 = [&](const Tensor& x) { return at::layer_norm(x, shape, norm_weight_1, norm_bias_1, eps); };
  auto ln2 = [&](const Tensor& x) { return at::layer_norm(x, shape, norm_weight_2, norm_bias_2, eps); };
  Tensor x = src;
  if (norm_first) {
    x = x.add(attend(ln1(x)));
    return x.add(ffn(ln2(x)));
  }
  x = ln1(x.add(attend(x)));
  return ln2(x.add(ffn(x)));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_multi_head_attention", TORCH_FN(native_mha));
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(encoder_layer_fwd));
}

}  // namespace tpu::ops
