// _fft_r2c, _fft_c2r and _fft_c2c as stablehlo.fft, one transformed dim at
// a time (moved innermost, transformed, moved back). stablehlo's inverse
// transforms divide by n; PyTorch's normalization is applied separately, so
// that scaling is undone first.
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/constant_pad_nd.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"

namespace tpu::ops {

using ir::Dims;

namespace {

enum Norm : int64_t { kNone = 0, kByRootN = 1, kByN = 2 };

DType RealOf(DType t) { return t == DType::C128 ? DType::F64 : DType::F32; }

// Moves `dim` innermost, applies `type` of length n, moves it back; for
// IRFFT, `out_len` is the real length of that dim.
Value Fft1d(Builder& b, Value x, int64_t dim, const char* type, int64_t n, DType out_dtype,
            int64_t out_len) {
  const ir::TensorType t = b.type(x);
  const int64_t r = t.rank();
  Dims perm;
  for (int64_t i = 0; i < r; ++i)
    if (i != dim) perm.push_back(i);
  perm.push_back(dim);
  Value y = ir::Transpose(b, x, perm);
  Dims od = b.type(y).dims;
  od.back() = out_len;
  y = b.Op1("stablehlo.fft", {y}, ir::TensorType{out_dtype, od},
            {{"fft_type", std::string("#stablehlo<fft_type ") + type + ">"},
             {"fft_length", ir::I64Array({n})}});
  Dims inv(r);
  for (int64_t i = 0; i < r; ++i) inv[perm[i]] = i;
  return ir::Transpose(b, y, inv);
}

Value Scale(Builder& b, Value x, double s) {
  if (s == 1.0) return x;
  const ir::TensorType& t = b.type(x);
  return ir::Binary(b, "stablehlo.multiply", x, ir::Full(b, ir::ConstantF(b, s, t.dtype), t.dims));
}

double NormScale(int64_t norm, double n) {
  if (norm == kByRootN) return 1.0 / std::sqrt(n);
  if (norm == kByN) return 1.0 / n;
  return 1.0;
}

// ints = (normalization, forward, dims...): complex to complex.
VS LowerC2c(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const bool forward = a.ints[1] != 0;
  Value x = ir::Convert(b, in[0], out[0].dtype);
  double n = 1;
  for (size_t i = 2; i < a.ints.size(); ++i) {
    const int64_t d = a.ints[i], len = b.type(x).dims[d];
    n *= static_cast<double>(len);
    x = Fft1d(b, x, d, forward ? "FFT" : "IFFT", len, out[0].dtype, len);
  }
  return {Scale(b, x, (forward ? 1.0 : n) * NormScale(a.ints[0], n))};
}
constexpr lazy::Lowering kC2c{"aten::_fft_c2c", &LowerC2c};

// ints = (normalization, onesided, dims...): real to complex.
VS LowerR2c(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ct = out[0].dtype;
  Value x = ir::Convert(b, ir::Convert(b, in[0], RealOf(ct)), ct);
  double n = 1;
  for (size_t i = 2; i < a.ints.size(); ++i) {
    const int64_t d = a.ints[i], len = b.type(x).dims[d];
    n *= static_cast<double>(len);
    x = Fft1d(b, x, d, "FFT", len, ct, len);
  }
  const Dims& od = out[0].dims;
  x = ir::Slice(b, x, Dims(od.size(), 0), od, Dims(od.size(), 1));  // onesided: half the last dim
  return {Scale(b, x, NormScale(a.ints[0], n))};
}
constexpr lazy::Lowering kR2c{"aten::_fft_r2c", &LowerR2c};

// ints = (normalization, last_dim_size, dims...): complex (onesided) to real.
VS LowerC2r(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t last = a.ints[1];
  const DType ct = b.type(in[0]).dtype;
  Value x = in[0];
  double n = 1;
  const size_t nd = a.ints.size() - 2;
  for (size_t i = 0; i + 1 < nd; ++i) {
    const int64_t d = a.ints[2 + i], len = b.type(x).dims[d];
    n *= static_cast<double>(len);
    x = Fft1d(b, x, d, "IFFT", len, ct, len);
  }
  n *= static_cast<double>(last);
  x = Fft1d(b, x, a.ints.back(), "IRFFT", last, RealOf(ct), last);
  x = ir::Convert(b, Scale(b, x, n * NormScale(a.ints[0], n)), out[0].dtype);
  return {x};
}
constexpr lazy::Lowering kC2r{"aten::_fft_c2r", &LowerC2r};

std::vector<int64_t> WrapDims(const char* op, const Tensor& self, at::IntArrayRef dim) {
  std::vector<int64_t> d;
  for (int64_t v : dim) d.push_back(at::maybe_wrap_dim(v, self.dim()));
  for (size_t i = 0; i < d.size(); ++i)
    for (size_t j = i + 1; j < d.size(); ++j)
      TORCH_CHECK(d[i] != d[j], op, ": dims must be unique");
  return d;
}

at::ScalarType ComplexOf(at::ScalarType t) {
  return t == at::kDouble || t == at::kComplexDouble ? at::kComplexDouble : at::kComplexFloat;
}

Tensor fft_c2c_tpu(const Tensor& self, at::IntArrayRef dim, int64_t normalization, bool forward) {
  CheckTpu("_fft_c2c", self, "self");
  TORCH_CHECK(self.is_complex(), "_fft_c2c: expected a complex input tensor, but got ",
              self.scalar_type());
  auto d = WrapDims("_fft_c2c", self, dim);
  if (d.empty() || self.numel() == 0) return self.clone();
  std::vector<int64_t> ints{normalization, forward ? 1 : 0};
  ints.insert(ints.end(), d.begin(), d.end());
  return Run1(kC2c, {ints, {}, {}}, {OperandOf(self)}, TypeOf(self.sizes(), self.scalar_type()));
}

Tensor fft_r2c_tpu(const Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided) {
  CheckTpu("_fft_r2c", self, "self");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "_fft_r2c: expected a real floating point input tensor, but got ",
              self.scalar_type());
  auto d = WrapDims("_fft_r2c", self, dim);
  TORCH_CHECK(!d.empty(), "_fft_r2c: expected at least one dim");
  std::vector<int64_t> os = self.sizes().vec();
  if (onesided) os[d.back()] = os[d.back()] / 2 + 1;
  const auto rt = ComplexOf(self.scalar_type());
  if (self.numel() == 0) return EmptyTpu(os, rt);
  std::vector<int64_t> ints{normalization, onesided ? 1 : 0};
  ints.insert(ints.end(), d.begin(), d.end());
  return Run1(kR2c, {ints, {}, {}}, {OperandOf(self)}, TypeOf(os, rt));
}

Tensor fft_c2r_tpu(const Tensor& self, at::IntArrayRef dim, int64_t normalization,
                   int64_t last_dim_size) {
  CheckTpu("_fft_c2r", self, "self");
  TORCH_CHECK(self.is_complex(), "_fft_c2r: expected a complex input tensor, but got ",
              self.scalar_type());
  auto d = WrapDims("_fft_c2r", self, dim);
  TORCH_CHECK(!d.empty(), "_fft_c2r: expected at least one dim");
  TORCH_CHECK(last_dim_size >= 1, "Invalid number of data points (", last_dim_size,
              ") specified");
  std::vector<int64_t> os = self.sizes().vec();
  os[d.back()] = last_dim_size;
  const auto rt = self.scalar_type() == at::kComplexDouble ? at::kDouble : at::kFloat;
  if (self.numel() == 0) return EmptyTpu(os, rt);
  // The input's last transformed dim must hold last_dim_size / 2 + 1 values.
  Tensor x = self;
  const int64_t need = last_dim_size / 2 + 1, have = self.size(d.back());
  if (have > need) x = self.narrow(d.back(), 0, need);
  if (have < need) {
    std::vector<int64_t> pad(2 * self.dim(), 0);
    pad[2 * (self.dim() - 1 - d.back()) + 1] = need - have;
    x = at::constant_pad_nd(self, pad, 0);
  }
  std::vector<int64_t> ints{normalization, last_dim_size};
  ints.insert(ints.end(), d.begin(), d.end());
  return Run1(kC2r, {ints, {}, {}}, {OperandOf(x)}, TypeOf(os, rt));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fft_c2c", TORCH_FN(fft_c2c_tpu));
  m.impl("_fft_r2c", TORCH_FN(fft_r2c_tpu));
  m.impl("_fft_c2r", TORCH_FN(fft_c2r_tpu));
}

}  // namespace tpu::ops
