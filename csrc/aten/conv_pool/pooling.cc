// Pooling: max pooling with indices (1-3 spatial dims), average pooling,
// adaptive average and max pooling, each with its backward.
//
// Every kernel flattens the leading (batch, channel) dims into one, so the
// lowerings see [B, spatial...]. Max and average pooling are
// stablehlo.reduce_window (max carries the flat input index along as a second
// operand, so ties and NaN pick the element CPU picks); the max backward is a
// scatter-add at the saved indices; the average backward is the transpose of
// the windowed sum (an interior-padded gradient summed over windows).
// Adaptive average pooling is separable: one 0/1 window-membership matrix per
// spatial dim, contracted in turn; adaptive max pooling gathers each output's
// window (padded to the largest window by repeating an element of it).
// max_unpool writes the values at their flat indices in zeroed planes.
#include <ATen/Context.h>
#include <ATen/ops/_adaptive_avg_pool2d.h>
#include <ATen/ops/_adaptive_avg_pool3d.h>
#include <ATen/ops/adaptive_max_pool2d.h>
#include <ATen/ops/adaptive_max_pool3d.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/avg_pool3d.h>
#include <ATen/ops/max_pool2d_with_indices.h>
#include <ATen/ops/max_pool3d_with_indices.h>
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <limits>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/kernel_helpers.h"

namespace tpu::ops {

using ir::Dims;

namespace {

DType ComputeType(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

Dims Part(const lazy::Attrs& a, int64_t nd, int64_t which) {  // ints = (nd, group0, group1, ...)
  return Dims(a.ints.begin() + 1 + which * nd, a.ints.begin() + 1 + (which + 1) * nd);
}

// Flat index of each element within its [spatial...] plane, shaped `dims`
// ([B, spatial...]).
Value PlaneIndex(Builder& b, const Dims& dims) {
  Value idx;
  int64_t stride = 1;
  for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 1; --i) {
    Value term = ir::Iota(b, dims, i, DType::S64);
    if (stride != 1)
      term = ir::Binary(b, "stablehlo.multiply", term,
                        ir::Full(b, ir::ConstantI(b, stride, DType::S64), dims));
    idx = idx.valid() ? ir::Binary(b, "stablehlo.add", idx, term) : term;
    stride *= dims[i];
  }
  return idx;
}

// (value, index) max as CPU's max pooling scan picks it: the larger value,
// the first index among equal values; NaN beats any number, and among NaNs
// the last index (CPU replaces the running max with every NaN it meets).
VS PickMax(Builder& rb, const VS& a) {
  Value av = a[0], ai = a[1], bv = a[2], bi = a[3];
  Value gt = ir::Compare(rb, av, bv, ir::Cmp::GT);
  Value eq = ir::Compare(rb, av, bv, ir::Cmp::EQ);
  Value ilt = ir::Compare(rb, ai, bi, ir::Cmp::LT);
  Value pick = ir::Binary(rb, "stablehlo.or", gt, ir::Binary(rb, "stablehlo.and", eq, ilt));
  if (ir::IsFloat(rb.type(av).dtype)) {
    Value an = ir::Compare(rb, av, av, ir::Cmp::NE);
    Value bn = ir::Compare(rb, bv, bv, ir::Cmp::NE);
    Value nbn = ir::Unary(rb, "stablehlo.not", bn);
    Value igt = ir::Compare(rb, ai, bi, ir::Cmp::GT);
    Value a_nan_wins =
        ir::Binary(rb, "stablehlo.and", an, ir::Binary(rb, "stablehlo.or", nbn, igt));
    pick = ir::Binary(rb, "stablehlo.or", a_nan_wins, ir::Binary(rb, "stablehlo.and", nbn, pick));
  }
  return {ir::Select(rb, pick, av, bv), ir::Select(rb, pick, ai, bi)};
}

// ins = (x [B, S...]); ints = (nd, kernel, stride, padding, dilation).
VS LowerMaxPool(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t nd = a.ints[0];
  const Dims k = Part(a, nd, 0), s = Part(a, nd, 1), p = Part(a, nd, 2), d = Part(a, nd, 3);
  const ir::TensorType t = b.type(in[0]);
  ir::Window w{{1}, {1}, {1}, {0}, {0}};
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t o = out[0].dims[1 + i], n = t.dims[1 + i];
    w.dims.push_back(k[i]);
    w.strides.push_back(s[i]);
    w.dilations.push_back(d[i]);
    w.pad_lo.push_back(p[i]);
    w.pad_hi.push_back(std::max<int64_t>(0, (o - 1) * s[i] + (k[i] - 1) * d[i] + 1 - n - p[i]));
  }
  Value idx = PlaneIndex(b, t.dims);
  VS r = ir::ReduceWindow(
      b, {in[0], idx},
      {ir::MinValue(b, t.dtype), ir::ConstantI(b, std::numeric_limits<int64_t>::max(), DType::S64)},
      w, PickMax);
  const Dims zero(out[0].dims.size(), 0), one(out[0].dims.size(), 1);
  return {ir::Slice(b, r[0], zero, out[0].dims, one), ir::Slice(b, r[1], zero, out[0].dims, one)};
}
constexpr lazy::Lowering kMaxPool{"aten::max_pool_with_indices", &LowerMaxPool};

// ins = (grad [B, O...], indices [B, O...]); out = [B, S...]. Each gradient
// element is added at its saved input index.
VS LowerMaxPoolGrad(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType gt = b.type(in[0]);
  const DType ct = ComputeType(out[0].dtype);
  const int64_t B = gt.dims[0];
  int64_t q = 1, plane = 1;
  for (size_t i = 1; i < gt.dims.size(); ++i) q *= gt.dims[i];
  for (size_t i = 1; i < out[0].dims.size(); ++i) plane *= out[0].dims[i];
  Value g = ir::Reshape(b, ir::Convert(b, in[0], ct), {B * q});
  Value base = ir::Binary(b, "stablehlo.multiply", ir::Iota(b, {B, q}, 0, DType::S64),
                          ir::Full(b, ir::ConstantI(b, plane, DType::S64), {B, q}));
  Value flat = ir::Binary(b, "stablehlo.add", base,
                          ir::Reshape(b, ir::Convert(b, in[1], DType::S64), {B, q}));
  Value r = ir::ScatterAddAlong(b, g, 0, ir::Reshape(b, flat, {B * q}), B * plane);
  return {ir::Convert(b, ir::Reshape(b, r, out[0].dims), out[0].dtype)};
}
constexpr lazy::Lowering kMaxPoolGrad{"aten::max_pool_with_indices_backward", &LowerMaxPoolGrad};

// The divisor of each output of an average pool along one dim, as CPU
// computes it (window clipped to the padded input, or to the input when
// padding is not counted; at least 1, the sum of an empty window being 0).
std::vector<double> AvgCounts(int64_t n, int64_t o, int64_t k, int64_t s, int64_t p,
                              bool count_pad) {
  std::vector<double> c(o);
  for (int64_t i = 0; i < o; ++i) {
    int64_t start = i * s - p, end = std::min(start + k, n + p);
    const int64_t pool = end - start;
    start = std::max<int64_t>(start, 0);
    end = std::min(end, n);
    c[i] = static_cast<double>(std::max<int64_t>(1, count_pad ? pool : end - start));
  }
  return c;
}

// The divisor tensor [B, O...] (ct) for an average pool.
Value AvgDivisor(Builder& b, const lazy::Attrs& a, const Dims& in_dims, const Dims& out_dims,
                 DType ct) {
  const int64_t nd = a.ints[0];
  const Dims k = Part(a, nd, 0), s = Part(a, nd, 1), p = Part(a, nd, 2);
  const bool count_pad = a.ints[1 + 3 * nd + 1] != 0;
  const int64_t divisor = a.ints[1 + 3 * nd + 2];
  if (divisor != 0) return ir::Full(b, ir::ConstantI(b, divisor, ct), out_dims);
  Value r;
  for (int64_t i = 0; i < nd; ++i) {
    Value v = ir::ConstantVectorF(
        b, AvgCounts(in_dims[1 + i], out_dims[1 + i], k[i], s[i], p[i], count_pad), ct);
    v = ir::BroadcastInDim(b, v, out_dims, {1 + i});
    r = r.valid() ? ir::Binary(b, "stablehlo.multiply", r, v) : v;
  }
  return r;
}

// ins = (x [B, S...]); ints = (nd, kernel, stride, padding, ceil_mode,
// count_include_pad, divisor_override or 0).
VS LowerAvgPool(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t nd = a.ints[0];
  const Dims k = Part(a, nd, 0), s = Part(a, nd, 1), p = Part(a, nd, 2);
  const ir::TensorType t = b.type(in[0]);
  const DType ct = ComputeType(t.dtype);
  ir::Window w{{1}, {1}, {1}, {0}, {0}};
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t o = out[0].dims[1 + i], n = t.dims[1 + i];
    w.dims.push_back(k[i]);
    w.strides.push_back(s[i]);
    w.dilations.push_back(1);
    w.pad_lo.push_back(p[i]);
    w.pad_hi.push_back(std::max<int64_t>(0, (o - 1) * s[i] + k[i] - n - p[i]));
  }
  Value sum = ir::ReduceWindow(b, {ir::Convert(b, in[0], ct)}, {ir::ConstantI(b, 0, ct)}, w,
                               [](Builder& rb, const VS& v) {
                                 return VS{ir::Binary(rb, "stablehlo.add", v[0], v[1])};
                               })[0];
  const Dims zero(out[0].dims.size(), 0), one(out[0].dims.size(), 1);
  sum = ir::Slice(b, sum, zero, out[0].dims, one);
  Value r = ir::Binary(b, "stablehlo.divide", sum, AvgDivisor(b, a, t.dims, out[0].dims, ct));
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kAvgPool{"aten::avg_pool", &LowerAvgPool};

// ins = (grad [B, O...]); out = [B, S...]; ints as the forward. Each input
// position gets the sum of grad / divisor over the windows that cover it:
// the gradient interior-padded by stride - 1, then summed over windows.
VS LowerAvgPoolGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t nd = a.ints[0];
  const Dims k = Part(a, nd, 0), s = Part(a, nd, 1), p = Part(a, nd, 2);
  const ir::TensorType gt = b.type(in[0]);
  const DType ct = ComputeType(out[0].dtype);
  Value g = ir::Binary(b, "stablehlo.divide", ir::Convert(b, in[0], ct),
                       AvgDivisor(b, a, out[0].dims, gt.dims, ct));
  Dims lo{0}, hi{0}, interior{0}, start{0}, limit{gt.dims[0]};
  ir::Window w{{1}, {1}, {1}, {0}, {0}};
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t o = gt.dims[1 + i], n = out[0].dims[1 + i], total = p[i] + n;
    lo.push_back(k[i] - 1);
    hi.push_back(total - s[i] * (o - 1) - 1);
    interior.push_back(s[i] - 1);
    w.dims.push_back(k[i]);
    w.strides.push_back(1);
    w.dilations.push_back(1);
    w.pad_lo.push_back(0);
    w.pad_hi.push_back(0);
    start.push_back(p[i]);
    limit.push_back(total);
  }
  Value padded = ir::Pad(b, g, ir::ConstantI(b, 0, ct), lo, hi, interior);
  Value r = ir::ReduceWindow(b, {padded}, {ir::ConstantI(b, 0, ct)}, w,
                             [](Builder& rb, const VS& v) {
                               return VS{ir::Binary(rb, "stablehlo.add", v[0], v[1])};
                             })[0];
  r = ir::Slice(b, r, start, limit, Dims(limit.size(), 1));
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kAvgPoolGrad{"aten::avg_pool_backward", &LowerAvgPoolGrad};

// Adaptive pooling windows along one dim: [floor(i*n/o), ceil((i+1)*n/o)).
std::vector<int64_t> AdaptiveStart(int64_t n, int64_t o) {
  std::vector<int64_t> v(o);
  for (int64_t i = 0; i < o; ++i) v[i] = (i * n) / o;
  return v;
}
std::vector<int64_t> AdaptiveEnd(int64_t n, int64_t o) {
  std::vector<int64_t> v(o);
  for (int64_t i = 0; i < o; ++i) v[i] = ((i + 1) * n + o - 1) / o;
  return v;
}

// [o, n] of ct: 1 where input j is in output i's window.
Value WindowMatrix(Builder& b, int64_t n, int64_t o, DType ct) {
  Value j = ir::Iota(b, {o, n}, 1, DType::S64);
  Value st = ir::BroadcastInDim(b, ir::ConstantVectorI(b, AdaptiveStart(n, o), DType::S64), {o, n}, {0});
  Value en = ir::BroadcastInDim(b, ir::ConstantVectorI(b, AdaptiveEnd(n, o), DType::S64), {o, n}, {0});
  Value in_win = ir::Binary(b, "stablehlo.and", ir::Compare(b, j, st, ir::Cmp::GE),
                            ir::Compare(b, j, en, ir::Cmp::LT));
  return ir::Convert(b, in_win, ct);
}

// Product over dims of each output's window size, shaped [B, O...].
Value AdaptiveCounts(Builder& b, const Dims& in_dims, const Dims& out_dims, DType ct) {
  Value r;
  for (size_t i = 1; i < out_dims.size(); ++i) {
    auto st = AdaptiveStart(in_dims[i], out_dims[i]), en = AdaptiveEnd(in_dims[i], out_dims[i]);
    std::vector<double> c(st.size());
    for (size_t j = 0; j < c.size(); ++j) c[j] = static_cast<double>(en[j] - st[j]);
    Value v = ir::BroadcastInDim(b, ir::ConstantVectorF(b, c, ct), out_dims,
                                 {static_cast<int64_t>(i)});
    r = r.valid() ? ir::Binary(b, "stablehlo.multiply", r, v) : v;
  }
  return r;
}

// Contracts dim 1 of x with dim `mdim` of m; the new dim goes last. Applied
// once per spatial dim, the spatial dims come back in order.
Value ContractFirstSpatial(Builder& b, Value x, Value m, int64_t mdim) {
  const ir::TensorType t = b.type(x);
  Dims od;
  for (size_t i = 0; i < t.dims.size(); ++i)
    if (i != 1) od.push_back(t.dims[i]);
  od.push_back(b.type(m).dims[1 - mdim]);
  ir::DotDims dd{{}, {}, {1}, {mdim}};
  return ir::DotGeneral(b, x, m, dd, ir::TensorType{t.dtype, od}, "HIGHEST");
}

// ins = (x [B, S...]); out = [B, O...].
VS LowerAdaptiveAvg(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType t = b.type(in[0]);
  const DType ct = ComputeType(t.dtype);
  Value x = ir::Convert(b, in[0], ct);
  for (size_t i = 1; i < t.dims.size(); ++i)
    x = ContractFirstSpatial(b, x, WindowMatrix(b, t.dims[i], out[0].dims[i], ct), 1);
  x = ir::Binary(b, "stablehlo.divide", x, AdaptiveCounts(b, t.dims, out[0].dims, ct));
  return {ir::Convert(b, x, out[0].dtype)};
}
constexpr lazy::Lowering kAdaptiveAvg{"aten::_adaptive_avg_pool", &LowerAdaptiveAvg};

// ins = (grad [B, O...]); out = [B, S...].
VS LowerAdaptiveAvgGrad(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType gt = b.type(in[0]);
  const DType ct = ComputeType(out[0].dtype);
  Value g = ir::Binary(b, "stablehlo.divide", ir::Convert(b, in[0], ct),
                       AdaptiveCounts(b, out[0].dims, gt.dims, ct));
  for (size_t i = 1; i < gt.dims.size(); ++i)
    g = ContractFirstSpatial(b, g, WindowMatrix(b, out[0].dims[i], gt.dims[i], ct), 0);
  return {ir::Convert(b, g, out[0].dtype)};
}
constexpr lazy::Lowering kAdaptiveAvgGrad{"aten::_adaptive_avg_pool_backward",
                                          &LowerAdaptiveAvgGrad};

// ins = (x [B, S...]); out = ([B, O...] values, [B, O...] s64 indices).
VS LowerAdaptiveMax(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType t = b.type(in[0]);
  const int64_t nd = t.rank() - 1, B = t.dims[0];
  Value x = in[0];
  Dims split{B}, perm{0}, kdims;
  Value flat;  // flat plane index of each gathered element, [O0, K0, O1, K1, ...]
  Dims okdims;
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t n = t.dims[1 + i], o = out[0].dims[1 + i];
    auto st = AdaptiveStart(n, o), en = AdaptiveEnd(n, o);
    int64_t kmax = 1;
    for (int64_t j = 0; j < o; ++j) kmax = std::max(kmax, en[j] - st[j]);
    std::vector<int64_t> idx;
    for (int64_t j = 0; j < o; ++j)
      for (int64_t m = 0; m < kmax; ++m) idx.push_back(st[j] + std::min(m, en[j] - st[j] - 1));
    x = ir::TakeAlong(b, x, 1 + i, ir::ConstantVectorI(b, idx, DType::S64));
    split.push_back(o);
    split.push_back(kmax);
    kdims.push_back(kmax);
    okdims.push_back(o);
    okdims.push_back(kmax);
  }
  int64_t stride = 1;
  for (int64_t i = nd - 1; i >= 0; --i) {
    const int64_t n = t.dims[1 + i], o = out[0].dims[1 + i], kmax = kdims[i];
    auto st = AdaptiveStart(n, o), en = AdaptiveEnd(n, o);
    std::vector<int64_t> pos;
    for (int64_t j = 0; j < o; ++j)
      for (int64_t m = 0; m < kmax; ++m)
        pos.push_back((st[j] + std::min(m, en[j] - st[j] - 1)) * stride);
    Value v = ir::BroadcastInDim(b, ir::Reshape(b, ir::ConstantVectorI(b, pos, DType::S64), {o, kmax}),
                                 okdims, {2 * i, 2 * i + 1});
    flat = flat.valid() ? ir::Binary(b, "stablehlo.add", flat, v) : v;
    stride *= n;
  }
  Dims full_dims = split;  // [B, O0, K0, ...]
  x = ir::Reshape(b, x, full_dims);
  Value fi = ir::BroadcastInDim(b, flat, full_dims, [&] {
    Dims d;
    for (int64_t i = 0; i < 2 * nd; ++i) d.push_back(1 + i);
    return d;
  }());
  for (int64_t i = 0; i < nd; ++i) perm.push_back(1 + 2 * i);
  for (int64_t i = 0; i < nd; ++i) perm.push_back(2 + 2 * i);
  x = ir::Transpose(b, x, perm);
  fi = ir::Transpose(b, fi, perm);
  int64_t kprod = 1;
  for (int64_t kd : kdims) kprod *= kd;
  Dims rd = out[0].dims;
  rd.push_back(kprod);
  x = ir::Reshape(b, x, rd);
  fi = ir::Reshape(b, fi, rd);
  const ir::TensorType sv{t.dtype, {}}, si{DType::S64, {}};
  auto r = b.Op("stablehlo.reduce",
                {x, fi, ir::MinValue(b, t.dtype),
                 ir::ConstantI(b, std::numeric_limits<int64_t>::max(), DType::S64)},
                {out[0], ir::TensorType{DType::S64, out[0].dims}},
                {{"dimensions", ir::I64Array({nd + 1})}}, {ir::Region{{sv, si, sv, si}, PickMax}});
  return {r[0], r[1]};
}
constexpr lazy::Lowering kAdaptiveMax{"aten::adaptive_max_pool", &LowerAdaptiveMax};

// ---- kernels ----

std::vector<int64_t> Expand(const char* op, const char* what, at::IntArrayRef v, int64_t nd,
                            at::IntArrayRef dflt) {
  if (v.empty()) return dflt.vec();
  TORCH_CHECK(static_cast<int64_t>(v.size()) == 1 || static_cast<int64_t>(v.size()) == nd, op,
              ": ", what, " must either be a single int, or a tuple of ", nd, " ints");
  return v.size() == 1 ? std::vector<int64_t>(nd, v[0]) : v.vec();
}

// self reshaped to [B, spatial...] (B = product of the leading dims).
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

std::tuple<Tensor, Tensor> MaxPool(const char* op, const Tensor& self, int64_t nd,
                                   at::IntArrayRef ks, at::IntArrayRef st, at::IntArrayRef pd,
                                   at::IntArrayRef dl, at::IntArrayRef out_sizes) {
  CheckTpu(op, self, "self");
  auto k = Expand(op, "kernel_size", ks, nd, {});
  auto s = Expand(op, "stride", st, nd, k);
  auto p = Expand(op, "padding", pd, nd, {});
  auto d = Expand(op, "dilation", dl, nd, {});
  Tensor values = EmptyTpu(out_sizes, self.scalar_type());
  Tensor indices = EmptyTpu(out_sizes, at::kLong);
  if (values.numel() == 0) return {values, indices};
  std::vector<int64_t> ints{nd};
  for (const auto* v : {&k, &s, &p, &d}) ints.insert(ints.end(), v->begin(), v->end());
  auto fs = FlatSizes(out_sizes, nd);
  auto r = Run(kMaxPool, {ints, {}, {}}, {OperandOf(Flat(self, nd))},
               {TypeOf(fs, self.scalar_type()), TypeOf(fs, at::kLong)});
  return {r[0].reshape(out_sizes), r[1].reshape(out_sizes)};
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices_tpu(const Tensor& self, at::IntArrayRef k,
                                                       at::IntArrayRef s, at::IntArrayRef p,
                                                       at::IntArrayRef d, bool ceil_mode) {
  auto meta = at::max_pool2d_with_indices(MetaOf(self), k, s, p, d, ceil_mode);
  return MaxPool("max_pool2d_with_indices", self, 2, k, s, p, d, std::get<0>(meta).sizes());
}
std::tuple<Tensor, Tensor> max_pool3d_with_indices_tpu(const Tensor& self, at::IntArrayRef k,
                                                       at::IntArrayRef s, at::IntArrayRef p,
                                                       at::IntArrayRef d, bool ceil_mode) {
  auto meta = at::max_pool3d_with_indices(MetaOf(self), k, s, p, d, ceil_mode);
  return MaxPool("max_pool3d_with_indices", self, 3, k, s, p, d, std::get<0>(meta).sizes());
}

Tensor IndexGrad(const char* op, const Tensor& grad, const Tensor& self, const Tensor& indices,
                 int64_t nd) {
  CheckTpu(op, grad, "grad_output");
  CheckTpu(op, indices, "indices");
  TORCH_CHECK(grad.sizes() == indices.sizes(), op, ": grad_output of shape ", grad.sizes(),
              " does not match indices of shape ", indices.sizes());
  TORCH_CHECK(grad.dim() == self.dim(), op, ": grad_output and self must have the same rank");
  if (self.numel() == 0 || grad.numel() == 0)
    return at::zeros(self.sizes(), self.options());
  return Run1(kMaxPoolGrad, {}, {OperandOf(Flat(grad, nd)), OperandOf(Flat(indices, nd))},
              TypeOf(FlatSizes(self.sizes(), nd), self.scalar_type()))
      .reshape(self.sizes());
}

Tensor max_pool2d_with_indices_backward_tpu(const Tensor& grad, const Tensor& self,
                                            at::IntArrayRef, at::IntArrayRef, at::IntArrayRef,
                                            at::IntArrayRef, bool, const Tensor& indices) {
  return IndexGrad("max_pool2d_with_indices_backward", grad, self, indices, 2);
}
Tensor max_pool3d_with_indices_backward_tpu(const Tensor& grad, const Tensor& self,
                                            at::IntArrayRef, at::IntArrayRef, at::IntArrayRef,
                                            at::IntArrayRef, bool, const Tensor& indices) {
  return IndexGrad("max_pool3d_with_indices_backward", grad, self, indices, 3);
}

lazy::Attrs AvgAttrs(const char* op, int64_t nd, at::IntArrayRef ks, at::IntArrayRef st,
                     at::IntArrayRef pd, bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor) {
  auto k = Expand(op, "kernel_size", ks, nd, {});
  auto s = Expand(op, "stride", st, nd, k);
  auto p = Expand(op, "padding", pd, nd, {});
  TORCH_CHECK(!divisor.has_value() || *divisor != 0, op, ": divisor must be not zero");
  std::vector<int64_t> ints{nd};
  for (const auto* v : {&k, &s, &p}) ints.insert(ints.end(), v->begin(), v->end());
  ints.push_back(ceil_mode ? 1 : 0);
  ints.push_back(count_include_pad ? 1 : 0);
  ints.push_back(divisor.value_or(0));
  return {ints, {}, {}};
}

Tensor AvgPool(const char* op, const Tensor& self, int64_t nd, const lazy::Attrs& attrs,
               at::IntArrayRef out_sizes) {
  CheckTpu(op, self, "self");
  if (c10::multiply_integers(out_sizes) == 0) return EmptyTpu(out_sizes, self.scalar_type());
  return Run1(kAvgPool, attrs, {OperandOf(Flat(self, nd))},
              TypeOf(FlatSizes(out_sizes, nd), self.scalar_type()))
      .reshape(out_sizes);
}

Tensor AvgPoolGrad(const char* op, const Tensor& grad, const Tensor& self, int64_t nd,
                   const lazy::Attrs& attrs, at::IntArrayRef expected) {
  CheckTpu(op, grad, "grad_output");
  TORCH_CHECK(grad.sizes() == expected, op, ": expected grad_output of shape ", expected,
              " but got ", grad.sizes());
  if (self.numel() == 0 || grad.numel() == 0) return at::zeros(self.sizes(), self.options());
  return Run1(kAvgPoolGrad, attrs, {OperandOf(Flat(grad, nd))},
              TypeOf(FlatSizes(self.sizes(), nd), self.scalar_type()))
      .reshape(self.sizes());
}

Tensor avg_pool2d_tpu(const Tensor& self, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p,
                      bool ceil_mode, bool cip, std::optional<int64_t> div) {
  Tensor meta = at::avg_pool2d(MetaOf(self), k, s, p, ceil_mode, cip, div);
  return AvgPool("avg_pool2d", self, 2, AvgAttrs("avg_pool2d", 2, k, s, p, ceil_mode, cip, div),
                 meta.sizes());
}
Tensor avg_pool3d_tpu(const Tensor& self, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p,
                      bool ceil_mode, bool cip, std::optional<int64_t> div) {
  Tensor meta = at::avg_pool3d(MetaOf(self), k, s, p, ceil_mode, cip, div);
  return AvgPool("avg_pool3d", self, 3, AvgAttrs("avg_pool3d", 3, k, s, p, ceil_mode, cip, div),
                 meta.sizes());
}
Tensor avg_pool2d_backward_tpu(const Tensor& grad, const Tensor& self, at::IntArrayRef k,
                               at::IntArrayRef s, at::IntArrayRef p, bool ceil_mode, bool cip,
                               std::optional<int64_t> div) {
  Tensor meta = at::avg_pool2d(MetaOf(self), k, s, p, ceil_mode, cip, div);
  return AvgPoolGrad("avg_pool2d_backward", grad, self, 2,
                     AvgAttrs("avg_pool2d_backward", 2, k, s, p, ceil_mode, cip, div),
                     meta.sizes());
}
Tensor avg_pool3d_backward_tpu(const Tensor& grad, const Tensor& self, at::IntArrayRef k,
                               at::IntArrayRef s, at::IntArrayRef p, bool ceil_mode, bool cip,
                               std::optional<int64_t> div) {
  Tensor meta = at::avg_pool3d(MetaOf(self), k, s, p, ceil_mode, cip, div);
  return AvgPoolGrad("avg_pool3d_backward", grad, self, 3,
                     AvgAttrs("avg_pool3d_backward", 3, k, s, p, ceil_mode, cip, div),
                     meta.sizes());
}

Tensor AdaptiveAvg(const char* op, const Tensor& self, int64_t nd, at::IntArrayRef out_sizes) {
  CheckTpu(op, self, "self");
  if (c10::multiply_integers(out_sizes) == 0) return EmptyTpu(out_sizes, self.scalar_type());
  return Run1(kAdaptiveAvg, {}, {OperandOf(Flat(self, nd))},
              TypeOf(FlatSizes(out_sizes, nd), self.scalar_type()))
      .reshape(out_sizes);
}
Tensor adaptive_avg_pool2d_tpu(const Tensor& self, at::IntArrayRef output_size) {
  Tensor meta = at::_adaptive_avg_pool2d(MetaOf(self), output_size);
  return AdaptiveAvg("_adaptive_avg_pool2d", self, 2, meta.sizes());
}
Tensor adaptive_avg_pool3d_tpu(const Tensor& self, at::IntArrayRef output_size) {
  Tensor meta = at::_adaptive_avg_pool3d(MetaOf(self), output_size);
  return AdaptiveAvg("_adaptive_avg_pool3d", self, 3, meta.sizes());
}
Tensor AdaptiveAvgGrad(const char* op, const Tensor& grad, const Tensor& self, int64_t nd) {
  CheckTpu(op, grad, "grad_output");
  CheckTpu(op, self, "self");
  TORCH_CHECK(grad.dim() == self.dim(), op, ": grad_output and self must have the same rank");
  if (self.numel() == 0 || grad.numel() == 0) return at::zeros(self.sizes(), self.options());
  return Run1(kAdaptiveAvgGrad, {}, {OperandOf(Flat(grad, nd))},
              TypeOf(FlatSizes(self.sizes(), nd), self.scalar_type()))
      .reshape(self.sizes());
}
Tensor adaptive_avg_pool2d_backward_tpu(const Tensor& grad, const Tensor& self) {
  return AdaptiveAvgGrad("_adaptive_avg_pool2d_backward", grad, self, 2);
}
Tensor adaptive_avg_pool3d_backward_tpu(const Tensor& grad, const Tensor& self) {
  return AdaptiveAvgGrad("_adaptive_avg_pool3d_backward", grad, self, 3);
}

std::tuple<Tensor, Tensor> AdaptiveMax(const char* op, const Tensor& self, int64_t nd,
                                       at::IntArrayRef out_sizes) {
  CheckTpu(op, self, "self");
  Tensor values = EmptyTpu(out_sizes, self.scalar_type());
  Tensor indices = EmptyTpu(out_sizes, at::kLong);
  if (values.numel() == 0) return {values, indices};
  auto fs = FlatSizes(out_sizes, nd);
  auto r = Run(kAdaptiveMax, {}, {OperandOf(Flat(self, nd))},
               {TypeOf(fs, self.scalar_type()), TypeOf(fs, at::kLong)});
  return {r[0].reshape(out_sizes), r[1].reshape(out_sizes)};
}
std::tuple<Tensor, Tensor> adaptive_max_pool2d_tpu(const Tensor& self, at::IntArrayRef output_size) {
  auto meta = at::adaptive_max_pool2d(MetaOf(self), output_size);
  return AdaptiveMax("adaptive_max_pool2d", self, 2, std::get<0>(meta).sizes());
}
std::tuple<Tensor, Tensor> adaptive_max_pool3d_tpu(const Tensor& self, at::IntArrayRef output_size) {
  auto meta = at::adaptive_max_pool3d(MetaOf(self), output_size);
  return AdaptiveMax("adaptive_max_pool3d", self, 3, std::get<0>(meta).sizes());
}
Tensor adaptive_max_pool2d_backward_tpu(const Tensor& grad, const Tensor& self,
                                        const Tensor& indices) {
  return IndexGrad("adaptive_max_pool2d_backward", grad, self, indices, 2);
}
Tensor adaptive_max_pool3d_backward_tpu(const Tensor& grad, const Tensor& self,
                                        const Tensor& indices) {
  return IndexGrad("adaptive_max_pool3d_backward", grad, self, indices, 3);
}

// ---- max_unpool: values written at their flat indices in zeroed planes ----

// ins = (x [B, Q], indices [B, Q]); out = [B, P].
VS LowerMaxUnpool(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::Dims xd = b.type(in[0]).dims;
  const int64_t B = xd[0], q = xd[1], plane = out[0].dims[1];
  Value idx = ir::Convert(b, in[1], DType::S64);
  // Out-of-range indices go past the end and are dropped.
  Value bad = ir::Binary(b, "stablehlo.or",
                         ir::Compare(b, idx, ir::Full(b, ir::ConstantI(b, 0, DType::S64), {B, q}), ir::Cmp::LT),
                         ir::Compare(b, idx, ir::Full(b, ir::ConstantI(b, plane, DType::S64), {B, q}), ir::Cmp::GE));
  Value flat = ir::Binary(b, "stablehlo.add",
                          ir::Binary(b, "stablehlo.multiply", ir::Iota(b, {B, q}, 0, DType::S64),
                                     ir::Full(b, ir::ConstantI(b, plane, DType::S64), {B, q})),
                          idx);
  flat = ir::Select(b, bad, ir::Full(b, ir::ConstantI(b, B * plane, DType::S64), {B, q}), flat);
  Value zeros = ir::Full(b, ir::ConstantI(b, 0, out[0].dtype), {B * plane});
  Value r = ir::Put(b, zeros, ir::Reshape(b, flat, {B * q}),
                    ir::Reshape(b, ir::Convert(b, in[0], out[0].dtype), {B * q}));
  return {ir::Reshape(b, r, out[0].dims)};
}
constexpr lazy::Lowering kMaxUnpool{"aten::max_unpool", &LowerMaxUnpool};

Tensor MaxUnpool(const char* op, const Tensor& self, const Tensor& indices,
                 at::IntArrayRef output_size, int64_t nd) {
  CheckTpu(op, self, "self");
  CheckTpu(op, indices, "indices");
  TORCH_CHECK(indices.scalar_type() == at::kLong, op, ": elements in indices should be type int64 "
              "but got: ", indices.scalar_type());
  TORCH_CHECK(static_cast<int64_t>(output_size.size()) == nd, op,
              ": There should be exactly ", nd, " elements (depth, height, width) in output_size, "
              "but got ", output_size.size(), " elements.");
  TORCH_CHECK(self.dim() == nd + 1 || self.dim() == nd + 2, op, ": Input to max_unpooling should "
              "be a ", nd + 1, "d or ", nd + 2, "d Tensor, but got a tensor with ", self.dim(),
              " dimensions.");
  TORCH_CHECK(self.sizes() == indices.sizes(), op, ": Shape of input must match shape of indices");
  for (int64_t i = 1; i < self.dim(); ++i)
    TORCH_CHECK(self.size(i) > 0, op, ": Expected input to have non-zero size for non-batch "
                "dimensions, but got ", self.sizes());
  std::vector<int64_t> os(self.sizes().begin(), self.sizes().end() - nd);
  int64_t plane = 1;
  for (int64_t v : output_size) {
    os.push_back(v);
    plane *= v;
  }
  if (c10::multiply_integers(os) == 0 || self.numel() == 0)
    return at::zeros(os, self.options());
  int64_t lead = 1;
  for (int64_t i = 0; i < self.dim() - nd; ++i) lead *= self.size(i);
  Tensor x = self.reshape({lead, -1}), ix = indices.reshape({lead, -1});
  return Run1(kMaxUnpool, {}, {OperandOf(x), OperandOf(ix)}, TypeOf({lead, plane}, self.scalar_type()))
      .reshape(os);
}
// Duplicate indices leave which value lands unspecified, on every device:
// torch.use_deterministic_algorithms(True) raises, as on CPU and CUDA.
Tensor max_unpool2d_tpu(const Tensor& self, const Tensor& indices, at::IntArrayRef output_size) {
  at::globalContext().alertNotDeterministic("max_unpooling2d_forward_out");
  return MaxUnpool("max_unpool2d", self, indices, output_size, 2);
}
Tensor max_unpool3d_tpu(const Tensor& self, const Tensor& indices, at::IntArrayRef output_size,
                        at::IntArrayRef stride, at::IntArrayRef padding) {
  TORCH_CHECK(stride.size() == 3 && padding.size() == 3,
              "max_unpool3d: There should be exactly three elements (depth, height, width) in "
              "stride and padding");
  at::globalContext().alertNotDeterministic("max_unpooling3d_forward_out");
  return MaxUnpool("max_unpool3d", self, indices, output_size, 3);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_pool2d_with_indices", TORCH_FN(max_pool2d_with_indices_tpu));
  m.impl("max_pool3d_with_indices", TORCH_FN(max_pool3d_with_indices_tpu));
  m.impl("max_pool2d_with_indices_backward", TORCH_FN(max_pool2d_with_indices_backward_tpu));
  m.impl("max_pool3d_with_indices_backward", TORCH_FN(max_pool3d_with_indices_backward_tpu));
  m.impl("avg_pool2d", TORCH_FN(avg_pool2d_tpu));
  m.impl("avg_pool3d", TORCH_FN(avg_pool3d_tpu));
  m.impl("avg_pool2d_backward", TORCH_FN(avg_pool2d_backward_tpu));
  m.impl("avg_pool3d_backward", TORCH_FN(avg_pool3d_backward_tpu));
  m.impl("_adaptive_avg_pool2d", TORCH_FN(adaptive_avg_pool2d_tpu));
  m.impl("_adaptive_avg_pool3d", TORCH_FN(adaptive_avg_pool3d_tpu));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(adaptive_avg_pool2d_backward_tpu));
  m.impl("_adaptive_avg_pool3d_backward", TORCH_FN(adaptive_avg_pool3d_backward_tpu));
  m.impl("adaptive_max_pool2d", TORCH_FN(adaptive_max_pool2d_tpu));
  m.impl("adaptive_max_pool3d", TORCH_FN(adaptive_max_pool3d_tpu));
  m.impl("adaptive_max_pool2d_backward", TORCH_FN(adaptive_max_pool2d_backward_tpu));
  m.impl("adaptive_max_pool3d_backward", TORCH_FN(adaptive_max_pool3d_backward_tpu));
  m.impl("max_unpool2d", TORCH_FN(max_unpool2d_tpu));
  m.impl("max_unpool3d", TORCH_FN(max_unpool3d_tpu));
}

}  // namespace tpu::ops
