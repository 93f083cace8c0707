// hash_tensor (mode 0): XOR of the elements' 64-bit patterns over dims.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/zeros.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/tensor_bridge.h"
#include "aten/pointwise/complex.h"
#include "aten/kernel_helpers.h"
#include "aten/indexing/index_checks.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

namespace {

// ---- hash_tensor (mode 0): XOR of the elements' 64-bit patterns (floats
// as float64, integers as int64), over `dim` ----

// in = (x); ints = (reduced dims...); out = u64 with the reduced dims
// removed (keepdim is a reshape on the ATen side).
VS LowerHash(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::TensorType t = b.type(in[0]);
  const bool fl = ir::IsFloat(t.dtype);
  Value x = ir::Convert(b, in[0], fl ? DType::F64 : DType::S64);
  x = b.Op1("stablehlo.bitcast_convert", {x}, ir::TensorType{DType::U64, t.dims});
  ir::Dims dims(a.ints.begin(), a.ints.end());
  Value r = dims.empty() ? x : ir::Reduce(b, x, ir::ConstantI(b, 0, DType::U64), dims, "stablehlo.xor");
  return {ir::Reshape(b, r, out[0].dims)};
}
constexpr lazy::Lowering kHash{"aten::hash_tensor", &LowerHash};

Tensor hash_tensor_tpu(const Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode) {
  CheckTpu("hash_tensor", self, "self");
  TORCH_CHECK(mode == 0, "hash_tensor: only mode 0 (xor_sum) is supported, got ", mode);
  TORCH_CHECK(!self.is_complex(), "hash_tensor: complex inputs are not supported");
  if (dim.empty())
    TORCH_CHECK(self.numel() > 0, "hash_tensor: Expected reduction dim to be specified for "
                "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  const int64_t nd = std::max<int64_t>(self.dim(), 1);
  std::vector<bool> reduced(nd, true);
  if (!dim.empty()) {
    // ATen's own mask: its 64-dim limit and duplicate-dim messages.
    const auto bits = at::dim_list_to_bitset(dim, nd);
    for (int64_t i = 0; i < nd; ++i) {
      reduced[i] = bits[i];
      // As CPU: an empty slice has no hash (no identity is defined for it).
      TORCH_CHECK_INDEX(!bits[i] || self.dim() == 0 || self.size(i) != 0,
                        "hash_tensor(): Expected reduction dim ", i, " to have non-zero size.");
    }
  }
  std::vector<int64_t> dims, keep_shape, out_shape;
  for (int64_t i = 0; i < self.dim(); ++i) {
    if (reduced[i]) {
      dims.push_back(i);
      keep_shape.push_back(1);
    } else {
      keep_shape.push_back(self.size(i));
      out_shape.push_back(self.size(i));
    }
  }
  Tensor r;
  if (self.numel() == 0) {
    r = at::zeros(out_shape, TpuOptions(at::kUInt64));
  } else {
    r = Run1(kHash, {dims, {}, {}}, {OperandOf(self)}, TypeOf(out_shape, at::kUInt64));
  }
  return keepdim ? r.reshape(keep_shape) : r;
}
Tensor& hash_tensor_out_tpu(const Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode,
                            Tensor& out) {
  return CopyInto("hash_tensor", hash_tensor_tpu(self, dim, keepdim, mode), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("hash_tensor", TORCH_FN(hash_tensor_tpu));
  m.impl("hash_tensor.out", TORCH_FN(hash_tensor_out_tpu));
}

}  // namespace tpu::ops
