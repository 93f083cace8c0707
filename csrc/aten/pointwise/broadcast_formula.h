// Pointwise formulas over broadcast inputs, with an optional reduction: the
// framework of the pointwise losses (loss/pointwise_losses.cc) and of the
// activations written as formulas of their input
// (pointwise/softplus_mish_hardswish_glu.cc).
//
// A lowering LowerPointwise<F> broadcasts its inputs to a common shape,
// converts them to the compute dtype, applies the formula F and reduces the
// result (none / mean / sum) or converts it back; Pointwise() runs one.
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>

#include <vector>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"

namespace tpu::ops::broadcast_formula {

// ---- formula helpers (C, Add, Sub, Mul, Div: aten/formula.h) ----
// |x|; unsigned integers and booleans are their own absolute value (XLA's
// abs takes signed types only).
inline Value Abs(Builder& b, Value x) {
  const DType t = b.type(x).dtype;
  if (ir::IsUnsigned(t) || t == DType::PRED) return x;
  return ir::Unary(b, "stablehlo.abs", x);
}
inline Value Sign(Builder& b, Value x) { return ir::Unary(b, "stablehlo.sign", x); }
inline Value Sigmoid(Builder& b, Value x) { return ir::Unary(b, "stablehlo.logistic", x); }
inline Value Lt(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::LT); }
inline Value Le(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::LE); }
inline Value Gt(Builder& b, Value x, Value y) { return ir::Compare(b, x, y, ir::Cmp::GT); }
inline Value Clamp(Builder& b, Value x, double lo, double hi) {
  return ir::Min(b, ir::Max(b, x, C(b, lo, x)), C(b, hi, x));
}
// softplus with PyTorch's threshold: x where beta*x > threshold.
inline Value Softplus(Builder& b, Value x, double beta, double threshold) {
  Value bx = Mul(b, x, C(b, beta, x));
  Value soft = Div(b, ir::Unary(b, "stablehlo.log_plus_one", ir::Unary(b, "stablehlo.exponential", bx)),
                   C(b, beta, x));
  return ir::Select(b, Gt(b, bx, C(b, threshold, x)), x, soft);
}

// A formula of the (broadcast, compute-dtype) inputs and the float params.
using Formula = Value (*)(Builder&, const VS&, const std::vector<double>&);

// ints = (compute dtype, reduction, broadcast dims...); floats = params.
// reduction: 0 none (the value in the output dtype), 1 mean, 2 sum.
template <Formula F>
VS LowerPointwise(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto ct = static_cast<DType>(a.ints[0]);
  const int64_t reduction = a.ints[1];
  const ir::Dims dims(a.ints.begin() + 2, a.ints.end());
  VS xs;
  for (Value v : in) xs.push_back(ir::BroadcastTo(b, ir::Convert(b, v, ct), dims));
  Value r = F(b, xs, a.floats);
  if (reduction != at::Reduction::None) {
    ir::Dims all;
    for (size_t i = 0; i < dims.size(); ++i) all.push_back(static_cast<int64_t>(i));
    Value s = ir::Reduce(b, r, ir::ConstantI(b, 0, ct), all, "stablehlo.add");
    if (reduction == at::Reduction::Mean) s = Div(b, s, ir::CountOver(b, r, all));
    r = s;
  }
  return {ir::Reshape(b, ir::Convert(b, r, out[0].dtype), out[0].dims)};
}

// Runs a pointwise lowering: the inputs broadcast together, computed in
// the opmath type of `dtype`, reduced by `reduction`.
inline Tensor Pointwise(const lazy::Lowering& op, const std::vector<Tensor>& ins, std::vector<double> params,
                        int64_t reduction, at::ScalarType dtype) {
  std::vector<lazy::Operand> operands;
  std::vector<int64_t> shape;
  for (const Tensor& t : ins) {
    CheckTpu(op.name, t, "input");
    shape = shape.empty() && &t == &ins[0] ? t.sizes().vec() : at::infer_size(shape, t.sizes());
    operands.push_back(OperandOf(t));
  }
  TORCH_CHECK(at::isFloatingType(dtype), op.name, ": expected a floating point tensor, got ", dtype);
  TORCH_CHECK(reduction >= 0 && reduction <= 2, op.name, ": invalid reduction ", reduction);
  lazy::Attrs attrs{{IrCode(OpMathType(dtype)), reduction}, std::move(params), {}};
  attrs.ints.insert(attrs.ints.end(), shape.begin(), shape.end());
  const std::vector<int64_t> out = reduction == at::Reduction::None ? shape : std::vector<int64_t>{};
  return Run1(op, attrs, operands, TypeOf(out, dtype));
}

// A backward result at the broadcast shape, summed to `like`'s shape.
inline Tensor SumTo(const Tensor& r, const Tensor& like) {
  return r.sizes() == like.sizes() ? r : at::sum_to(r, like.sizes());
}

}  // namespace tpu::ops::broadcast_formula
