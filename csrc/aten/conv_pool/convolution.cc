// Convolution (1d/2d/3d, groups, dilation, padding, transposed) and its
// backward, as stablehlo.convolution. Three builders cover all cases:
// forward, gradient of the input, gradient of the weight; a transposed
// convolution is the input-gradient of a plain one, and vice versa.
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/precision.h"

namespace tpu::ops {

using ir::Dims;

namespace {

struct ConvParams {
  Dims stride, padding, dilation, output_padding;
  int64_t groups = 1;
  bool transposed = false;
};

// "[b, f, 0, 1]": tensor dims in order, labelled.
std::string Labels(const char* first, const char* second, size_t spatial) {
  std::string s = "[";
  s += first;
  s += ", ";
  s += second;
  for (size_t i = 0; i < spatial; ++i) s += ", " + std::to_string(i);
  return s + "]";
}

std::string PaddingAttr(const Dims& lo, const Dims& hi) {
  std::string s = "dense<[";
  for (size_t i = 0; i < lo.size(); ++i) {
    if (i) s += ", ";
    s += "[" + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + "]";
  }
  return s + "]> : tensor<" + std::to_string(lo.size()) + "x2xi64>";
}

// One stablehlo.convolution. `lhs_spec`/`rhs_spec`/`out_spec` label dims.
Value RawConv(Builder& b, Value lhs, Value rhs, const ir::TensorType& out, const char* lhs0,
              const char* lhs1, const char* rhs0, const char* rhs1, const char* out0,
              const char* out1, const Dims& strides,
              const Dims& pad_lo, const Dims& pad_hi, const Dims& rhs_dilation,
              int64_t feature_groups, int64_t batch_groups) {
  const size_t n = strides.size();
  const std::string dn = "#stablehlo.conv<" + Labels(lhs0, lhs1, n) + "x" + Labels(rhs0, rhs1, n) +
                         "->" + Labels(out0, out1, n) + ">";
  return b.Op1("stablehlo.convolution", {lhs, rhs}, out,
               {{"batch_group_count", std::to_string(batch_groups) + " : i64"},
                {"dimension_numbers", dn},
                {"feature_group_count", std::to_string(feature_groups) + " : i64"},
                {"lhs_dilation", ir::I64Array(Dims(n, 1))},
                {"padding", PaddingAttr(pad_lo, pad_hi)},
                {"rhs_dilation", ir::I64Array(rhs_dilation)},
                {"window_strides", ir::I64Array(strides)}});
}

// Runs `conv` (linear in both operands) with the TPU precision's numerics:
// f32 operands rounded to bf16 for DEFAULT, split in hi + lo for HIGH.
template <typename F>
Value PreciseConv(Builder& b, Value lhs, Value rhs, Precision p, F conv) {
  if (b.type(lhs).dtype != DType::F32 || p == Precision::kHighest) return conv(lhs, rhs);
  auto round = [&](Value x) { return ir::RoundToBF16(b, x); };
  Value lh = round(lhs), rh = round(rhs);
  Value r = conv(lh, rh);
  if (p == Precision::kHigh) {
    Value ll = round(ir::Binary(b, "stablehlo.subtract", lhs, lh));
    Value rl = round(ir::Binary(b, "stablehlo.subtract", rhs, rh));
    r = ir::Binary(b, "stablehlo.add",
                   ir::Binary(b, "stablehlo.add", conv(lh, rl), conv(ll, rh)), r);
  }
  return r;
}

// Forward: x [N, C, s...], w [O, C/g, k...] -> [N, O, o...].
Value ConvForward(Builder& b, Value x, Value w, const ConvParams& p, const ir::TensorType& out,
                  Precision prec) {
  return PreciseConv(b, x, w, prec, [&](Value l, Value r) {
    return RawConv(b, l, r, out, "b", "f", "o", "i", "b", "f", p.stride, p.padding, p.padding,
                   p.dilation, p.groups, 1);
  });
}

// The weight of the input-gradient convolution: i/o swapped per group and
// the window reversed.
Value SwapFlip(Builder& b, Value w, int64_t groups) {
  const ir::TensorType t = b.type(w);
  const int64_t o = t.dims[0], i = t.dims[1];
  Dims grouped{groups, o / groups, i};
  grouped.insert(grouped.end(), t.dims.begin() + 2, t.dims.end());
  Value v = ir::Reshape(b, w, grouped);
  Dims perm{0, 2, 1};
  for (int64_t d = 3; d < static_cast<int64_t>(grouped.size()); ++d) perm.push_back(d);
  v = ir::Transpose(b, v, perm);
  Dims swapped{i * groups, o / groups};
  swapped.insert(swapped.end(), t.dims.begin() + 2, t.dims.end());
  v = ir::Reshape(b, v, swapped);
  Dims spatial;
  for (int64_t d = 2; d < t.rank(); ++d) spatial.push_back(d);
  return b.Op1("stablehlo.reverse", {v}, b.type(v), {{"dimensions", ir::I64Array(spatial)}});
}

// Gradient of the input: gy [N, O, o...], w [O, C/g, k...] -> [N, C, in...]
// where `in` is the forward input's spatial size.
Value ConvGradInput(Builder& b, Value gy, Value w, const ConvParams& p,
                    const ir::TensorType& out, Precision prec) {
  const ir::TensorType gt = b.type(gy), wt = b.type(w);
  const size_t n = gt.dims.size() - 2;
  Dims lo(gt.rank(), 0), hi(gt.rank(), 0), interior(gt.rank(), 0);
  for (size_t d = 0; d < n; ++d) {
    const int64_t k_eff = p.dilation[d] * (wt.dims[d + 2] - 1) + 1;
    const int64_t in = out.dims[d + 2], o = gt.dims[d + 2];
    lo[d + 2] = k_eff - 1 - p.padding[d];
    hi[d + 2] = in - 1 - (o - 1) * p.stride[d] + p.padding[d];
    interior[d + 2] = p.stride[d] - 1;
  }
  // Dilating by the stride and (possibly negative) edge padding, explicitly.
  Value g = ir::Pad(b, gy, ir::ConstantI(b, 0, gt.dtype), lo, hi, interior);
  Value wf = SwapFlip(b, w, p.groups);
  const Dims ones(n, 1), zeros(n, 0);
  return PreciseConv(b, g, wf, prec, [&](Value l, Value r) {
    return RawConv(b, l, r, out, "b", "f", "o", "i", "b", "f", ones, zeros, zeros, p.dilation,
                   p.groups, 1);
  });
}

// Gradient of the weight: x [N, C, in...], gy [N, O, o...] -> [O, C/g, k...].
Value ConvGradWeight(Builder& b, Value x, Value gy, const ConvParams& p,
                     const ir::TensorType& out, Precision prec) {
  const ir::TensorType xt = b.type(x), gt = b.type(gy);
  const size_t n = xt.dims.size() - 2;
  Dims lo(xt.rank(), 0), hi(xt.rank(), 0), interior(xt.rank(), 0);
  for (size_t d = 0; d < n; ++d) {
    const int64_t k = out.dims[d + 2], in = xt.dims[d + 2], o = gt.dims[d + 2];
    lo[d + 2] = p.padding[d];
    hi[d + 2] = (k - 1) * p.dilation[d] + (o - 1) * p.stride[d] + 1 - in - p.padding[d];
  }
  Value xp = ir::Pad(b, x, ir::ConstantI(b, 0, xt.dtype), lo, hi, interior);
  const Dims zeros(n, 0);
  // x's channels act as the batch, its batch as the contracted feature; a
  // grouped convolution splits that batch into groups.
  return PreciseConv(b, xp, gy, prec, [&](Value l, Value r) {
    return RawConv(b, l, r, out, "f", "b", "i", "o", "f", "b", p.dilation, zeros, zeros, p.stride,
                   1, p.groups);
  });
}

// attrs.ints: precision, transposed, groups, n, stride[n], padding[n],
// dilation[n], has_bias, [mask for backward].
ConvParams Unpack(const lazy::Attrs& a, size_t* next) {
  ConvParams p;
  p.transposed = a.ints[1] != 0;
  p.groups = a.ints[2];
  const int64_t n = a.ints[3];
  size_t i = 4;
  for (Dims* v : {&p.stride, &p.padding, &p.dilation})
    for (int64_t d = 0; d < n; ++d) v->push_back(a.ints[i++]);
  *next = i;
  return p;
}

Value AddBias(Builder& b, Value y, Value bias) {
  const ir::TensorType& t = b.type(y);
  return ir::Binary(b, "stablehlo.add", y,
                    ir::BroadcastInDim(b, ir::Convert(b, bias, t.dtype), t.dims, {1}));
}

// ins = (x, w[, bias]); out = y.
VS LowerConv(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  size_t next;
  ConvParams p = Unpack(a, &next);
  const auto prec = static_cast<Precision>(a.ints[0]);
  const DType ct = out[0].dtype == DType::F64 ? DType::F64 : DType::F32;
  Value x = ir::Convert(b, in[0], ct), w = ir::Convert(b, in[1], ct);
  ir::TensorType ot{ct, out[0].dims};
  Value y = p.transposed ? ConvGradInput(b, x, w, p, ot, prec) : ConvForward(b, x, w, p, ot, prec);
  if (a.ints[next]) y = AddBias(b, y, in[2]);
  return {ir::Convert(b, y, out[0].dtype)};
}
constexpr lazy::Lowering kConv{"aten::convolution", &LowerConv};

// ins = (gy, x, w); outs per mask: grad_x, grad_w, grad_bias.
VS LowerConvBackward(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  size_t next;
  ConvParams p = Unpack(a, &next);
  const auto prec = static_cast<Precision>(a.ints[0]);
  const bool want_x = a.ints[next + 1], want_w = a.ints[next + 2], want_b = a.ints[next + 3];
  const DType dt = b.type(in[0]).dtype;
  const DType ct = dt == DType::F64 ? DType::F64 : DType::F32;
  Value gy = ir::Convert(b, in[0], ct), x = ir::Convert(b, in[1], ct), w = ir::Convert(b, in[2], ct);
  VS r;
  size_t o = 0;
  if (want_x) {
    ir::TensorType t{ct, out[o].dims};
    Value gx;
    if (p.transposed) {
      // With output_padding >= stride the plain convolution of gy covers
      // more than the input; the extra trailing positions are dropped.
      const ir::TensorType gt = b.type(gy), wt = b.type(w);
      ir::TensorType full = t;
      for (size_t d = 0; d + 2 < gt.dims.size(); ++d) {
        const int64_t k_eff = p.dilation[d] * (wt.dims[d + 2] - 1) + 1;
        full.dims[d + 2] = (gt.dims[d + 2] + 2 * p.padding[d] - k_eff) / p.stride[d] + 1;
      }
      gx = ConvForward(b, gy, w, p, full, prec);
      if (full.dims != t.dims)
        gx = ir::Slice(b, gx, Dims(t.dims.size(), 0), t.dims, Dims(t.dims.size(), 1));
    } else {
      gx = ConvGradInput(b, gy, w, p, t, prec);
    }
    r.push_back(ir::Convert(b, gx, out[o++].dtype));
  }
  if (want_w) {
    ir::TensorType t{ct, out[o].dims};
    Value gw = p.transposed ? ConvGradWeight(b, gy, x, p, t, prec) : ConvGradWeight(b, x, gy, p, t, prec);
    r.push_back(ir::Convert(b, gw, out[o++].dtype));
  }
  if (want_b) {
    Dims dims{0};
    for (int64_t d = 2; d < b.type(gy).rank(); ++d) dims.push_back(d);
    Value gb = ir::Reduce(b, gy, ir::ConstantI(b, 0, ct), dims, "stablehlo.add");
    r.push_back(ir::Convert(b, gb, out[o++].dtype));
  }
  return r;
}
constexpr lazy::Lowering kConvBackward{"aten::convolution_backward", &LowerConvBackward};

std::vector<int64_t> Expand(c10::SymIntArrayRef v, size_t n, const char* name) {
  std::vector<int64_t> r;
  for (const auto& s : v) r.push_back(s.expect_int());
  if (r.size() == 1 && n > 1) r.assign(n, r[0]);
  TORCH_CHECK(r.size() == n, "convolution: expected ", name, " to have ", n, " elements, got ",
              r.size());
  return r;
}

struct Checked {
  ConvParams p;
  std::vector<int64_t> out_sizes;
};

Checked Check(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
              c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
              c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
              int64_t groups) {
  CheckTpu("convolution", x, "input");
  CheckTpu("convolution", w, "weight");
  const int64_t dim = w.dim();
  TORCH_CHECK(dim >= 3 && dim <= 5, "convolution: expected a 3D, 4D or 5D weight, got ", dim, "D");
  TORCH_CHECK(x.dim() == dim, "Expected ", dim, "D (batched) input to conv, but got input of size: ",
              x.sizes());
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  const size_t n = static_cast<size_t>(dim - 2);
  Checked c;
  c.p.stride = Expand(stride, n, "stride");
  c.p.padding = Expand(padding, n, "padding");
  c.p.dilation = Expand(dilation, n, "dilation");
  c.p.output_padding = transposed ? Expand(output_padding, n, "output_padding") : Dims(n, 0);
  c.p.groups = groups;
  c.p.transposed = transposed;
  for (size_t i = 0; i < n; ++i) {
    TORCH_CHECK(c.p.stride[i] > 0, "non-positive stride is not supported");
    TORCH_CHECK(c.p.padding[i] >= 0, "negative padding is not supported");
    TORCH_CHECK(c.p.dilation[i] > 0, "dilation should be greater than zero");
  }
  TORCH_CHECK(x.scalar_type() == w.scalar_type(), "Input type (", x.scalar_type(),
              ") and weight type (", w.scalar_type(), ") should be the same");
  const int64_t in_ch = x.size(1);
  c.out_sizes = {x.size(0)};
  if (!transposed) {
    TORCH_CHECK(w.size(0) % groups == 0, "Given groups=", groups, ", expected weight to be "
                "divisible by ", groups, " at dimension 0, but got weight of size ", w.sizes());
    TORCH_CHECK(in_ch == w.size(1) * groups, "Given groups=", groups, ", weight of size ",
                w.sizes(), ", expected input", x.sizes(), " to have ", w.size(1) * groups,
                " channels, but got ", in_ch, " channels instead");
    c.out_sizes.push_back(w.size(0));
    for (size_t i = 0; i < n; ++i) {
      const int64_t k_eff = c.p.dilation[i] * (w.size(i + 2) - 1) + 1;
      const int64_t padded = x.size(i + 2) + 2 * c.p.padding[i];
      TORCH_CHECK(padded >= k_eff, "Calculated padded input size per channel: (", padded,
                  "). Kernel size: (", k_eff, "). Kernel size can't be greater than actual "
                  "input size");
      c.out_sizes.push_back((padded - k_eff) / c.p.stride[i] + 1);
    }
  } else {
    TORCH_CHECK(in_ch == w.size(0), "Given transposed=1, weight of size ", w.sizes(),
                ", expected input", x.sizes(), " to have ", w.size(0), " channels, but got ",
                in_ch, " channels instead");
    c.out_sizes.push_back(w.size(1) * groups);
    for (size_t i = 0; i < n; ++i) {
      c.out_sizes.push_back((x.size(i + 2) - 1) * c.p.stride[i] - 2 * c.p.padding[i] +
                            c.p.dilation[i] * (w.size(i + 2) - 1) + c.p.output_padding[i] + 1);
    }
  }
  if (bias.has_value() && bias->defined()) {
    CheckTpu("convolution", *bias, "bias");
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == c.out_sizes[1], "Given weight of size ",
                w.sizes(), ", expected bias to be 1-dimensional with ", c.out_sizes[1],
                " elements, but got bias of size ", bias->sizes(), " instead");
  }
  return c;
}

lazy::Attrs Pack(const ConvParams& p, bool has_bias) {
  lazy::Attrs a;
  a.ints = {static_cast<int64_t>(CurrentPrecision()), p.transposed ? 1 : 0, p.groups,
            static_cast<int64_t>(p.stride.size())};
  for (const Dims* v : {&p.stride, &p.padding, &p.dilation}) a.ints.insert(a.ints.end(), v->begin(), v->end());
  a.ints.push_back(has_bias ? 1 : 0);
  return a;
}

Tensor convolution(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                   c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                   c10::SymIntArrayRef dilation, bool transposed,
                   c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  Checked c = Check(x, w, bias, stride, padding, dilation, transposed, output_padding,
                    groups.expect_int());
  const bool has_bias = bias.has_value() && bias->defined();
  std::vector<lazy::Operand> in{OperandOf(x), OperandOf(w)};
  if (has_bias) in.push_back(OperandOf(*bias));
  return Run1(kConv, Pack(c.p, has_bias), in, TypeOf(c.out_sizes, x.scalar_type()));
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward(
    const Tensor& gy, const Tensor& x, const Tensor& w, at::OptionalSymIntArrayRef bias_sizes,
    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
    bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> mask) {
  Checked c = Check(x, w, std::nullopt, stride, padding, dilation, transposed, output_padding,
                    groups.expect_int());
  CheckTpu("convolution_backward", gy, "grad_output");
  TORCH_CHECK(gy.sizes().vec() == c.out_sizes, "convolution_backward: expected grad_output of size ",
              at::IntArrayRef(c.out_sizes), " but got ", gy.sizes());
  lazy::Attrs a = Pack(c.p, false);
  for (bool m : mask) a.ints.push_back(m ? 1 : 0);
  std::vector<ir::TensorType> outs;
  if (mask[0]) outs.push_back(TypeOf(x.sizes(), x.scalar_type()));
  if (mask[1]) outs.push_back(TypeOf(w.sizes(), w.scalar_type()));
  if (mask[2]) outs.push_back(TypeOf({c.out_sizes[1]}, gy.scalar_type()));
  if (outs.empty()) return {};
  std::vector<Tensor> r = Run(kConvBackward, a, {OperandOf(gy), OperandOf(x), OperandOf(w)}, outs);
  size_t i = 0;
  Tensor gx = mask[0] ? r[i++] : Tensor();
  Tensor gw = mask[1] ? r[i++] : Tensor();
  Tensor gb = mask[2] ? r[i++] : Tensor();
  return {gx, gw, gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution", TORCH_FN(convolution));
  m.impl("convolution_overrideable", TORCH_FN(convolution));
  m.impl("convolution_backward", TORCH_FN(convolution_backward));
  m.impl("convolution_backward_overrideable",
         [](const Tensor& gy, const Tensor& x, const Tensor& w, c10::SymIntArrayRef stride,
            c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
            c10::SymIntArrayRef output_padding, c10::SymInt groups, std::array<bool, 3> mask) {
           return convolution_backward(gy, x, w, std::nullopt, stride, padding, dilation,
                                       transposed, output_padding, groups, mask);
         });
}

}  // namespace tpu::ops
