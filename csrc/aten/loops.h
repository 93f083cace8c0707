// Control flow and dynamic slicing for lowerings that iterate (recurrences
// over time, Euclid's algorithm, polynomial recurrences, factorizations).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/ops.h"

namespace tpu::ops::loop {

using ir::Builder;
using ir::Value;
using VS = std::vector<Value>;

// stablehlo.while over the carried values `init`: `cond` gets the carried
// values and returns a 0-d PRED, `body` returns the next carried values.
// Everything the regions use is carried (the regions capture nothing).
inline VS While(Builder& b, const VS& init, const std::function<Value(Builder&, const VS&)>& cond,
                const std::function<VS(Builder&, const VS&)>& body) {
  std::vector<ir::TensorType> types;
  for (Value v : init) types.push_back(b.type(v));
  ir::Region c{types, [&](Builder& bb, const VS& a) { return VS{cond(bb, a)}; }};
  ir::Region d{types, [&](Builder& bb, const VS& a) { return body(bb, a); }};
  return b.Op("stablehlo.while", init, types, {}, {c, d});
}

// A counted loop: i runs from `from` to `to` - 1 (s64), `carried` threaded
// through `body(b, i, carried)`. Returns the final carried values.
inline VS For(Builder& b, int64_t from, int64_t to, const VS& carried,
              const std::function<VS(Builder&, Value, const VS&)>& body) {
  VS init{ir::ConstantI(b, from, ir::DType::S64)};
  init.insert(init.end(), carried.begin(), carried.end());
  VS r = While(
      b, init,
      [&](Builder& bb, const VS& a) {
        return ir::Compare(bb, a[0], ir::ConstantI(bb, to, ir::DType::S64), ir::Cmp::LT);
      },
      [&](Builder& bb, const VS& a) {
        VS rest(a.begin() + 1, a.end());
        VS next = body(bb, a[0], rest);
        VS out{ir::Binary(bb, "stablehlo.add", a[0], ir::ConstantI(bb, 1, ir::DType::S64))};
        out.insert(out.end(), next.begin(), next.end());
        return out;
      });
  return VS(r.begin() + 1, r.end());
}

// x[starts[0]:starts[0]+sizes[0], ...] with 0-d integer starts (clamped).
inline Value DynSlice(Builder& b, Value x, const VS& starts, const ir::Dims& sizes) {
  VS ops{x};
  ops.insert(ops.end(), starts.begin(), starts.end());
  return b.Op1("stablehlo.dynamic_slice", ops, ir::TensorType{b.type(x).dtype, sizes},
               {{"slice_sizes", ir::I64Array(sizes)}});
}

// x with `upd` written at the 0-d integer `starts`.
inline Value DynUpdate(Builder& b, Value x, Value upd, const VS& starts) {
  VS ops{x, upd};
  ops.insert(ops.end(), starts.begin(), starts.end());
  return b.Op1("stablehlo.dynamic_update_slice", ops, b.type(x));
}

// Zeros (s64) for the starts of the dimensions that are not sliced.
inline VS Starts(Builder& b, int64_t rank, int64_t dim, Value at) {
  VS s;
  for (int64_t i = 0; i < rank; ++i)
    s.push_back(i == dim ? ir::Convert(b, at, ir::DType::S64) : ir::ConstantI(b, 0, ir::DType::S64));
  return s;
}

}  // namespace tpu::ops::loop
