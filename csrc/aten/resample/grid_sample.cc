// grid_sampler_2d and grid_sampler_3d (bilinear/trilinear and nearest;
// zeros, border and reflection padding; both align_corners) with backward.
//
// The grid's coordinates are mapped to input pixel positions elementwise,
// exactly as CPU's GridSampler.h does (with the derivative of the mapping
// for the grid's gradient). The up to 2^nd corner pixels are gathered from
// the input laid out as [N, prod(spatial), C]; corners outside the input
// weigh 0. The
// input gradient is a scatter-add of the weighted output gradient at the same
// corners.
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <array>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"

namespace tpu::ops {

using ir::Dims;

namespace {

enum Interp : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

struct Ctx {
  Builder& b;
  Dims d;  // [N, P] (P = Ho*Wo)
  DType t;
  Value c(double v) const { return ir::Full(b, ir::ConstantF(b, v, t), d); }
  Value add(Value x, Value y) const { return ir::Binary(b, "stablehlo.add", x, y); }
  Value sub(Value x, Value y) const { return ir::Binary(b, "stablehlo.subtract", x, y); }
  Value mul(Value x, Value y) const { return ir::Binary(b, "stablehlo.multiply", x, y); }
  Value sel(Value p, Value x, Value y) const { return ir::Select(b, p, x, y); }
  Value cmp(Value x, Value y, ir::Cmp c) const { return ir::Compare(b, x, y, c); }
  Value floor(Value x) const { return ir::Unary(b, "stablehlo.floor", x); }
};

// Clip to [0, size - 1]; the derivative is 0 on and past the ends.
void Clip(const Ctx& k, Value& x, Value& dx, int64_t size) {
  Value hi = k.c(static_cast<double>(size - 1)), zero = k.c(0);
  Value inside = ir::Binary(k.b, "stablehlo.and", k.cmp(x, zero, ir::Cmp::GT),
                            k.cmp(x, hi, ir::Cmp::LT));
  dx = k.sel(inside, dx, zero);
  x = ir::Min(k.b, hi, ir::Max(k.b, x, zero));
}

// Reflect into [twice_low/2, twice_high/2].
void Reflect(const Ctx& k, Value& x, Value& dx, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) {
    x = k.c(0);
    dx = k.c(0);
    return;
  }
  const double mn = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  Value t = k.sub(x, k.c(mn));
  Value neg = k.cmp(t, k.c(0), ir::Cmp::LT);
  Value sign = k.sel(neg, k.c(-1), k.c(1));
  t = ir::Unary(k.b, "stablehlo.abs", t);
  Value extra = ir::Binary(k.b, "stablehlo.remainder", t, k.c(span));
  Value flips = k.floor(ir::Binary(k.b, "stablehlo.divide", t, k.c(span)));
  Value even = k.cmp(ir::Binary(k.b, "stablehlo.remainder", flips, k.c(2)), k.c(0), ir::Cmp::EQ);
  x = k.sel(even, k.add(extra, k.c(mn)), k.add(k.sub(k.c(span), extra), k.c(mn)));
  dx = k.mul(dx, k.sel(even, sign, ir::Unary(k.b, "stablehlo.negate", sign)));
}

// Pixel position of normalized coordinate g along a dim of `size`, and its
// derivative.
std::pair<Value, Value> SourceIndex(const Ctx& k, Value g, int64_t size, int64_t padding,
                                    bool align) {
  Value x, dx;
  if (align) {
    x = k.mul(k.add(g, k.c(1)), k.c((size - 1) / 2.0));
    dx = k.c((size - 1) / 2.0);
  } else {
    x = k.mul(k.sub(k.mul(k.add(g, k.c(1)), k.c(static_cast<double>(size))), k.c(1)), k.c(0.5));
    dx = k.c(size / 2.0);
  }
  if (padding == kBorder) {
    Clip(k, x, dx, size);
  } else if (padding == kReflection) {
    if (align) Reflect(k, x, dx, 0, 2 * (size - 1));
    else Reflect(k, x, dx, -1, 2 * size - 1);
    Clip(k, x, dx, size);
  }
  return {x, dx};
}

struct Corner {
  Value index;            // [N, P, 2] (n, flat spatial position), clamped into range
  Value weight;           // [N, P], 0 when outside the input
  std::vector<Value> dw;  // d weight / d coordinate c (linear modes), per grid coordinate
};

// The corners for a grid [N, out..., nd] over an input [N, C, S...]. Grid
// coordinate c (x, y, z) indexes spatial dim nd - 1 - c. `dcoord` gets the
// derivative of each coordinate's pixel position.
std::vector<Corner> Corners(Builder& b, Value grid, const Dims& in_dims, const lazy::Attrs& a,
                            DType ct, std::vector<Value>* dcoord) {
  const int64_t nd = static_cast<int64_t>(in_dims.size()) - 2;
  const int64_t n = in_dims[0];
  const Dims gd = b.type(grid).dims;
  int64_t p = 1;
  for (int64_t i = 1; i <= nd; ++i) p *= gd[i];
  Ctx k{b, {n, p}, ct};
  Value g = ir::Reshape(b, ir::Convert(b, grid, ct), {n, p, nd});
  std::vector<Value> pos(nd);
  std::vector<int64_t> size(nd), stride(nd);
  dcoord->assign(nd, Value{});
  int64_t st = 1;
  for (int64_t sdim = nd - 1; sdim >= 0; --sdim) {  // spatial dim strides
    const int64_t c = nd - 1 - sdim;
    stride[c] = st;
    size[c] = in_dims[2 + sdim];
    st *= size[c];
  }
  for (int64_t c = 0; c < nd; ++c) {
    Value gc = ir::Reshape(b, ir::Slice(b, g, {0, 0, c}, {n, p, c + 1}, {1, 1, 1}), {n, p});
    auto [x, dx] = SourceIndex(k, gc, size[c], a.ints[1], a.ints[2] != 0);
    pos[c] = x;
    (*dcoord)[c] = dx;
  }
  Value batch = ir::Reshape(b, ir::Iota(b, {n, p}, 0, DType::S64), {n, p, 1});
  // One corner from integer-valued coordinates `cs`.
  auto corner = [&](const std::vector<Value>& cs, Value wgt, std::vector<Value> dw) {
    Value in, flat;
    for (int64_t c = 0; c < nd; ++c) {
      const double hi = static_cast<double>(size[c] - 1);
      Value ok = ir::Binary(b, "stablehlo.and", k.cmp(cs[c], k.c(0), ir::Cmp::GE),
                            k.cmp(cs[c], k.c(hi), ir::Cmp::LE));
      in = in.valid() ? ir::Binary(b, "stablehlo.and", in, ok) : ok;
      Value ic = ir::Convert(b, ir::Min(b, k.c(hi), ir::Max(b, cs[c], k.c(0))), DType::S64);
      Value term = ir::Binary(b, "stablehlo.multiply", ic,
                              ir::Full(b, ir::ConstantI(b, stride[c], DType::S64), {n, p}));
      flat = flat.valid() ? ir::Binary(b, "stablehlo.add", flat, term) : term;
    }
    Value idx = ir::Concatenate(b, {batch, ir::Reshape(b, flat, {n, p, 1})}, 2);
    Value zero = k.c(0);
    for (Value& v : dw) v = k.sel(in, v, zero);
    return Corner{idx, k.sel(in, wgt, zero), dw};
  };
  if (a.ints[0] == kNearest) {
    std::vector<Value> cs(nd);
    for (int64_t c = 0; c < nd; ++c) cs[c] = ir::Unary(b, "stablehlo.round_nearest_even", pos[c]);
    return {corner(cs, k.c(1), {})};
  }
  std::vector<Value> lo(nd), hi(nd), wlo(nd), whi(nd);
  for (int64_t c = 0; c < nd; ++c) {
    lo[c] = k.floor(pos[c]);
    hi[c] = k.add(lo[c], k.c(1));
    wlo[c] = k.sub(hi[c], pos[c]);  // weight of the lower neighbour
    whi[c] = k.sub(pos[c], lo[c]);
  }
  std::vector<Corner> out;
  for (int64_t mask = 0; mask < (int64_t{1} << nd); ++mask) {
    std::vector<Value> cs(nd), dw(nd);
    Value wgt;
    for (int64_t c = 0; c < nd; ++c) {
      const bool up = (mask >> c) & 1;
      cs[c] = up ? hi[c] : lo[c];
      Value wc = up ? whi[c] : wlo[c];
      wgt = wgt.valid() ? k.mul(wgt, wc) : wc;
    }
    for (int64_t c = 0; c < nd; ++c) {
      Value d = ((mask >> c) & 1) ? k.c(1) : k.c(-1);
      for (int64_t c2 = 0; c2 < nd; ++c2)
        if (c2 != c) d = k.mul(d, ((mask >> c2) & 1) ? whi[c2] : wlo[c2]);
      dw[c] = d;
    }
    out.push_back(corner(cs, wgt, dw));
  }
  return out;
}

ir::GatherDims PixelGather() {
  ir::GatherDims gd;
  gd.offset_dims = {2};
  gd.collapsed_slice_dims = {0, 1};
  gd.start_index_map = {0, 1};
  gd.index_vector_dim = 2;
  return gd;
}

// input [N, C, S...] -> [N, prod(S), C]
Value PixelsLast(Builder& b, Value x) {
  const Dims d = b.type(x).dims;
  Dims perm{0};
  int64_t sp = 1;
  for (size_t i = 2; i < d.size(); ++i) {
    perm.push_back(static_cast<int64_t>(i));
    sp *= d[i];
  }
  perm.push_back(1);
  return ir::Reshape(b, ir::Transpose(b, x, perm), {d[0], sp, d[1]});
}

// [N, P, C] -> [N, C, out...]
Value ChannelsFirst(Builder& b, Value v, const Dims& out_dims) {
  Dims nd_last{out_dims[0]};
  for (size_t i = 2; i < out_dims.size(); ++i) nd_last.push_back(out_dims[i]);
  nd_last.push_back(out_dims[1]);
  Dims perm{0, static_cast<int64_t>(out_dims.size()) - 1};
  for (size_t i = 1; i + 1 < out_dims.size(); ++i) perm.push_back(static_cast<int64_t>(i));
  return ir::Transpose(b, ir::Reshape(b, v, nd_last), perm);
}

VS LowerGridSampler(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ct = out[0].dtype == DType::F64 ? DType::F64 : DType::F32;
  const Dims id = b.type(in[0]).dims;
  const int64_t n = id[0], c = id[1];
  const Dims od = out[0].dims;  // [N, C, out...]
  int64_t p = 1;
  for (size_t i = 2; i < od.size(); ++i) p *= od[i];
  std::vector<Value> dcoord;
  auto corners = Corners(b, in[1], id, a, ct, &dcoord);
  Value src = PixelsLast(b, ir::Convert(b, in[0], ct));
  Value acc;
  for (const Corner& k : corners) {
    Value v = ir::Gather(b, src, k.index, PixelGather(), {1, 1, c}, ir::TensorType{ct, {n, p, c}});
    Value t = ir::Binary(b, "stablehlo.multiply", v, ir::BroadcastInDim(b, k.weight, {n, p, c}, {0, 1}));
    acc = acc.valid() ? ir::Binary(b, "stablehlo.add", acc, t) : t;
  }
  return {ir::Convert(b, ChannelsFirst(b, acc, od), out[0].dtype)};
}
constexpr lazy::Lowering kGridSampler{"aten::grid_sampler", &LowerGridSampler};

// ins = (grad [N, C, out...], input, grid); out = (grad_input, grad_grid).
VS LowerGridSamplerGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ct = out[0].dtype == DType::F64 ? DType::F64 : DType::F32;
  const Dims id = out[0].dims;
  const int64_t nd = static_cast<int64_t>(id.size()) - 2;
  const int64_t n = id[0], c = id[1];
  int64_t sp = 1;
  for (size_t i = 2; i < id.size(); ++i) sp *= id[i];
  const Dims gdim = b.type(in[0]).dims;
  int64_t p = 1;
  for (size_t i = 2; i < gdim.size(); ++i) p *= gdim[i];
  std::vector<Value> dcoord;
  auto corners = Corners(b, in[2], id, a, ct, &dcoord);
  Value g = PixelsLast(b, ir::Convert(b, in[0], ct));  // [N, P, C]
  Value src = PixelsLast(b, ir::Convert(b, in[1], ct));
  Value gin = ir::Full(b, ir::ConstantI(b, 0, ct), {n, sp, c});
  ir::ScatterDims sd;
  sd.update_window_dims = {2};
  sd.inserted_window_dims = {0, 1};
  sd.scatter_dims_to_operand_dims = {0, 1};
  sd.index_vector_dim = 2;
  std::vector<Value> gc(nd);
  for (const Corner& k : corners) {
    Value upd = ir::Binary(b, "stablehlo.multiply", g, ir::BroadcastInDim(b, k.weight, {n, p, c}, {0, 1}));
    gin = ir::Scatter(b, gin, k.index, upd, sd, "stablehlo.add");
    if (k.dw.empty()) continue;
    Value v = ir::Gather(b, src, k.index, PixelGather(), {1, 1, c}, ir::TensorType{ct, {n, p, c}});
    Value s = ir::Reduce(b, ir::Binary(b, "stablehlo.multiply", v, g), ir::ConstantI(b, 0, ct), {2},
                         "stablehlo.add");  // [N, P]
    for (int64_t j = 0; j < nd; ++j) {
      Value t = ir::Binary(b, "stablehlo.multiply", k.dw[j], s);
      gc[j] = gc[j].valid() ? ir::Binary(b, "stablehlo.add", gc[j], t) : t;
    }
  }
  Value ggrid;
  if (gc[0].valid()) {
    std::vector<Value> parts;
    for (int64_t j = 0; j < nd; ++j)
      parts.push_back(ir::Reshape(b, ir::Binary(b, "stablehlo.multiply", gc[j], dcoord[j]), {n, p, 1}));
    ggrid = ir::Concatenate(b, parts, 2);
  } else {
    ggrid = ir::Full(b, ir::ConstantI(b, 0, ct), {n, p, nd});
  }
  return {ir::Convert(b, ChannelsFirst(b, gin, id), out[0].dtype),
          ir::Convert(b, ir::Reshape(b, ggrid, out[1].dims), out[1].dtype)};
}
constexpr lazy::Lowering kGridSamplerGrad{"aten::grid_sampler_backward", &LowerGridSamplerGrad};

void CheckGrid(const Tensor& input, const Tensor& grid, int64_t interp, int64_t padding,
               int64_t nd = 2) {
  const char* op = nd == 2 ? "grid_sampler_2d" : "grid_sampler_3d";
  CheckTpu(op, input, "input");
  CheckTpu(op, grid, "grid");
  // CPU's checks, in its order (the common ones, then the 2-D / 3-D one)
  TORCH_CHECK(input.size(0) == grid.size(0), "grid_sampler(): expected grid and input to have "
              "same batch size, but got input with sizes ", input.sizes(),
              " and grid with sizes ", grid.sizes());
  TORCH_CHECK(grid.size(-1) == input.dim() - 2, "grid_sampler(): expected grid to have size ",
              input.dim() - 2, " in last dimension, but got grid with sizes ", grid.sizes());
  for (int64_t i = 2; i < input.dim(); ++i)
    TORCH_CHECK(input.size(i) > 0, "grid_sampler(): expected input to have non-empty spatial "
                "dimensions, but input has sizes ", input.sizes(), " with dimension ", i,
                " being empty");
  TORCH_CHECK(input.dim() == nd + 2 && grid.dim() == nd + 2, "grid_sampler(): expected ", nd + 2,
              "D input and grid "
              "with same number of dimensions, but got input with sizes ", input.sizes(),
              " and grid with sizes ", grid.sizes());
  TORCH_CHECK(input.scalar_type() == grid.scalar_type(), "grid_sampler(): expected input and "
              "grid to have same dtype, but input has ", input.scalar_type(), " and grid has ",
              grid.scalar_type());
  TORCH_CHECK(at::isFloatingType(input.scalar_type()),
              "grid_sampler(): expected a floating point input, got ", input.scalar_type());
  TORCH_CHECK(interp >= 0 && interp <= 2 && padding >= 0 && padding <= 2,
              "grid_sampler(): unknown interpolation or padding mode");
  TORCH_CHECK(interp != kBicubic, op, ": bicubic interpolation is not supported on tpu yet");
}

Tensor GridSample(const Tensor& input, const Tensor& grid, int64_t interp, int64_t padding,
                  bool align_corners, int64_t nd) {
  CheckGrid(input, grid, interp, padding, nd);
  std::vector<int64_t> os{input.size(0), input.size(1)};
  for (int64_t i = 1; i <= nd; ++i) os.push_back(grid.size(i));
  if (c10::multiply_integers(os) == 0) return EmptyTpu(os, input.scalar_type());
  return Run1(kGridSampler, {{interp, padding, align_corners ? 1 : 0}, {}, {}},
              {OperandOf(input), OperandOf(grid)}, TypeOf(os, input.scalar_type()));
}

std::tuple<Tensor, Tensor> GridSampleBackward(const Tensor& grad, const Tensor& input,
                                              const Tensor& grid, int64_t interp, int64_t padding,
                                              bool align_corners, std::array<bool, 2> output_mask,
                                              int64_t nd) {
  CheckGrid(input, grid, interp, padding, nd);
  CheckTpu(nd == 2 ? "grid_sampler_2d_backward" : "grid_sampler_3d_backward", grad, "grad_output");
  Tensor gi, gg;
  if (grad.numel() == 0 || input.numel() == 0) {
    gi = at::zeros(input.sizes(), input.options());
    gg = at::zeros(grid.sizes(), grid.options());
  } else {
    auto r = Run(kGridSamplerGrad, {{interp, padding, align_corners ? 1 : 0}, {}, {}},
                 {OperandOf(grad), OperandOf(input), OperandOf(grid)},
                 {TypeOf(input.sizes(), input.scalar_type()), TypeOf(grid.sizes(), grid.scalar_type())});
    gi = r[0];
    gg = r[1];
  }
  return {output_mask[0] ? gi : Tensor(), output_mask[1] ? gg : Tensor()};
}

Tensor grid_sampler_2d_tpu(const Tensor& input, const Tensor& grid, int64_t interp,
                           int64_t padding, bool align_corners) {
  return GridSample(input, grid, interp, padding, align_corners, 2);
}
Tensor grid_sampler_3d_tpu(const Tensor& input, const Tensor& grid, int64_t interp,
                           int64_t padding, bool align_corners) {
  return GridSample(input, grid, interp, padding, align_corners, 3);
}
std::tuple<Tensor, Tensor> grid_sampler_2d_backward_tpu(const Tensor& grad, const Tensor& input,
                                                        const Tensor& grid, int64_t interp,
                                                        int64_t padding, bool align_corners,
                                                        std::array<bool, 2> output_mask) {
  return GridSampleBackward(grad, input, grid, interp, padding, align_corners, output_mask, 2);
}
std::tuple<Tensor, Tensor> grid_sampler_3d_backward_tpu(const Tensor& grad, const Tensor& input,
                                                        const Tensor& grid, int64_t interp,
                                                        int64_t padding, bool align_corners,
                                                        std::array<bool, 2> output_mask) {
  return GridSampleBackward(grad, input, grid, interp, padding, align_corners, output_mask, 3);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("grid_sampler_2d", TORCH_FN(grid_sampler_2d_tpu));
  m.impl("grid_sampler_2d_backward", TORCH_FN(grid_sampler_2d_backward_tpu));
  m.impl("grid_sampler_3d", TORCH_FN(grid_sampler_3d_tpu));
  m.impl("grid_sampler_3d_backward", TORCH_FN(grid_sampler_3d_backward_tpu));
}

}  // namespace tpu::ops
