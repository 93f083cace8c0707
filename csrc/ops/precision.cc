#include "ops/precision.h"

#include <ATen/Context.h>

namespace tpu::ops {

namespace {
thread_local int64_t t_override = -1;
}

void SetPrecisionOverride(int64_t mode) { t_override = mode; }
int64_t PrecisionOverride() { return t_override; }

Precision CurrentPrecision() {
  if (t_override >= 0) return static_cast<Precision>(t_override);
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: return Precision::kHighest;
    case at::Float32MatmulPrecision::HIGH: return Precision::kHigh;
    default: return Precision::kDefault;
  }
}

ir::Value PreciseDot(ir::Builder& b, ir::Value lhs, ir::Value rhs, const ir::DotDims& dd,
                     const ir::TensorType& out, Precision p) {
  using ir::DType;
  const DType in_t = b.type(lhs).dtype;
  const ir::TensorType acc{ir::IsFloat(in_t) && in_t != DType::F64 ? DType::F32 : out.dtype,
                           out.dims};
  ir::Value r;
  if (in_t != DType::F32 || p == Precision::kHighest) {
    r = ir::DotGeneral(b, lhs, rhs, dd, acc);
  } else {
    auto hi = [&](ir::Value x) { return ir::Convert(b, x, DType::BF16); };
    auto lo = [&](ir::Value x, ir::Value xh) {
      return hi(ir::Binary(b, "stablehlo.subtract", x, ir::Convert(b, xh, DType::F32)));
    };
    ir::Value lh = hi(lhs), rh = hi(rhs);
    r = ir::DotGeneral(b, lh, rh, dd, acc);
    if (p == Precision::kHigh) {
      ir::Value ll = lo(lhs, lh), rl = lo(rhs, rh);
      // Small terms first, as TPU's 3-pass does, then the big one.
      ir::Value small = ir::Binary(b, "stablehlo.add", ir::DotGeneral(b, lh, rl, dd, acc),
                                   ir::DotGeneral(b, ll, rh, dd, acc));
      r = ir::Binary(b, "stablehlo.add", small, r);
    }
  }
  return ir::Convert(b, r, out.dtype);
}

}  // namespace tpu::ops
