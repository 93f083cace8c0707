// A lowering turns an op's (already view-recreated) inputs into StableHLO.
//
// `fn` is a plain function pointer: a lambda that captures state cannot
// convert to it, so every argument that changes the emitted IR has to come
// through `Attrs`, which is part of the cache key. An incomplete key cannot
// be written.
#pragma once

#include <vector>

#include "ir/ir.h"
#include "lazy/node.h"

namespace tpu::lazy {

using LowerFn = std::vector<ir::Value> (*)(ir::Builder& b, const std::vector<ir::Value>& inputs,
                                           const Attrs& attrs,
                                           const std::vector<ir::TensorType>& out_types);

struct Lowering {
  const char* name;  // the ATen op, e.g. "aten::add.Tensor"; part of the key
  LowerFn fn;
};

}  // namespace tpu::lazy
