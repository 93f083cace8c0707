// im2col (F.unfold) and col2im (F.fold), each the other's backward.
//
// For kernel offset (i, j), the column block is a strided slice of the
// padded input; im2col concatenates the kh*kw slices, col2im scatters each
// block back with an interior-padded stablehlo.pad and sums them.
#include <ATen/ops/col2im.h>
#include <ATen/ops/im2col.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/kernel_helpers.h"

namespace tpu::ops {

using ir::Dims;

namespace {

// ints = (kh, kw, dh, dw, ph, pw, sh, sw).
struct FoldParams {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};
FoldParams ParamsOf(const lazy::Attrs& a) {
  const auto& v = a.ints;
  return {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
}

// ins = (x [N, C, H, W]); out = [N, C*kh*kw, oh*ow].
VS LowerIm2col(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const FoldParams p = ParamsOf(a);
  const ir::TensorType t = b.type(in[0]);
  const int64_t n = t.dims[0], c = t.dims[1], h = t.dims[2], w = t.dims[3];
  const int64_t oh = (h + 2 * p.ph - (p.dh * (p.kh - 1) + 1)) / p.sh + 1;
  const int64_t ow = (w + 2 * p.pw - (p.dw * (p.kw - 1) + 1)) / p.sw + 1;
  Value x = ir::Pad(b, in[0], ir::ConstantI(b, 0, t.dtype), {0, 0, p.ph, p.pw},
                    {0, 0, p.ph, p.pw}, {0, 0, 0, 0});
  std::vector<Value> blocks;
  for (int64_t i = 0; i < p.kh; ++i) {
    for (int64_t j = 0; j < p.kw; ++j) {
      Value s = ir::Slice(b, x, {0, 0, i * p.dh, j * p.dw},
                          {n, c, i * p.dh + p.sh * (oh - 1) + 1, j * p.dw + p.sw * (ow - 1) + 1},
                          {1, 1, p.sh, p.sw});
      blocks.push_back(ir::Reshape(b, s, {n, c, 1, oh * ow}));
    }
  }
  return {ir::Reshape(b, ir::Concatenate(b, blocks, 2), out[0].dims)};
}
constexpr lazy::Lowering kIm2col{"aten::im2col", &LowerIm2col};

// ins = (cols [N, C*kh*kw, L]); out = [N, C, H, W].
VS LowerCol2im(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const FoldParams p = ParamsOf(a);
  const int64_t n = out[0].dims[0], c = out[0].dims[1], h = out[0].dims[2], w = out[0].dims[3];
  const int64_t oh = (h + 2 * p.ph - (p.dh * (p.kh - 1) + 1)) / p.sh + 1;
  const int64_t ow = (w + 2 * p.pw - (p.dw * (p.kw - 1) + 1)) / p.sw + 1;
  const DType ct = (out[0].dtype == DType::F16 || out[0].dtype == DType::BF16) ? DType::F32
                                                                               : out[0].dtype;
  const int64_t hp = h + 2 * p.ph, wp = w + 2 * p.pw;
  Value cols = ir::Reshape(b, ir::Convert(b, in[0], ct), {n, c, p.kh * p.kw, oh, ow});
  Value zero = ir::ConstantI(b, 0, ct);
  Value sum;
  for (int64_t i = 0; i < p.kh; ++i) {
    for (int64_t j = 0; j < p.kw; ++j) {
      const int64_t k = i * p.kw + j;
      Value blk = ir::Reshape(
          b, ir::Slice(b, cols, {0, 0, k, 0, 0}, {n, c, k + 1, oh, ow}, {1, 1, 1, 1, 1}),
          {n, c, oh, ow});
      const int64_t lo_h = i * p.dh, lo_w = j * p.dw;
      Value placed = ir::Pad(b, blk, zero, {0, 0, lo_h, lo_w},
                             {0, 0, hp - lo_h - p.sh * (oh - 1) - 1, wp - lo_w - p.sw * (ow - 1) - 1},
                             {0, 0, p.sh - 1, p.sw - 1});
      sum = sum.valid() ? ir::Binary(b, "stablehlo.add", sum, placed) : placed;
    }
  }
  sum = ir::Slice(b, sum, {0, 0, p.ph, p.pw}, {n, c, p.ph + h, p.pw + w}, {1, 1, 1, 1});
  return {ir::Convert(b, sum, out[0].dtype)};
}
constexpr lazy::Lowering kCol2im{"aten::col2im", &LowerCol2im};

lazy::Attrs FoldAttrs(at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p, at::IntArrayRef s) {
  return {{k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]}, {}, {}};
}

Tensor im2col_tpu(const Tensor& self, at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p,
                  at::IntArrayRef s) {
  CheckTpu("im2col", self, "self");
  Tensor meta = at::im2col(MetaOf(self), k, d, p, s);
  if (meta.numel() == 0) return EmptyTpu(meta.sizes(), self.scalar_type());
  Tensor x = self.dim() == 3 ? self.unsqueeze(0) : self;
  std::vector<int64_t> os{x.size(0), meta.size(-2), meta.size(-1)};
  Tensor r = Run1(kIm2col, FoldAttrs(k, d, p, s), {OperandOf(x)}, TypeOf(os, self.scalar_type()));
  return r.reshape(meta.sizes());
}

Tensor col2im_tpu(const Tensor& self, at::IntArrayRef output_size, at::IntArrayRef k,
                  at::IntArrayRef d, at::IntArrayRef p, at::IntArrayRef s) {
  CheckTpu("col2im", self, "self");
  Tensor meta = at::col2im(MetaOf(self), output_size, k, d, p, s);
  if (meta.numel() == 0) return EmptyTpu(meta.sizes(), self.scalar_type());
  Tensor x = self.dim() == 2 ? self.unsqueeze(0) : self;
  std::vector<int64_t> os{x.size(0), meta.size(-3), meta.size(-2), meta.size(-1)};
  Tensor r = Run1(kCol2im, FoldAttrs(k, d, p, s), {OperandOf(x)}, TypeOf(os, self.scalar_type()));
  return r.reshape(meta.sizes());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("im2col", TORCH_FN(im2col_tpu));
  m.impl("col2im", TORCH_FN(col2im_tpu));
}

}  // namespace tpu::ops
