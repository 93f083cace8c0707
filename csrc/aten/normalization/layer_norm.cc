// Layer norm, forward and backward (native_layer_norm and its backward).
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/layer_norm.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"
#include "aten/kernel_helpers.h"
#include "aten/reduction/moments.h"

namespace tpu::ops {

namespace {

// ---- layer norm ----

// ins = (x, [w], [b]); ints = (M, N, has_w, has_b, acc); floats = (eps).
// Outputs: y, mean, rstd (shapes/dtypes from the out types).
VS LowerLayerNorm(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t m = a.ints[0], n = a.ints[1];
  const auto acc = static_cast<DType>(a.ints[4]);
  Value x = ir::Reshape(b, ir::Convert(b, in[0], acc), {m, n});
  RowStats s = Stats(b, x, a.floats[0]);
  Value y = Normalized(b, x, s.mean, s.rstd);
  size_t next = 1;
  if (a.ints[2]) y = Mul(b, y, ir::BroadcastInDim(b, ir::Reshape(b, ir::Convert(b, in[next++], acc), {n}), {m, n}, {1}));
  if (a.ints[3]) y = Add(b, y, ir::BroadcastInDim(b, ir::Reshape(b, ir::Convert(b, in[next++], acc), {n}), {m, n}, {1}));
  auto fit = [&](Value v, const ir::TensorType& t) { return ir::Reshape(b, ir::Convert(b, v, t.dtype), t.dims); };
  return {fit(y, out[0]), fit(s.mean, out[1]), fit(s.rstd, out[2])};
}
constexpr lazy::Lowering kLayerNorm{"aten::native_layer_norm", &LowerLayerNorm};

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input,
                                                     at::IntArrayRef normalized_shape,
                                                     const std::optional<Tensor>& weight,
                                                     const std::optional<Tensor>& bias,
                                                     double eps) {
  CheckTpu("native_layer_norm", input, "input");
  const Tensor w = Has(weight) ? *weight : Tensor(), bb = Has(bias) ? *bias : Tensor();
  auto [m, n] = at::native::_check_layer_norm_inputs(input, normalized_shape, w, bb);
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  std::vector<int64_t> stat_sizes(input.sizes().begin(), input.sizes().begin() + axis);
  stat_sizes.resize(input.dim(), 1);
  const auto dt = input.scalar_type();
  if (input.numel() == 0) {
    return {EmptyTpu(input.sizes(), dt), EmptyTpu(stat_sizes, dt), EmptyTpu(stat_sizes, dt)};
  }
  std::vector<lazy::Operand> in{OperandOf(input)};
  if (w.defined()) in.push_back(OperandOf(w));
  if (bb.defined()) in.push_back(OperandOf(bb));
  auto r = Run(kLayerNorm, {{m, n, w.defined(), bb.defined(), IrCode(OpMathType(dt))}, {eps}, {}},
               in, {TypeOf(input.sizes(), dt), TypeOf(stat_sizes, dt), TypeOf(stat_sizes, dt)});
  return {r[0], r[1], r[2]};
}

// ins = (g, x, mean, rstd, [w]); ints = (M, N, has_w, acc, want_dx, want_dw,
// want_db). Outputs: the wanted ones of (dx, dw, db), in that order.
VS LowerLayerNormBackward(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t m = a.ints[0], n = a.ints[1];
  const auto acc = static_cast<DType>(a.ints[3]);
  auto rows = [&](Value v) { return ir::Reshape(b, ir::Convert(b, v, acc), {m, n}); };
  auto col = [&](Value v) { return ir::Reshape(b, ir::Convert(b, v, acc), {m}); };
  Value g = rows(in[0]), x = rows(in[1]), mean = col(in[2]), rstd = col(in[3]);
  Value xhat = Normalized(b, x, mean, rstd);
  Value gw = g;
  if (a.ints[2]) gw = Mul(b, g, ir::BroadcastInDim(b, ir::Reshape(b, ir::Convert(b, in[4], acc), {n}), {m, n}, {1}));
  VS r;
  size_t o = 0;
  auto fit = [&](Value v) {
    const ir::TensorType& t = out[o++];
    return ir::Reshape(b, ir::Convert(b, v, t.dtype), t.dims);
  };
  if (a.ints[4]) r.push_back(fit(RowsBackward(b, gw, xhat, rstd)));
  if (a.ints[5]) r.push_back(fit(SumOver(b, Mul(b, g, xhat), {0}, false)));
  if (a.ints[6]) r.push_back(fit(SumOver(b, g, {0}, false)));
  return r;
}
constexpr lazy::Lowering kLayerNormBackward{"aten::native_layer_norm_backward",
                                            &LowerLayerNormBackward};

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(
    const Tensor& grad, const Tensor& input, at::IntArrayRef normalized_shape, const Tensor& mean,
    const Tensor& rstd, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    std::array<bool, 3> mask) {
  CheckTpu("native_layer_norm_backward", grad, "grad_out");
  const Tensor w = Has(weight) ? *weight : Tensor(), bb = Has(bias) ? *bias : Tensor();
  auto [m, n] = at::native::_check_layer_norm_inputs(input, normalized_shape, w, bb);
  const bool want[3] = {mask[0], mask[1] && w.defined(), mask[2] && bb.defined()};
  std::vector<ir::TensorType> types;
  if (want[0]) types.push_back(TypeOf(input.sizes(), input.scalar_type()));
  if (want[1]) types.push_back(TypeOf(w.sizes(), w.scalar_type()));
  if (want[2]) types.push_back(TypeOf(bb.sizes(), bb.scalar_type()));
  Tensor res[3];
  if (types.empty()) return {res[0], res[1], res[2]};
  if (input.numel() == 0) {
    if (want[0]) res[0] = EmptyTpu(input.sizes(), input.scalar_type());
    if (want[1]) res[1] = at::zeros_like(w);
    if (want[2]) res[2] = at::zeros_like(bb);
    return {res[0], res[1], res[2]};
  }
  std::vector<lazy::Operand> in{OperandOf(grad), OperandOf(input), OperandOf(mean), OperandOf(rstd)};
  if (w.defined()) in.push_back(OperandOf(w));
  auto r = Run(kLayerNormBackward,
               {{m, n, w.defined(), IrCode(OpMathType(input.scalar_type())), want[0], want[1], want[2]}, {}, {}},
               in, types);
  size_t k = 0;
  for (int i = 0; i < 3; ++i)
    if (want[i]) res[i] = r[k++];
  return {res[0], res[1], res[2]};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", TORCH_FN(native_layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
}

}  // namespace tpu::ops
