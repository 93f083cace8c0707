// grid_sampler_2d (bilinear and nearest; zeros, border and reflection
// padding; both align_corners) and its backward.
//
// The grid's coordinates are mapped to input pixel positions elementwise,
// exactly as CPU's GridSampler.h does (with the derivative of the mapping
// for the grid's gradient). The up to four corner pixels are gathered from
// the input laid out as [N, H*W, C]; corners outside the input weigh 0. The
// input gradient is a scatter-add of the weighted output gradient at the same
// corners.
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <array>

#include "ir/ops.h"
#include "ops/bridge.h"

namespace tpu::ops {

using at::Tensor;
using ir::Builder;
using ir::Dims;
using ir::DType;
using ir::Value;
using VS = std::vector<Value>;
using TT = std::vector<ir::TensorType>;

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
  Value index;   // [N, P, 2] (n, y*W + x), clamped into range
  Value weight;  // [N, P], 0 when outside the input
  Value dwx, dwy;  // d weight / d ix, d iy (bilinear)
};

// ins = (input [N, C, H, W], grid [N, Ho, Wo, 2]); ints = (interp, padding,
// align). Returns the corners for the grid.
std::vector<Corner> Corners(Builder& b, Value grid, const Dims& in_dims, const lazy::Attrs& a,
                            DType ct, Value* dix_out, Value* diy_out) {
  const int64_t n = in_dims[0], h = in_dims[2], w = in_dims[3];
  const Dims gd = b.type(grid).dims;
  const int64_t p = gd[1] * gd[2];
  Ctx k{b, {n, p}, ct};
  Value g = ir::Reshape(b, ir::Convert(b, grid, ct), {n, p, 2});
  Value gx = ir::Reshape(b, ir::Slice(b, g, {0, 0, 0}, {n, p, 1}, {1, 1, 1}), {n, p});
  Value gy = ir::Reshape(b, ir::Slice(b, g, {0, 0, 1}, {n, p, 2}, {1, 1, 1}), {n, p});
  auto [ix, dix] = SourceIndex(k, gx, w, a.ints[1], a.ints[2] != 0);
  auto [iy, diy] = SourceIndex(k, gy, h, a.ints[1], a.ints[2] != 0);
  *dix_out = dix;
  *diy_out = diy;
  Value batch = ir::Iota(b, {n, p}, 0, DType::S64);
  auto corner = [&](Value cx, Value cy, Value wgt, Value dwx, Value dwy) {
    Value inx = ir::Binary(b, "stablehlo.and", k.cmp(cx, k.c(0), ir::Cmp::GE),
                           k.cmp(cx, k.c(static_cast<double>(w - 1)), ir::Cmp::LE));
    Value iny = ir::Binary(b, "stablehlo.and", k.cmp(cy, k.c(0), ir::Cmp::GE),
                           k.cmp(cy, k.c(static_cast<double>(h - 1)), ir::Cmp::LE));
    Value in = ir::Binary(b, "stablehlo.and", inx, iny);
    Value xi = ir::Convert(b, ir::Min(b, k.c(w - 1.0), ir::Max(b, cx, k.c(0))), DType::S64);
    Value yi = ir::Convert(b, ir::Min(b, k.c(h - 1.0), ir::Max(b, cy, k.c(0))), DType::S64);
    Value flat = ir::Binary(b, "stablehlo.add",
                            ir::Binary(b, "stablehlo.multiply", yi,
                                       ir::Full(b, ir::ConstantI(b, w, DType::S64), {n, p})),
                            xi);
    Value idx = ir::Concatenate(b, {ir::Reshape(b, batch, {n, p, 1}), ir::Reshape(b, flat, {n, p, 1})},
                                2);
    Value zero = k.c(0);
    return Corner{idx, k.sel(in, wgt, zero), dwx.valid() ? k.sel(in, dwx, zero) : dwx,
                  dwy.valid() ? k.sel(in, dwy, zero) : dwy};
  };
  if (a.ints[0] == kNearest) {
    Value rx = ir::Unary(b, "stablehlo.round_nearest_even", ix);
    Value ry = ir::Unary(b, "stablehlo.round_nearest_even", iy);
    return {corner(rx, ry, k.c(1), Value{}, Value{})};
  }
  Value x0 = k.floor(ix), y0 = k.floor(iy);
  Value x1 = k.add(x0, k.c(1)), y1 = k.add(y0, k.c(1));
  Value ex1 = k.sub(x1, ix), ex0 = k.sub(ix, x0);  // distances to the corners
  Value ey1 = k.sub(y1, iy), ey0 = k.sub(iy, y0);
  auto neg = [&](Value v) { return ir::Unary(b, "stablehlo.negate", v); };
  return {corner(x0, y0, k.mul(ex1, ey1), neg(ey1), neg(ex1)),
          corner(x1, y0, k.mul(ex0, ey1), ey1, neg(ex0)),
          corner(x0, y1, k.mul(ex1, ey0), neg(ey0), ex1),
          corner(x1, y1, k.mul(ex0, ey0), ey0, ex0)};
}

ir::GatherDims PixelGather() {
  ir::GatherDims gd;
  gd.offset_dims = {2};
  gd.collapsed_slice_dims = {0, 1};
  gd.start_index_map = {0, 1};
  gd.index_vector_dim = 2;
  return gd;
}

// input [N, C, H, W] -> [N, H*W, C]
Value PixelsLast(Builder& b, Value x) {
  const Dims d = b.type(x).dims;
  return ir::Reshape(b, ir::Transpose(b, x, {0, 2, 3, 1}), {d[0], d[2] * d[3], d[1]});
}

VS LowerGridSampler(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ct = out[0].dtype == DType::F64 ? DType::F64 : DType::F32;
  const Dims id = b.type(in[0]).dims;
  const int64_t n = id[0], c = id[1];
  const Dims od = out[0].dims;  // [N, C, Ho, Wo]
  const int64_t p = od[2] * od[3];
  Value dix, diy;
  auto corners = Corners(b, in[1], id, a, ct, &dix, &diy);
  Value src = PixelsLast(b, ir::Convert(b, in[0], ct));
  Value acc;
  for (const Corner& k : corners) {
    Value v = ir::Gather(b, src, k.index, PixelGather(), {1, 1, c}, ir::TensorType{ct, {n, p, c}});
    Value t = ir::Binary(b, "stablehlo.multiply", v, ir::BroadcastInDim(b, k.weight, {n, p, c}, {0, 1}));
    acc = acc.valid() ? ir::Binary(b, "stablehlo.add", acc, t) : t;
  }
  Value r = ir::Transpose(b, ir::Reshape(b, acc, {n, od[2], od[3], c}), {0, 3, 1, 2});
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kGridSampler{"aten::grid_sampler_2d", &LowerGridSampler};

// ins = (grad [N, C, Ho, Wo], input, grid); out = (grad_input, grad_grid).
VS LowerGridSamplerGrad(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ct = out[0].dtype == DType::F64 ? DType::F64 : DType::F32;
  const Dims id = out[0].dims;
  const int64_t n = id[0], c = id[1], h = id[2], w = id[3];
  const Dims gdim = b.type(in[0]).dims;
  const int64_t p = gdim[2] * gdim[3];
  Value dix, diy;
  auto corners = Corners(b, in[2], id, a, ct, &dix, &diy);
  Value g = ir::Reshape(b, ir::Transpose(b, ir::Convert(b, in[0], ct), {0, 2, 3, 1}), {n, p, c});
  Value src = PixelsLast(b, ir::Convert(b, in[1], ct));
  Value gin = ir::Full(b, ir::ConstantI(b, 0, ct), {n, h * w, c});
  ir::ScatterDims sd;
  sd.update_window_dims = {2};
  sd.inserted_window_dims = {0, 1};
  sd.scatter_dims_to_operand_dims = {0, 1};
  sd.index_vector_dim = 2;
  Value gx, gy;
  for (const Corner& k : corners) {
    Value upd = ir::Binary(b, "stablehlo.multiply", g, ir::BroadcastInDim(b, k.weight, {n, p, c}, {0, 1}));
    gin = ir::Scatter(b, gin, k.index, upd, sd, "stablehlo.add");
    if (!k.dwx.valid()) continue;
    Value v = ir::Gather(b, src, k.index, PixelGather(), {1, 1, c}, ir::TensorType{ct, {n, p, c}});
    Value s = ir::Reduce(b, ir::Binary(b, "stablehlo.multiply", v, g), ir::ConstantI(b, 0, ct), {2},
                         "stablehlo.add");  // [N, P]
    Value tx = ir::Binary(b, "stablehlo.multiply", k.dwx, s);
    Value ty = ir::Binary(b, "stablehlo.multiply", k.dwy, s);
    gx = gx.valid() ? ir::Binary(b, "stablehlo.add", gx, tx) : tx;
    gy = gy.valid() ? ir::Binary(b, "stablehlo.add", gy, ty) : ty;
  }
  Value ggrid;
  if (gx.valid()) {
    gx = ir::Binary(b, "stablehlo.multiply", gx, dix);
    gy = ir::Binary(b, "stablehlo.multiply", gy, diy);
    ggrid = ir::Concatenate(b, {ir::Reshape(b, gx, {n, p, 1}), ir::Reshape(b, gy, {n, p, 1})}, 2);
  } else {
    ggrid = ir::Full(b, ir::ConstantI(b, 0, ct), {n, p, 2});
  }
  Value gi = ir::Transpose(b, ir::Reshape(b, gin, {n, h, w, c}), {0, 3, 1, 2});
  return {ir::Convert(b, gi, out[0].dtype),
          ir::Convert(b, ir::Reshape(b, ggrid, out[1].dims), out[1].dtype)};
}
constexpr lazy::Lowering kGridSamplerGrad{"aten::grid_sampler_2d_backward", &LowerGridSamplerGrad};

void CheckGrid(const Tensor& input, const Tensor& grid, int64_t interp, int64_t padding) {
  const char* op = "grid_sampler_2d";
  CheckTpu(op, input, "input");
  CheckTpu(op, grid, "grid");
  TORCH_CHECK(input.dim() == 4 && grid.dim() == 4, "grid_sampler(): expected 4D input and grid "
              "with same number of dimensions, but got input with sizes ", input.sizes(),
              " and grid with sizes ", grid.sizes());
  TORCH_CHECK(input.size(0) == grid.size(0), "grid_sampler(): expected grid and input to have "
              "same batch size, but got input with sizes ", input.sizes(),
              " and grid with sizes ", grid.sizes());
  TORCH_CHECK(grid.size(-1) == 2, "grid_sampler(): expected grid to have size 2 in last "
              "dimension, but got grid with sizes ", grid.sizes());
  TORCH_CHECK(input.scalar_type() == grid.scalar_type(), "grid_sampler(): expected input and "
              "grid to have same dtype, but input has ", input.scalar_type(), " and grid has ",
              grid.scalar_type());
  TORCH_CHECK(at::isFloatingType(input.scalar_type()),
              "grid_sampler(): expected a floating point input, got ", input.scalar_type());
  TORCH_CHECK(interp >= 0 && interp <= 2 && padding >= 0 && padding <= 2,
              "grid_sampler(): unknown interpolation or padding mode");
  TORCH_CHECK(interp != kBicubic,
              "grid_sampler_2d: bicubic interpolation is not supported on tpu yet");
}

Tensor grid_sampler_2d_tpu(const Tensor& input, const Tensor& grid, int64_t interp,
                           int64_t padding, bool align_corners) {
  CheckGrid(input, grid, interp, padding);
  std::vector<int64_t> os{input.size(0), input.size(1), grid.size(1), grid.size(2)};
  if (c10::multiply_integers(os) == 0) return EmptyTpu(os, input.scalar_type());
  if (input.size(2) == 0 || input.size(3) == 0)
    return at::zeros(os, input.options());
  return Run1(kGridSampler, {{interp, padding, align_corners ? 1 : 0}, {}, {}},
              {OperandOf(input), OperandOf(grid)}, TypeOf(os, input.scalar_type()));
}

std::tuple<Tensor, Tensor> grid_sampler_2d_backward_tpu(const Tensor& grad, const Tensor& input,
                                                        const Tensor& grid, int64_t interp,
                                                        int64_t padding, bool align_corners,
                                                        std::array<bool, 2> output_mask) {
  CheckGrid(input, grid, interp, padding);
  CheckTpu("grid_sampler_2d_backward", grad, "grad_output");
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("grid_sampler_2d", TORCH_FN(grid_sampler_2d_tpu));
  m.impl("grid_sampler_2d_backward", TORCH_FN(grid_sampler_2d_backward_tpu));
}

}  // namespace tpu::ops
