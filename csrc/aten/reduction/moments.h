// Sums, means and row statistics that the normalization kernels and
// var/std lower with (mean, reciprocal standard deviation, the normalized
// rows and their backward).
#pragma once

#include <algorithm>

#include "aten/formula.h"
#include "ir/ops.h"

namespace tpu::ops {

// Sum of x over `dims`, broadcast back to x's shape when `keep`.
inline ir::Value SumOver(ir::Builder& b, ir::Value x, const ir::Dims& dims, bool keep) {
  const ir::TensorType t = b.type(x);
  ir::Value r = ir::Reduce(b, x, ir::ConstantI(b, 0, t.dtype), dims, "stablehlo.add");
  if (!keep) return r;
  ir::Dims kept;
  for (int64_t i = 0; i < t.rank(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) kept.push_back(i);
  return ir::BroadcastInDim(b, r, t.dims, kept);
}
inline ir::Value MeanOver(ir::Builder& b, ir::Value x, const ir::Dims& dims, bool keep) {
  const ir::TensorType t = b.type(x);
  ir::Value s = SumOver(b, x, dims, false);
  s = ir::Binary(b, "stablehlo.divide", s, ir::CountOver(b, x, dims));
  if (!keep) return s;
  ir::Dims kept;
  for (int64_t i = 0; i < t.rank(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) kept.push_back(i);
  return ir::BroadcastInDim(b, s, t.dims, kept);
}

// Row statistics of x [M, D]: mean and 1/sqrt(biased var + eps), each [M].
struct RowStats {
  ir::Value mean, rstd;
};
inline RowStats Stats(ir::Builder& b, ir::Value x, double eps) {
  ir::Value mean = MeanOver(b, x, {1}, false);
  const ir::Dims d = b.type(x).dims;
  ir::Value xc = Sub(b, x, ir::BroadcastInDim(b, mean, d, {0}));
  ir::Value var = MeanOver(b, Mul(b, xc, xc), {1}, false);
  return {mean, ir::Unary(b, "stablehlo.rsqrt", Add(b, var, C(b, eps, var)))};
}
// x̂ = (x - mean) * rstd for x [M, D] and per-row mean/rstd [M].
inline ir::Value Normalized(ir::Builder& b, ir::Value x, ir::Value mean, ir::Value rstd) {
  const ir::Dims d = b.type(x).dims;
  return Mul(b, Sub(b, x, ir::BroadcastInDim(b, mean, d, {0})), ir::BroadcastInDim(b, rstd, d, {0}));
}
// d/dx of x̂ for rows [M, D], given gw = dL/dx̂: rstd * (gw - mean(gw) -
// x̂ * mean(gw * x̂)).
inline ir::Value RowsBackward(ir::Builder& b, ir::Value gw, ir::Value xhat, ir::Value rstd) {
  const ir::Dims d = b.type(gw).dims;
  ir::Value t = Sub(b, Sub(b, gw, MeanOver(b, gw, {1}, true)),
                Mul(b, xhat, MeanOver(b, Mul(b, gw, xhat), {1}, true)));
  return Mul(b, t, ir::BroadcastInDim(b, rstd, d, {0}));
}

}  // namespace tpu::ops
