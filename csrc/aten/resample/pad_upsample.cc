// Reflection and replication padding, nearest, (bi/tri)linear and bicubic
// upsampling (bilinear and bicubic also with antialias), with backward.
//
// All of them are separable: along each spatial dim, output position j reads
// input position idx[j] (or blends two positions with weights), where idx
// depends only on the sizes and options. The index and weight vectors are
// computed on the host exactly as PyTorch's CPU kernels compute them and
// embedded as constants; the forward is a gather per dim and the backward a
// scatter-add per dim (in reverse order). Kernels flatten the leading dims,
// so the lowerings see [B, spatial...].
#include <ATen/ops/_upsample_bicubic2d_aa.h>
#include <ATen/ops/reflection_pad1d.h>
#include <ATen/ops/reflection_pad2d.h>
#include <ATen/ops/reflection_pad3d.h>
#include <ATen/ops/replication_pad1d.h>
#include <ATen/ops/replication_pad2d.h>
#include <ATen/ops/replication_pad3d.h>
#include <ATen/ops/_upsample_bilinear2d_aa.h>
#include <ATen/ops/upsample_bicubic2d.h>
#include <ATen/ops/upsample_bilinear2d.h>
#include <ATen/ops/upsample_linear1d.h>
#include <ATen/ops/upsample_nearest1d.h>
#include <ATen/ops/upsample_nearest2d.h>
#include <ATen/ops/upsample_nearest3d.h>
#include <ATen/ops/_upsample_nearest_exact1d.h>
#include <ATen/ops/_upsample_nearest_exact2d.h>
#include <ATen/ops/_upsample_nearest_exact3d.h>
#include <ATen/ops/upsample_trilinear3d.h>
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/kernel_helpers.h"

namespace tpu::ops {

using ir::Dims;

namespace {

DType ComputeType(DType t) { return t == DType::F64 ? DType::F64 : DType::F32; }

// ---- padding ----

// Source index of each output position along a dim of size n padded by
// (lo, hi): reflect (mode 0) or clamp (mode 1).
std::vector<int64_t> PadIndex(int64_t n, int64_t lo, int64_t hi, int64_t mode) {
  std::vector<int64_t> v;
  for (int64_t j = -lo; j < n + hi; ++j) {
    int64_t s = j;
    if (mode == 0) {
      if (s < 0) s = -s;
      if (s >= n) s = 2 * (n - 1) - s;
    } else {
      s = std::clamp<int64_t>(s, 0, n - 1);
    }
    v.push_back(s);
  }
  return v;
}

// ins = (x [B, S...]); ints = (nd, mode, lo0, hi0, lo1, hi1, ...) in dim order.
VS LowerPad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t nd = a.ints[0];
  Value x = in[0];
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t n = b.type(in[0]).dims[1 + i];
    auto idx = PadIndex(n, a.ints[2 + 2 * i], a.ints[3 + 2 * i], a.ints[1]);
    x = ir::TakeAlong(b, x, 1 + i, ir::ConstantVectorI(b, idx, DType::S64));
  }
  return {ir::Convert(b, x, out[0].dtype)};
}
constexpr lazy::Lowering kPad{"aten::reflection_replication_pad", &LowerPad};

// ins = (grad [B, O...]); out = [B, S...]; ints as the forward.
VS LowerPadGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t nd = a.ints[0];
  const DType ct = ComputeType(out[0].dtype);
  Value g = ir::Convert(b, in[0], ct);
  for (int64_t i = nd - 1; i >= 0; --i) {
    const int64_t n = out[0].dims[1 + i];
    auto idx = PadIndex(n, a.ints[2 + 2 * i], a.ints[3 + 2 * i], a.ints[1]);
    g = ir::ScatterAddAlong(b, g, 1 + i, ir::ConstantVectorI(b, idx, DType::S64), n);
  }
  return {ir::Convert(b, g, out[0].dtype)};
}
constexpr lazy::Lowering kPadGrad{"aten::reflection_replication_pad_backward", &LowerPadGrad};

Tensor Flat(const Tensor& t, int64_t nd) {
  std::vector<int64_t> s{1};
  for (int64_t i = 0; i < t.dim() - nd; ++i) s[0] *= t.size(i);
  for (int64_t i = t.dim() - nd; i < t.dim(); ++i) s.push_back(t.size(i));
  return t.reshape(s);
}
std::vector<int64_t> FlatSizes(at::IntArrayRef sizes, int64_t nd) {
  std::vector<int64_t> s{1};
  const int64_t r = static_cast<int64_t>(sizes.size());
  for (int64_t i = 0; i < r - nd; ++i) s[0] *= sizes[i];
  for (int64_t i = r - nd; i < r; ++i) s.push_back(sizes[i]);
  return s;
}

// padding is (last dim lo, hi, second-to-last lo, hi, ...), as PyTorch.
lazy::Attrs PadAttrs(int64_t nd, int64_t mode, at::IntArrayRef padding) {
  std::vector<int64_t> ints{nd, mode};
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t k = nd - 1 - i;  // spatial dim i is padded by pair k
    ints.push_back(padding[2 * k]);
    ints.push_back(padding[2 * k + 1]);
  }
  return {ints, {}, {}};
}

// CPU's input check (padding::check_valid_input), made before the meta
// function, which takes any rank.
void CheckPadInput(const Tensor& self, int64_t nd) {
  bool nonzero = true;
  for (int64_t d = 1; d < self.dim(); ++d) nonzero = nonzero && self.size(d) != 0;
  const bool ok = (self.dim() == nd + 1 && nonzero && self.size(0) != 0) ||
                  (self.dim() == nd + 2 && nonzero);
  TORCH_CHECK(ok, "Expected ", nd + 1, "D or ", nd + 2, "D (batch mode) tensor with possibly 0 "
              "batch size and other non-zero dimensions for input, but got: ", self.sizes());
}

Tensor PadForward(const char* op, const Tensor& self, int64_t nd, int64_t mode,
                  at::IntArrayRef padding, at::IntArrayRef out_sizes) {
  CheckTpu(op, self, "self");
  if (c10::multiply_integers(out_sizes) == 0) return EmptyTpu(out_sizes, self.scalar_type());
  return Run1(kPad, PadAttrs(nd, mode, padding), {OperandOf(Flat(self, nd))},
              TypeOf(FlatSizes(out_sizes, nd), self.scalar_type()))
      .reshape(out_sizes);
}

Tensor PadBackward(const char* op, const Tensor& grad, const Tensor& self, int64_t nd,
                   int64_t mode, at::IntArrayRef padding, at::IntArrayRef expected) {
  CheckTpu(op, grad, "grad_output");
  TORCH_CHECK(grad.sizes() == expected, op, ": expected grad_output of shape ", expected,
              " but got ", grad.sizes());
  if (self.numel() == 0) return at::zeros(self.sizes(), self.options());
  return Run1(kPadGrad, PadAttrs(nd, mode, padding), {OperandOf(Flat(grad, nd))},
              TypeOf(FlatSizes(self.sizes(), nd), self.scalar_type()))
      .reshape(self.sizes());
}

#define TPU_PAD_OPS(name, nd, mode)                                                       \
  Tensor name##_tpu(const Tensor& self, at::IntArrayRef padding) {                       \
    CheckPadInput(self, nd);                                                               \
    Tensor meta = at::name(MetaOf(self), padding);                                         \
    return PadForward(#name, self, nd, mode, padding, meta.sizes());                       \
  }                                                                                        \
  Tensor name##_backward_tpu(const Tensor& grad, const Tensor& self,                      \
                             at::IntArrayRef padding) {                                    \
    Tensor meta = at::name(MetaOf(self), padding);                                         \
    return PadBackward(#name "_backward", grad, self, nd, mode, padding, meta.sizes());    \
  }
TPU_PAD_OPS(reflection_pad1d, 1, 0)
TPU_PAD_OPS(reflection_pad2d, 2, 0)
TPU_PAD_OPS(reflection_pad3d, 3, 0)
TPU_PAD_OPS(replication_pad1d, 1, 1)
TPU_PAD_OPS(replication_pad2d, 2, 1)
TPU_PAD_OPS(replication_pad3d, 3, 1)
#undef TPU_PAD_OPS

// ---- upsampling ----

enum Mode : int64_t {
  kNearest = 0, kNearestExact = 1, kLinear = 2, kCubic = 3,
  kLinearAA = 4, kCubicAA = 5,  // antialias=True: a filter as wide as the downscale
};

// The source positions and weights of each output position along one dim:
// K taps (1 for nearest, 2 linear, 4 cubic), each a position and a weight
// per output; nearest has no weights.
struct Taps {
  std::vector<std::vector<int64_t>> idx;
  std::vector<std::vector<double>> w;
};

template <typename T>
T ScalesValue(double scale, int64_t n, int64_t o) {  // compute_scales_value
  return scale > 0. ? static_cast<T>(1.0 / scale) : (static_cast<T>(n) / o);
}

template <typename T>
T AreaScale(int64_t n, int64_t o, bool align_corners, double scale) {  // area_pixel_compute_scale
  if (align_corners) return o > 1 ? static_cast<T>(n - 1) / (o - 1) : static_cast<T>(0);
  return ScalesValue<T>(scale, n, o);
}

template <typename T>
T SourceIndex(T ratio, int64_t j, bool align_corners, bool cubic) {
  if (align_corners) return ratio * j;
  T real = ratio * (j + static_cast<T>(0.5)) - static_cast<T>(0.5);
  return (!cubic && real < 0) ? static_cast<T>(0) : real;
}

Taps NearestTaps(int64_t n, int64_t o, double scale, bool exact) {
  Taps t;
  t.idx.resize(1);
  const float s = ScalesValue<float>(scale, n, o);
  for (int64_t j = 0; j < o; ++j) {
    int64_t src;
    if (exact) {
      src = std::min(static_cast<int64_t>(floorf((j + 0.5) * s)), n - 1);
    } else if (o == n) {
      src = j;
    } else if (o == 2 * n) {
      src = j >> 1;
    } else {
      src = std::min(static_cast<int64_t>(floorf(j * s)), n - 1);
    }
    t.idx[0].push_back(src);
  }
  return t;
}

template <typename T>
Taps LinearTaps(int64_t n, int64_t o, bool align_corners, double scale) {
  Taps t;
  t.idx.resize(2);
  t.w.resize(2);
  const T ratio = AreaScale<T>(n, o, align_corners, scale);
  for (int64_t j = 0; j < o; ++j) {
    int64_t i0, i1;
    T l0, l1;
    if (o == n) {
      i0 = i1 = j;
      l0 = 1;
      l1 = 0;
    } else {
      const T real = SourceIndex<T>(ratio, j, align_corners, false);
      i0 = std::min(static_cast<int64_t>(std::floor(real)), n - 1);
      l1 = std::min(std::max(real - i0, static_cast<T>(0)), static_cast<T>(1));
      i1 = i0 + ((i0 < n - 1) ? 1 : 0);
      l0 = static_cast<T>(1) - l1;
    }
    t.idx[0].push_back(i0);
    t.idx[1].push_back(i1);
    t.w[0].push_back(static_cast<double>(l0));
    t.w[1].push_back(static_cast<double>(l1));
  }
  return t;
}

// Keys' cubic convolution with A = -0.75, as PyTorch's bicubic; taps at
// floor(x) - 1 .. floor(x) + 2, clamped into the input.
template <typename T>
Taps CubicTaps(int64_t n, int64_t o, bool align_corners, double scale) {
  Taps t;
  t.idx.resize(4);
  t.w.resize(4);
  const T A = static_cast<T>(-0.75);
  auto conv1 = [&](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto conv2 = [&](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  const T ratio = AreaScale<T>(n, o, align_corners, scale);
  for (int64_t j = 0; j < o; ++j) {
    const T real = SourceIndex<T>(ratio, j, align_corners, true);
    const int64_t in0 = std::min(static_cast<int64_t>(std::floor(real)), n - 1);
    const T tt = std::min(std::max(real - in0, static_cast<T>(0)), static_cast<T>(1));
    const T c[4] = {conv2(tt + 1), conv1(tt), conv1(1 - tt), conv2(2 - tt)};
    for (int k = 0; k < 4; ++k) {
      t.idx[k].push_back(std::clamp<int64_t>(in0 - 1 + k, 0, n - 1));
      t.w[k].push_back(static_cast<double>(c[k]));
    }
  }
  return t;
}

// antialias=True, as PyTorch's CPU kernels (and PIL): output j averages the
// inputs within `support` of its center with a triangle (linear) or Keys
// cubic (A = -0.5) filter stretched by the downscale factor, normalized to
// sum 1. Positions past an output's window repeat its first one with weight
// 0, so every output has the same number of taps.
template <typename T>
Taps AntialiasTaps(int64_t n, int64_t o, bool align_corners, double scale_arg, bool cubic) {
  const T scale = AreaScale<T>(n, o, align_corners, scale_arg);
  const int interp = cubic ? 4 : 2;
  const T support = scale >= 1 ? (interp * static_cast<T>(0.5)) * scale : interp * static_cast<T>(0.5);
  const int64_t taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  const T invscale = scale >= 1 ? 1 / scale : 1;
  auto filter = [&](T x) -> T {
    x = std::abs(x);
    if (!cubic) return x < 1 ? 1 - x : 0;
    const T A = static_cast<T>(-0.5);
    if (x < 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0;
  };
  Taps t;
  t.idx.assign(taps, {});
  t.w.assign(taps, {});
  std::vector<T> w(taps);
  for (int64_t j = 0; j < o; ++j) {
    const T center = scale * (j + static_cast<T>(0.5));
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + static_cast<T>(0.5)), 0);
    const int64_t size = std::clamp<int64_t>(
        std::min<int64_t>(static_cast<int64_t>(center + support + static_cast<T>(0.5)), n) - lo, 0, taps);
    T total = 0;
    for (int64_t k = 0; k < size; ++k) total += (w[k] = filter((k + lo - center + static_cast<T>(0.5)) * invscale));
    for (int64_t k = 0; k < taps; ++k) {
      const bool in = k < size;
      t.idx[k].push_back(in ? lo + k : std::min(lo, n - 1));
      t.w[k].push_back(in && total != 0 ? static_cast<double>(w[k] / total) : 0.0);
    }
  }
  return t;
}

Taps TapsFor(const lazy::Attrs& a, int64_t i, int64_t n, int64_t o, DType ct) {
  const int64_t mode = a.ints[1];
  const double scale = a.floats[i];
  const bool ac = a.ints[2] != 0;
  if (mode == kLinearAA || mode == kCubicAA)
    return ct == DType::F64 ? AntialiasTaps<double>(n, o, ac, scale, mode == kCubicAA)
                            : AntialiasTaps<float>(n, o, ac, scale, mode == kCubicAA);
  if (mode == kNearest || mode == kNearestExact)
    return NearestTaps(n, o, scale, mode == kNearestExact);
  if (mode == kCubic)
    return ct == DType::F64 ? CubicTaps<double>(n, o, ac, scale) : CubicTaps<float>(n, o, ac, scale);
  return ct == DType::F64 ? LinearTaps<double>(n, o, ac, scale) : LinearTaps<float>(n, o, ac, scale);
}

// ins = (x [B, S...]); ints = (nd, mode, align_corners); floats = scale per
// spatial dim (<= 0: none).
VS LowerUpsample(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t nd = a.ints[0];
  const ir::TensorType t = b.type(in[0]);
  const DType ct = ComputeType(t.dtype);
  const bool weighted = a.ints[1] != kNearest && a.ints[1] != kNearestExact;
  const bool integer = weighted && ir::IsInteger(out[0].dtype);
  // uint8 images: each pass is rounded to nearest and saturated, as CPU's
  // integer kernels do (a cubic filter overshoots the input's range), last
  // dim first as they run
  auto saturate = [&](Value x) {
    const ir::Dims& d = b.type(x).dims;
    x = ir::Unary(b, "stablehlo.floor",
                  ir::Binary(b, "stablehlo.add", x, ir::Full(b, ir::ConstantF(b, 0.5, ct), d)));
    return ir::Max(b, ir::Min(b, x, ir::Full(b, ir::Convert(b, ir::MaxValue(b, out[0].dtype), ct), d)),
                   ir::Full(b, ir::Convert(b, ir::MinValue(b, out[0].dtype), ct), d));
  };
  Value x = weighted ? ir::Convert(b, in[0], ct) : in[0];
  for (int64_t step = 0; step < nd; ++step) {
    const int64_t i = integer ? nd - 1 - step : step;
    const int64_t n = t.dims[1 + i], o = out[0].dims[1 + i];
    Taps tp = TapsFor(a, i, n, o, ct);
    if (!weighted) {
      x = ir::TakeAlong(b, x, 1 + i, ir::ConstantVectorI(b, tp.idx[0], DType::S64));
      continue;
    }
    Value acc;
    for (size_t k = 0; k < tp.idx.size(); ++k) {
      Value xk = ir::TakeAlong(b, x, 1 + i, ir::ConstantVectorI(b, tp.idx[k], DType::S64));
      Value wk = ir::BroadcastInDim(b, ir::ConstantVectorF(b, tp.w[k], ct), b.type(xk).dims, {1 + i});
      Value term = ir::Binary(b, "stablehlo.multiply", wk, xk);
      acc = acc.valid() ? ir::Binary(b, "stablehlo.add", acc, term) : term;
    }
    x = integer ? saturate(acc) : acc;
  }
  return {ir::Convert(b, x, out[0].dtype)};
}
constexpr lazy::Lowering kUpsample{"aten::upsample", &LowerUpsample};

// ins = (grad [B, O...]); out = [B, S...]; attrs as the forward.
VS LowerUpsampleGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t nd = a.ints[0];
  const ir::TensorType gt = b.type(in[0]);
  const DType ct = ComputeType(out[0].dtype);
  const bool weighted = a.ints[1] != kNearest && a.ints[1] != kNearestExact;
  Value g = ir::Convert(b, in[0], ct);
  for (int64_t i = nd - 1; i >= 0; --i) {
    const int64_t n = out[0].dims[1 + i], o = gt.dims[1 + i];
    Taps tp = TapsFor(a, i, n, o, ct);
    const ir::Dims d = b.type(g).dims;
    Value acc;
    for (size_t k = 0; k < tp.idx.size(); ++k) {
      Value gk = g;
      if (weighted)
        gk = ir::Binary(b, "stablehlo.multiply", g,
                        ir::BroadcastInDim(b, ir::ConstantVectorF(b, tp.w[k], ct), d, {1 + i}));
      Value s = ir::ScatterAddAlong(b, gk, 1 + i, ir::ConstantVectorI(b, tp.idx[k], DType::S64), n);
      acc = acc.valid() ? ir::Binary(b, "stablehlo.add", acc, s) : s;
    }
    g = acc;
  }
  return {ir::Convert(b, g, out[0].dtype)};
}
constexpr lazy::Lowering kUpsampleGrad{"aten::upsample_backward", &LowerUpsampleGrad};

lazy::Attrs UpAttrs(int64_t nd, Mode mode, bool align, std::vector<std::optional<double>> scales) {
  std::vector<double> f;
  for (auto s : scales) f.push_back(s.has_value() ? *s : -1.0);
  return {{nd, mode, align ? 1 : 0}, f, {}};
}

Tensor Upsample(const char* op, const Tensor& self, int64_t nd, const lazy::Attrs& attrs,
                at::IntArrayRef out_sizes) {
  CheckTpu(op, self, "self");
  // CPU's dtypes: floating types and uint8 (not for linear and trilinear)
  const auto mode = attrs.ints[1];
  const bool byte_ok = !(mode == kLinear && (nd == 1 || nd == 3));
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) ||
                  (self.scalar_type() == at::kByte && byte_ok),
              "\"", op, "\" not implemented for '", c10::toString(self.scalar_type()), "'");
  if (c10::multiply_integers(out_sizes) == 0) return EmptyTpu(out_sizes, self.scalar_type());
  Tensor r = Run1(kUpsample, attrs, {OperandOf(Flat(self, nd))},
                  TypeOf(FlatSizes(out_sizes, nd), self.scalar_type()))
                 .reshape(out_sizes);
  // The output keeps a channels-last input's layout, as on CPU.
  const auto format = self.suggest_memory_format();
  return format == at::MemoryFormat::Contiguous ? r : r.contiguous(format);
}

Tensor UpsampleGrad(const char* op, const Tensor& grad, int64_t nd, const lazy::Attrs& attrs,
                    at::IntArrayRef output_size, at::IntArrayRef input_size) {
  CheckTpu(op, grad, "grad_output");
  TORCH_CHECK(static_cast<int64_t>(input_size.size()) == nd + 2, op,
              ": It is expected input_size equals to ", nd + 2, ", but got size ",
              input_size.size());
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == nd, op,
              ": It is expected output_size equals to ", nd, ", but got size ",
              output_size.size());
  std::vector<int64_t> expected{input_size[0], input_size[1]};
  expected.insert(expected.end(), output_size.begin(), output_size.end());
  TORCH_CHECK(grad.sizes() == at::IntArrayRef(expected), op,
              ": Expected grad_output to have the same shape as output; output.size(", 2,
              ") = ", expected, " but got grad_output ", grad.sizes());
  if (c10::multiply_integers(input_size) == 0 || grad.numel() == 0)
    return at::zeros(input_size, grad.options());
  return Run1(kUpsampleGrad, attrs, {OperandOf(Flat(grad, nd))},
              TypeOf(FlatSizes(input_size, nd), grad.scalar_type()))
      .reshape(input_size);
}

using OptD = std::optional<double>;

// The rank check PyTorch makes (its meta function for some of these ops is a
// Python decomposition that would fail less clearly).
void CheckRank(const char* op, const Tensor& self, int64_t nd) {
  TORCH_CHECK(self.dim() == nd + 2, op, ": It is expected input_size equals to ", nd + 2,
              ", but got size ", self.dim());
}

Tensor upsample_nearest1d_tpu(const Tensor& self, at::IntArrayRef os, OptD s) {
  CheckRank("upsample_nearest1d", self, 1);
  Tensor m = at::upsample_nearest1d(MetaOf(self), os, s);
  return Upsample("upsample_nearest1d", self, 1, UpAttrs(1, kNearest, false, {s}), m.sizes());
}
Tensor upsample_nearest2d_tpu(const Tensor& self, at::IntArrayRef os, OptD sh, OptD sw) {
  CheckRank("upsample_nearest2d", self, 2);
  Tensor m = at::upsample_nearest2d(MetaOf(self), os, sh, sw);
  return Upsample("upsample_nearest2d", self, 2, UpAttrs(2, kNearest, false, {sh, sw}), m.sizes());
}
Tensor upsample_nearest3d_tpu(const Tensor& self, at::IntArrayRef os, OptD sd, OptD sh, OptD sw) {
  CheckRank("upsample_nearest3d", self, 3);
  Tensor m = at::upsample_nearest3d(MetaOf(self), os, sd, sh, sw);
  return Upsample("upsample_nearest3d", self, 3, UpAttrs(3, kNearest, false, {sd, sh, sw}),
                  m.sizes());
}
Tensor upsample_nearest_exact1d_tpu(const Tensor& self, at::IntArrayRef os, OptD s) {
  CheckRank("_upsample_nearest_exact1d", self, 1);
  Tensor m = at::_upsample_nearest_exact1d(MetaOf(self), os, s);
  return Upsample("_upsample_nearest_exact1d", self, 1, UpAttrs(1, kNearestExact, false, {s}),
                  m.sizes());
}
Tensor upsample_nearest_exact2d_tpu(const Tensor& self, at::IntArrayRef os, OptD sh, OptD sw) {
  CheckRank("_upsample_nearest_exact2d", self, 2);
  Tensor m = at::_upsample_nearest_exact2d(MetaOf(self), os, sh, sw);
  return Upsample("_upsample_nearest_exact2d", self, 2,
                  UpAttrs(2, kNearestExact, false, {sh, sw}), m.sizes());
}
Tensor upsample_nearest_exact3d_tpu(const Tensor& self, at::IntArrayRef os, OptD sd, OptD sh,
                                    OptD sw) {
  CheckRank("_upsample_nearest_exact3d", self, 3);
  Tensor m = at::_upsample_nearest_exact3d(MetaOf(self), os, sd, sh, sw);
  return Upsample("_upsample_nearest_exact3d", self, 3,
                  UpAttrs(3, kNearestExact, false, {sd, sh, sw}), m.sizes());
}
Tensor upsample_linear1d_tpu(const Tensor& self, at::IntArrayRef os, bool ac, OptD s) {
  CheckRank("upsample_linear1d", self, 1);
  Tensor m = at::upsample_linear1d(MetaOf(self), os, ac, s);
  return Upsample("upsample_linear1d", self, 1, UpAttrs(1, kLinear, ac, {s}), m.sizes());
}
Tensor upsample_bilinear2d_tpu(const Tensor& self, at::IntArrayRef os, bool ac, OptD sh, OptD sw) {
  CheckRank("upsample_bilinear2d", self, 2);
  Tensor m = at::upsample_bilinear2d(MetaOf(self), os, ac, sh, sw);
  return Upsample("upsample_bilinear2d", self, 2, UpAttrs(2, kLinear, ac, {sh, sw}), m.sizes());
}
Tensor upsample_trilinear3d_tpu(const Tensor& self, at::IntArrayRef os, bool ac, OptD sd, OptD sh,
                                OptD sw) {
  CheckRank("upsample_trilinear3d", self, 3);
  Tensor m = at::upsample_trilinear3d(MetaOf(self), os, ac, sd, sh, sw);
  return Upsample("upsample_trilinear3d", self, 3, UpAttrs(3, kLinear, ac, {sd, sh, sw}),
                  m.sizes());
}

Tensor upsample_bicubic2d_tpu(const Tensor& self, at::IntArrayRef os, bool ac, OptD sh, OptD sw) {
  CheckRank("upsample_bicubic2d", self, 2);
  Tensor m = at::upsample_bicubic2d(MetaOf(self), os, ac, sh, sw);
  return Upsample("upsample_bicubic2d", self, 2, UpAttrs(2, kCubic, ac, {sh, sw}), m.sizes());
}
Tensor upsample_bilinear2d_aa_tpu(const Tensor& self, at::IntArrayRef os, bool ac, OptD sh, OptD sw) {
  CheckRank("_upsample_bilinear2d_aa", self, 2);
  Tensor m = at::_upsample_bilinear2d_aa(MetaOf(self), os, ac, sh, sw);
  return Upsample("_upsample_bilinear2d_aa", self, 2, UpAttrs(2, kLinearAA, ac, {sh, sw}),
                  m.sizes());
}
Tensor upsample_bicubic2d_aa_tpu(const Tensor& self, at::IntArrayRef os, bool ac, OptD sh, OptD sw) {
  CheckRank("_upsample_bicubic2d_aa", self, 2);
  Tensor m = at::_upsample_bicubic2d_aa(MetaOf(self), os, ac, sh, sw);
  return Upsample("_upsample_bicubic2d_aa", self, 2, UpAttrs(2, kCubicAA, ac, {sh, sw}),
                  m.sizes());
}
Tensor upsample_bilinear2d_aa_backward_tpu(const Tensor& g, at::IntArrayRef os,
                                           at::IntArrayRef is, bool ac, OptD sh, OptD sw) {
  return UpsampleGrad("_upsample_bilinear2d_aa_backward", g, 2,
                      UpAttrs(2, kLinearAA, ac, {sh, sw}), os, is);
}
Tensor upsample_bicubic2d_aa_backward_tpu(const Tensor& g, at::IntArrayRef os,
                                          at::IntArrayRef is, bool ac, OptD sh, OptD sw) {
  return UpsampleGrad("_upsample_bicubic2d_aa_backward", g, 2,
                      UpAttrs(2, kCubicAA, ac, {sh, sw}), os, is);
}
Tensor upsample_bicubic2d_backward_tpu(const Tensor& g, at::IntArrayRef os, at::IntArrayRef is,
                                       bool ac, OptD sh, OptD sw) {
  return UpsampleGrad("upsample_bicubic2d_backward", g, 2, UpAttrs(2, kCubic, ac, {sh, sw}), os,
                      is);
}

Tensor upsample_nearest1d_backward_tpu(const Tensor& g, at::IntArrayRef os, at::IntArrayRef is,
                                       OptD s) {
  return UpsampleGrad("upsample_nearest1d_backward", g, 1, UpAttrs(1, kNearest, false, {s}), os,
                      is);
}
Tensor upsample_nearest2d_backward_tpu(const Tensor& g, at::IntArrayRef os, at::IntArrayRef is,
                                       OptD sh, OptD sw) {
  return UpsampleGrad("upsample_nearest2d_backward", g, 2, UpAttrs(2, kNearest, false, {sh, sw}),
                      os, is);
}
Tensor upsample_nearest3d_backward_tpu(const Tensor& g, at::IntArrayRef os, at::IntArrayRef is,
                                       OptD sd, OptD sh, OptD sw) {
  return UpsampleGrad("upsample_nearest3d_backward", g, 3,
                      UpAttrs(3, kNearest, false, {sd, sh, sw}), os, is);
}
Tensor upsample_nearest_exact1d_backward_tpu(const Tensor& g, at::IntArrayRef os,
                                             at::IntArrayRef is, OptD s) {
  return UpsampleGrad("_upsample_nearest_exact1d_backward", g, 1,
                      UpAttrs(1, kNearestExact, false, {s}), os, is);
}
Tensor upsample_nearest_exact2d_backward_tpu(const Tensor& g, at::IntArrayRef os,
                                             at::IntArrayRef is, OptD sh, OptD sw) {
  return UpsampleGrad("_upsample_nearest_exact2d_backward", g, 2,
                      UpAttrs(2, kNearestExact, false, {sh, sw}), os, is);
}
Tensor upsample_nearest_exact3d_backward_tpu(const Tensor& g, at::IntArrayRef os,
                                             at::IntArrayRef is, OptD sd, OptD sh, OptD sw) {
  return UpsampleGrad("_upsample_nearest_exact3d_backward", g, 3,
                      UpAttrs(3, kNearestExact, false, {sd, sh, sw}), os, is);
}
Tensor upsample_linear1d_backward_tpu(const Tensor& g, at::IntArrayRef os, at::IntArrayRef is,
                                      bool ac, OptD s) {
  return UpsampleGrad("upsample_linear1d_backward", g, 1, UpAttrs(1, kLinear, ac, {s}), os, is);
}
Tensor upsample_bilinear2d_backward_tpu(const Tensor& g, at::IntArrayRef os, at::IntArrayRef is,
                                        bool ac, OptD sh, OptD sw) {
  return UpsampleGrad("upsample_bilinear2d_backward", g, 2, UpAttrs(2, kLinear, ac, {sh, sw}), os,
                      is);
}
Tensor upsample_trilinear3d_backward_tpu(const Tensor& g, at::IntArrayRef os, at::IntArrayRef is,
                                         bool ac, OptD sd, OptD sh, OptD sw) {
  return UpsampleGrad("upsample_trilinear3d_backward", g, 3,
                      UpAttrs(3, kLinear, ac, {sd, sh, sw}), os, is);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("reflection_pad1d", TORCH_FN(reflection_pad1d_tpu));
  m.impl("reflection_pad2d", TORCH_FN(reflection_pad2d_tpu));
  m.impl("reflection_pad3d", TORCH_FN(reflection_pad3d_tpu));
  m.impl("replication_pad1d", TORCH_FN(replication_pad1d_tpu));
  m.impl("replication_pad2d", TORCH_FN(replication_pad2d_tpu));
  m.impl("replication_pad3d", TORCH_FN(replication_pad3d_tpu));
  m.impl("reflection_pad1d_backward", TORCH_FN(reflection_pad1d_backward_tpu));
  m.impl("reflection_pad2d_backward", TORCH_FN(reflection_pad2d_backward_tpu));
  m.impl("reflection_pad3d_backward", TORCH_FN(reflection_pad3d_backward_tpu));
  m.impl("replication_pad1d_backward", TORCH_FN(replication_pad1d_backward_tpu));
  m.impl("replication_pad2d_backward", TORCH_FN(replication_pad2d_backward_tpu));
  m.impl("replication_pad3d_backward", TORCH_FN(replication_pad3d_backward_tpu));
  m.impl("upsample_nearest1d", TORCH_FN(upsample_nearest1d_tpu));
  m.impl("upsample_nearest2d", TORCH_FN(upsample_nearest2d_tpu));
  m.impl("upsample_nearest3d", TORCH_FN(upsample_nearest3d_tpu));
  m.impl("_upsample_nearest_exact1d", TORCH_FN(upsample_nearest_exact1d_tpu));
  m.impl("_upsample_nearest_exact2d", TORCH_FN(upsample_nearest_exact2d_tpu));
  m.impl("_upsample_nearest_exact3d", TORCH_FN(upsample_nearest_exact3d_tpu));
  m.impl("upsample_linear1d", TORCH_FN(upsample_linear1d_tpu));
  m.impl("upsample_bilinear2d", TORCH_FN(upsample_bilinear2d_tpu));
  m.impl("upsample_trilinear3d", TORCH_FN(upsample_trilinear3d_tpu));
  m.impl("upsample_nearest1d_backward", TORCH_FN(upsample_nearest1d_backward_tpu));
  m.impl("upsample_nearest2d_backward", TORCH_FN(upsample_nearest2d_backward_tpu));
  m.impl("upsample_nearest3d_backward", TORCH_FN(upsample_nearest3d_backward_tpu));
  m.impl("_upsample_nearest_exact1d_backward", TORCH_FN(upsample_nearest_exact1d_backward_tpu));
  m.impl("_upsample_nearest_exact2d_backward", TORCH_FN(upsample_nearest_exact2d_backward_tpu));
  m.impl("_upsample_nearest_exact3d_backward", TORCH_FN(upsample_nearest_exact3d_backward_tpu));
  m.impl("upsample_linear1d_backward", TORCH_FN(upsample_linear1d_backward_tpu));
  m.impl("upsample_bilinear2d_backward", TORCH_FN(upsample_bilinear2d_backward_tpu));
  m.impl("upsample_trilinear3d_backward", TORCH_FN(upsample_trilinear3d_backward_tpu));
  m.impl("upsample_bicubic2d", TORCH_FN(upsample_bicubic2d_tpu));
  m.impl("upsample_bicubic2d_backward", TORCH_FN(upsample_bicubic2d_backward_tpu));
  m.impl("_upsample_bilinear2d_aa", TORCH_FN(upsample_bilinear2d_aa_tpu));
  m.impl("_upsample_bicubic2d_aa", TORCH_FN(upsample_bicubic2d_aa_tpu));
  m.impl("_upsample_bilinear2d_aa_backward", TORCH_FN(upsample_bilinear2d_aa_backward_tpu));
  m.impl("_upsample_bicubic2d_aa_backward", TORCH_FN(upsample_bicubic2d_aa_backward_tpu));
}

}  // namespace tpu::ops
