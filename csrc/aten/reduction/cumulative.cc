// Cumulative sums and products (cumsum, cumprod) and their backward.
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/native_channel_shuffle.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/kernel_helpers.h"

namespace tpu::ops {

namespace {

// ---- cumsum, cumprod ----

// ints = (dim, accumulate dtype, is_prod)
VS LowerCum(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto acc = static_cast<DType>(a.ints[1]);
  Value x = ir::Reshape(b, ir::Convert(b, in[0], acc), out[0].dims.empty() ? ir::Dims{1} : out[0].dims);
  const bool prod = a.ints[2] != 0;
  Value r = ir::CumReduce(b, x, ir::ConstantI(b, prod ? 1 : 0, acc), a.ints[0],
                          prod ? "stablehlo.multiply" : "stablehlo.add");
  return {ir::Reshape(b, ir::Convert(b, r, out[0].dtype), out[0].dims)};
}
constexpr lazy::Lowering kCum{"aten::cumsum", &LowerCum};

Tensor CumRun(const char* name, bool prod, const Tensor& self, int64_t dim,
              std::optional<at::ScalarType> dtype, Tensor* dst, bool inplace) {
  CheckTpu(name, self, "self");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::ScalarType rt = dtype.has_value() ? *dtype
                      : at::isIntegralType(self.scalar_type(), true) ? at::kLong
                                                                     : self.scalar_type();
  if (dst && !dtype.has_value() && !inplace) rt = dst->scalar_type();
  if (inplace) rt = self.scalar_type();
  const lazy::Attrs attrs{{d, IrCode(OpMathType(rt)), prod}, {}, {}};
  const ir::TensorType tt = TypeOf(self.sizes(), rt);
  if (!dst) {
    if (self.numel() == 0) return EmptyTpu(self.sizes(), rt);
    return Run1(kCum, attrs, {OperandOf(self)}, tt);
  }
  if (!inplace) {
    TORCH_CHECK(!dtype.has_value() || *dtype == dst->scalar_type(), "Expected out tensor to have dtype ",
                *dtype, ", but got ", dst->scalar_type(), " instead");
    PrepareOut(name, *dst, self.sizes(), rt);
  }
  RunInto(kCum, attrs, {OperandOf(self)}, {tt}, {*dst});
  return *dst;
}
Tensor cumsum(const Tensor& s, int64_t dim, std::optional<at::ScalarType> dt) {
  return CumRun("cumsum", false, s, dim, dt, nullptr, false);
}
Tensor& cumsum_(Tensor& s, int64_t dim, std::optional<at::ScalarType> dt) {
  CumRun("cumsum", false, s, dim, dt, &s, true);
  return s;
}
Tensor& cumsum_out(const Tensor& s, int64_t dim, std::optional<at::ScalarType> dt, Tensor& o) {
  CumRun("cumsum", false, s, dim, dt, &o, false);
  return o;
}
Tensor cumprod(const Tensor& s, int64_t dim, std::optional<at::ScalarType> dt) {
  return CumRun("cumprod", true, s, dim, dt, nullptr, false);
}
Tensor& cumprod_(Tensor& s, int64_t dim, std::optional<at::ScalarType> dt) {
  CumRun("cumprod", true, s, dim, dt, &s, true);
  return s;
}
Tensor& cumprod_out(const Tensor& s, int64_t dim, std::optional<at::ScalarType> dt, Tensor& o) {
  CumRun("cumprod", true, s, dim, dt, &o, false);
  return o;
}

// channel_shuffle: PyTorch's own reshape/permute composite, which runs on
// tpu's view and copy kernels; a fresh tensor even where that composite
// would return the input's storage (groups == 1).
Tensor channel_shuffle_tpu(const Tensor& self, int64_t groups) {
  CheckTpu("channel_shuffle", self, "self");
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but "
              "got input with sizes ", self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive. Value of "
              "groups:", groups);
  TORCH_CHECK(self.size(1) % groups == 0, "Number of channels must be divisible by groups. Got ",
              self.size(1), " channels and ", groups, " groups.");
  Tensor r = at::native_channel_shuffle(self, groups);
  return r.is_alias_of(self) ? r.clone() : r;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("channel_shuffle", TORCH_FN(channel_shuffle_tpu));
  m.impl("cumsum", TORCH_FN(cumsum));
  m.impl("cumsum_", TORCH_FN(cumsum_));
  m.impl("cumsum.out", TORCH_FN(cumsum_out));
  m.impl("cumprod", TORCH_FN(cumprod));
  m.impl("cumprod_", TORCH_FN(cumprod_));
  m.impl("cumprod.out", TORCH_FN(cumprod_out));
}

}  // namespace tpu::ops
