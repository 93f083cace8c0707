// Shorthand for lowerings written as formulas: arithmetic on values of one
// type and a float constant shaped like another value. (pointwise/binary.cc has
// its own Add/Mul that also handle booleans.)
#pragma once

#include "ir/ops.h"

namespace tpu::ops {

// The float constant v, with like's dtype and shape.
inline ir::Value C(ir::Builder& b, double v, ir::Value like) {
  const ir::TensorType& t = b.type(like);
  return ir::Full(b, ir::ConstantF(b, v, t.dtype), t.dims);
}
inline ir::Value Add(ir::Builder& b, ir::Value x, ir::Value y) { return ir::Binary(b, "stablehlo.add", x, y); }
inline ir::Value Sub(ir::Builder& b, ir::Value x, ir::Value y) { return ir::Binary(b, "stablehlo.subtract", x, y); }
inline ir::Value Mul(ir::Builder& b, ir::Value x, ir::Value y) { return ir::Binary(b, "stablehlo.multiply", x, y); }
inline ir::Value Div(ir::Builder& b, ir::Value x, ir::Value y) { return ir::Binary(b, "stablehlo.divide", x, y); }

}  // namespace tpu::ops
