// Softmax, log-softmax and the negative log-likelihood loss, with backward.
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/indexing/index_checks.h"

namespace tpu::ops {

namespace {

// Reduces `x` over `dim` and broadcasts the result back to x's shape.
Value ReduceKeep(Builder& b, Value x, int64_t dim, bool is_max) {
  const ir::TensorType t = b.type(x);
  Value init = is_max ? ir::MinValue(b, t.dtype) : ir::ConstantI(b, 0, t.dtype);
  Value r = ir::Reduce(b, x, init, {dim}, is_max ? "stablehlo.maximum" : "stablehlo.add");
  ir::Dims bdims;
  for (int64_t i = 0; i < t.rank(); ++i)
    if (i != dim) bdims.push_back(i);
  return ir::BroadcastInDim(b, r, t.dims, bdims);
}

// ints = (dim, log, compute dtype)
VS LowerSoftmax(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t dim = a.ints[0];
  Value x = ir::Convert(b, in[0], static_cast<DType>(a.ints[2]));
  Value shifted = ir::Binary(b, "stablehlo.subtract", x, ReduceKeep(b, x, dim, true));
  Value e = ir::Unary(b, "stablehlo.exponential", shifted);
  Value s = ReduceKeep(b, e, dim, false);
  Value r = a.ints[1] ? ir::Binary(b, "stablehlo.subtract", shifted, ir::Unary(b, "stablehlo.log", s))
                      : ir::Binary(b, "stablehlo.divide", e, s);
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kSoftmax{"aten::_softmax", &LowerSoftmax};

// ins = (grad, output); ints = (dim, log, compute dtype)
VS LowerSoftmaxGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t dim = a.ints[0];
  const auto ct = static_cast<DType>(a.ints[2]);
  Value g = ir::Convert(b, in[0], ct);
  Value y = ir::Convert(b, in[1], ct);
  Value r;
  if (a.ints[1]) {  // g - exp(y) * sum(g)
    r = ir::Binary(b, "stablehlo.subtract", g,
                   ir::Binary(b, "stablehlo.multiply", ir::Unary(b, "stablehlo.exponential", y),
                              ReduceKeep(b, g, dim, false)));
  } else {  // y * (g - sum(g * y))
    Value gy = ir::Binary(b, "stablehlo.multiply", g, y);
    r = ir::Binary(b, "stablehlo.multiply", y,
                   ir::Binary(b, "stablehlo.subtract", g, ReduceKeep(b, gy, dim, false)));
  }
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kSoftmaxGrad{"aten::_softmax_backward_data", &LowerSoftmaxGrad};

Tensor Softmax(const Tensor& self, int64_t dim, bool half_to_float, bool log) {
  CheckTpu(log ? "_log_softmax" : "_softmax", self, "self");
  const int64_t d = self.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, self.dim());
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  if (half_to_float)
    TORCH_CHECK(self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16,
                "conversion is supported for Half type only");
  const auto rt = half_to_float ? at::kFloat : self.scalar_type();
  TORCH_CHECK(at::isFloatingType(rt), "\"softmax\" not implemented for '", c10::toString(rt), "'");
  Tensor r = Run1(kSoftmax, {{d, log ? 1 : 0, static_cast<int64_t>(ToIr(OpMathType(rt)))}, {}, {}},
                  {OperandOf(x)}, TypeOf(x.sizes(), rt));
  return self.dim() == 0 ? r.reshape({}) : r;
}
Tensor _softmax(const Tensor& s, int64_t dim, bool h) { return Softmax(s, dim, h, false); }
Tensor _log_softmax(const Tensor& s, int64_t dim, bool h) { return Softmax(s, dim, h, true); }

Tensor SoftmaxGrad(const Tensor& g, const Tensor& y, int64_t dim, at::ScalarType input_dtype,
                   bool log) {
  CheckTpu("_softmax_backward_data", g, "grad_output");
  const int64_t d = y.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, y.dim());
  Tensor gg = y.dim() == 0 ? g.reshape({1}) : g;
  Tensor yy = y.dim() == 0 ? y.reshape({1}) : y;
  Tensor r = Run1(kSoftmaxGrad,
                  {{d, log ? 1 : 0, static_cast<int64_t>(ToIr(OpMathType(input_dtype)))}, {}, {}},
                  {OperandOf(gg), OperandOf(yy)}, TypeOf(yy.sizes(), input_dtype));
  return y.dim() == 0 ? r.reshape({}) : r;
}
Tensor _softmax_backward_data(const Tensor& g, const Tensor& y, int64_t dim, at::ScalarType t) {
  return SoftmaxGrad(g, y, dim, t, false);
}
Tensor _log_softmax_backward_data(const Tensor& g, const Tensor& y, int64_t dim,
                                  at::ScalarType t) {
  return SoftmaxGrad(g, y, dim, t, true);
}

// ---- nll_loss ----
// self: [N, C] (or [C]), target: [N] (or []). Per-sample weight w_i =
// weight[target_i] (1 without weight), 0 where target_i == ignore_index.

struct NllParts {
  Value mask;  // [N, C] one-hot of target
  Value w;     // [N] per-sample weight
};

NllParts NllCommon(Builder& b, Value self, Value target, Value* weight, int64_t ignore_index) {
  const ir::TensorType st = b.type(self);
  const int64_t n = st.dims[0], c = st.dims[1];
  Value tgt = ir::Convert(b, target, DType::S64);
  Value classes = ir::Iota(b, {n, c}, 1, DType::S64);
  Value mask = ir::Compare(b, classes, ir::BroadcastInDim(b, tgt, {n, c}, {0}), ir::Cmp::EQ);
  Value zero_nc = ir::Full(b, ir::ConstantI(b, 0, st.dtype), {n, c});
  Value w;
  if (weight) {
    Value wb = ir::BroadcastInDim(b, ir::Convert(b, *weight, st.dtype), {n, c}, {1});
    w = ir::Reduce(b, ir::Select(b, mask, wb, zero_nc), ir::ConstantI(b, 0, st.dtype), {1},
                   "stablehlo.add");
  } else {
    w = ir::Full(b, ir::ConstantI(b, 1, st.dtype), {n});
  }
  Value valid = ir::Compare(b, tgt, ir::Full(b, ir::ConstantI(b, ignore_index, DType::S64), {n}),
                            ir::Cmp::NE);
  w = ir::Select(b, valid, w, ir::Full(b, ir::ConstantI(b, 0, st.dtype), {n}));
  return {mask, w};
}

// ins = (self, target[, weight]); ints = (reduction, ignore_index, has_weight)
VS LowerNll(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  Value self = in[0];
  const ir::TensorType st = b.type(self);
  const bool batched = st.rank() == 2;
  if (!batched) self = ir::Reshape(b, self, {1, st.dims[0]});
  Value target = ir::Reshape(b, in[1], {b.type(self).dims[0]});
  Value weight = a.ints[2] ? in[2] : Value{};
  NllParts p = NllCommon(b, self, target, a.ints[2] ? &weight : nullptr, a.ints[1]);
  const ir::TensorType t = b.type(self);
  Value picked = ir::Reduce(b, ir::Select(b, p.mask, self, ir::Full(b, ir::ConstantI(b, 0, t.dtype), t.dims)),
                            ir::ConstantI(b, 0, t.dtype), {1}, "stablehlo.add");
  Value loss = ir::Unary(b, "stablehlo.negate", ir::Binary(b, "stablehlo.multiply", picked, p.w));
  Value total = ir::Reduce(b, p.w, ir::ConstantI(b, 0, t.dtype), {0}, "stablehlo.add");
  Value result;
  switch (a.ints[0]) {
    case 0:  // none
      result = ir::Reshape(b, loss, out[0].dims);
      break;
    case 1:  // mean
      result = ir::Binary(b, "stablehlo.divide",
                          ir::Reduce(b, loss, ir::ConstantI(b, 0, t.dtype), {0}, "stablehlo.add"),
                          total);
      break;
    default:  // sum
      result = ir::Reduce(b, loss, ir::ConstantI(b, 0, t.dtype), {0}, "stablehlo.add");
  }
  return {result, total};
}
constexpr lazy::Lowering kNll{"aten::nll_loss_forward", &LowerNll};

// ins = (grad, self, target, total_weight[, weight]); ints as forward.
VS LowerNllGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::TensorType st = b.type(in[1]);
  const bool batched = st.rank() == 2;
  const ir::Dims nc = batched ? st.dims : ir::Dims{1, st.dims[0]};
  const int64_t n = nc[0];
  Value target = ir::Reshape(b, in[2], {n});
  Value self = ir::Reshape(b, in[1], nc);
  Value weight = a.ints[2] ? in[4] : Value{};
  NllParts p = NllCommon(b, self, target, a.ints[2] ? &weight : nullptr, a.ints[1]);
  Value g = ir::Convert(b, in[0], st.dtype);
  Value scale;  // [N] gradient of each sample's loss
  if (a.ints[0] == 0) {
    scale = ir::Binary(b, "stablehlo.multiply", ir::Reshape(b, g, {n}), p.w);
  } else {
    Value gs = ir::Reshape(b, g, {});
    if (a.ints[0] == 1) gs = ir::Binary(b, "stablehlo.divide", gs, ir::Convert(b, in[3], st.dtype));
    scale = ir::Binary(b, "stablehlo.multiply", ir::Full(b, gs, {n}), p.w);
  }
  Value neg = ir::BroadcastInDim(b, ir::Unary(b, "stablehlo.negate", scale), nc, {0});
  Value r = ir::Select(b, p.mask, neg, ir::Full(b, ir::ConstantI(b, 0, st.dtype), nc));
  return {ir::Reshape(b, r, out[0].dims)};
}
constexpr lazy::Lowering kNllGrad{"aten::nll_loss_backward", &LowerNllGrad};

void CheckNll(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight) {
  CheckTpu("nll_loss", self, "self");
  CheckTpu("nll_loss", target, "target");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1,
              "0D or 1D target tensor expected, multi-target not supported");
  TORCH_CHECK_VALUE(self.dim() != 1 || target.dim() != 1 || target.size(0) == 1,
                    "For 1D input, 1D target must have size 1, but got target size: ",
                    target.size(0));
  const bool no_batch_dim = self.dim() == 1 && target.dim() == 0;
  TORCH_CHECK(no_batch_dim || (self.size(0) == target.size(0)), "size mismatch (got input: ",
              self.sizes(), ", target: ", target.sizes(), ")");
  TORCH_CHECK(target.scalar_type() == at::kLong || target.scalar_type() == at::kByte,
              "expected scalar type Long but found ", target.scalar_type());
  const int64_t n_classes = self.size(-1);
  if (weight.has_value() && weight->defined())
    TORCH_CHECK(weight->dim() == 1 && weight->numel() == n_classes,
                "weight tensor should be defined either for all ", n_classes,
                " classes or no classes but got weight tensor of shape: ", weight->sizes());
}

std::tuple<Tensor, Tensor> nll_loss_forward(const Tensor& self, const Tensor& target,
                                            const std::optional<Tensor>& weight,
                                            int64_t reduction, int64_t ignore_index) {
  CheckNll(self, target, weight);
  const int64_t classes = self.size(self.dim() == 1 ? 0 : 1);
  CheckIndexRange({"aten::nll_loss_forward", true, false, "Target ", " is out of bounds."}, target,
                  classes, ignore_index);
  const bool has_w = weight.has_value() && weight->defined();
  std::vector<lazy::Operand> in{OperandOf(self), OperandOf(target)};
  if (has_w) in.push_back(OperandOf(*weight));
  std::vector<int64_t> out_sizes;
  if (reduction == 0 && self.dim() == 2) out_sizes = {self.size(0)};
  auto r = Run(kNll, {{reduction, ignore_index, has_w ? 1 : 0}, {}, {}}, in,
               {TypeOf(out_sizes, self.scalar_type()), TypeOf({}, self.scalar_type())});
  return {r[0], r[1]};
}

Tensor nll_loss_backward(const Tensor& grad, const Tensor& self, const Tensor& target,
                         const std::optional<Tensor>& weight, int64_t reduction,
                         int64_t ignore_index, const Tensor& total_weight) {
  CheckNll(self, target, weight);
  const bool has_w = weight.has_value() && weight->defined();
  std::vector<lazy::Operand> in{OperandOf(grad), OperandOf(self), OperandOf(target),
                                OperandOf(total_weight)};
  if (has_w) in.push_back(OperandOf(*weight));
  return Run1(kNllGrad, {{reduction, ignore_index, has_w ? 1 : 0}, {}, {}}, in,
              TypeOf(self.sizes(), self.scalar_type()));
}


// ---- nll_loss2d: the 1-d loss over [N*H*W, C] ----

void CheckNll2d(const Tensor& self, const Tensor& target) {
  CheckTpu("nll_loss2d", self, "self");
  CheckTpu("nll_loss2d", target, "target");
  TORCH_CHECK(target.dim() == 3,
              "only batches of spatial targets supported (3D tensors) but got targets of dimension: ",
              target.dim());
  TORCH_CHECK(self.dim() == 4,
              "only batches of spatial inputs supported (4D tensors), but got input of dimension: ",
              self.dim());
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) &&
                  self.size(3) == target.size(2),
              "input and target batch or spatial sizes don't match: target ", target.sizes(),
              ", input ", self.sizes());
}

Tensor Rows(const Tensor& self) {  // [N, C, H, W] -> [N*H*W, C]
  return self.permute({0, 2, 3, 1}).reshape({-1, self.size(1)});
}

std::tuple<Tensor, Tensor> nll_loss2d_forward(const Tensor& self, const Tensor& target,
                                              const std::optional<Tensor>& weight,
                                              int64_t reduction, int64_t ignore_index) {
  CheckNll2d(self, target);
  auto [loss, total] =
      ops::nll_loss_forward(Rows(self), target.reshape({-1}), weight, reduction, ignore_index);
  if (reduction == 0) loss = loss.reshape(target.sizes());
  return {loss, total};
}

Tensor nll_loss2d_backward(const Tensor& grad, const Tensor& self, const Tensor& target,
                           const std::optional<Tensor>& weight, int64_t reduction,
                           int64_t ignore_index, const Tensor& total_weight) {
  CheckNll2d(self, target);
  Tensor g = reduction == 0 ? grad.reshape({-1}) : grad;
  Tensor r = ops::nll_loss_backward(g, Rows(self), target.reshape({-1}), weight, reduction,
                               ignore_index, total_weight);
  return r.reshape({self.size(0), self.size(2), self.size(3), self.size(1)})
      .permute({0, 3, 1, 2})
      .contiguous();
}
}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", TORCH_FN(_softmax));
  m.impl("_log_softmax", TORCH_FN(_log_softmax));
  m.impl("_softmax_backward_data", TORCH_FN(_softmax_backward_data));
  m.impl("_log_softmax_backward_data", TORCH_FN(_log_softmax_backward_data));
  m.impl("nll_loss_forward", TORCH_FN(nll_loss_forward));
  m.impl("nll_loss_backward", TORCH_FN(nll_loss_backward));
  m.impl("nll_loss2d_forward", TORCH_FN(nll_loss2d_forward));
  m.impl("nll_loss2d_backward", TORCH_FN(nll_loss2d_backward));
}

}  // namespace tpu::ops
