#include "lazy/views.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "ir/ops.h"

namespace tpu::lazy {

using ir::Dims;
using ir::Value;

int64_t ViewSpec::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool ViewSpec::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

ViewSpec WholeView(const ir::TensorType& t) {
  ViewSpec v;
  v.sizes = t.dims;
  v.strides.assign(t.dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(t.dims.size()) - 2; i >= 0; --i)
    v.strides[i] = v.strides[i + 1] * t.dims[i + 1];
  v.dtype = t.dtype;
  return v;
}

bool CoversWhole(const ViewSpec& view, int64_t storage_numel) {
  return view.offset == 0 && view.numel() == storage_numel && view.is_contiguous();
}

namespace {

// A flat array read as another dtype, byte for byte, as PyTorch's
// view(dtype) and storage reinterpretation do: [n] of `from` becomes
// [n * width(from) / width(to)] of `to` (rounded down: trailing bytes that
// do not fill an element are left out). Booleans are bytes; a complex
// element is its real and imaginary parts.
Value Reinterpret(ir::Builder& b, Value flat, ir::DType to) {
  using ir::DType;
  DType from = b.type(flat).dtype;
  if (from == to) return flat;
  if (from == DType::PRED) {
    flat = ir::Convert(b, flat, DType::U8);
    from = DType::U8;
    if (to == DType::U8) return flat;
  }
  if (to == DType::PRED) {
    Value u = Reinterpret(b, flat, DType::U8);
    return ir::Compare(b, u, ir::Full(b, ir::ConstantI(b, 0, DType::U8), b.type(u).dims),
                       ir::Cmp::NE);
  }
  if (ir::IsComplex(from)) {
    const DType part = from == DType::C64 ? DType::F32 : DType::F64;
    const int64_t n = b.type(flat).dims[0];
    Value re = ir::Reshape(b, b.Op1("stablehlo.real", {flat}, ir::TensorType{part, {n}}), {n, 1});
    Value im = ir::Reshape(b, b.Op1("stablehlo.imag", {flat}, ir::TensorType{part, {n}}), {n, 1});
    return Reinterpret(b, ir::Reshape(b, ir::Concatenate(b, {re, im}, 1), {2 * n}), to);
  }
  if (ir::IsComplex(to)) {
    const DType part = to == DType::C64 ? DType::F32 : DType::F64;
    Value parts = Reinterpret(b, flat, part);
    const int64_t m = b.type(parts).dims[0] / 2;
    parts = ir::Reshape(b, ir::Slice(b, parts, {0}, {2 * m}, {1}), {m, 2});
    Value re = ir::Reshape(b, ir::Slice(b, parts, {0, 0}, {m, 1}, {1, 1}), {m});
    Value im = ir::Reshape(b, ir::Slice(b, parts, {0, 1}, {m, 2}, {1, 1}), {m});
    return b.Op1("stablehlo.complex", {re, im}, ir::TensorType{to, {m}});
  }
  const int wf = ir::BitWidth(from), wt = ir::BitWidth(to);
  const int64_t n = b.type(flat).dims[0];
  if (wf == wt) return b.Op1("stablehlo.bitcast_convert", {flat}, ir::TensorType{to, {n}});
  if (wf > wt) {  // each element becomes k narrower ones (a trailing dim)
    const int64_t k = wf / wt;
    Value r = b.Op1("stablehlo.bitcast_convert", {flat}, ir::TensorType{to, {n, k}});
    return ir::Reshape(b, r, {n * k});
  }
  const int64_t k = wt / wf, m = n / k;  // k elements make one wider one
  Value r = ir::Reshape(b, ir::Slice(b, flat, {0}, {m * k}, {1}), {m, k});
  return b.Op1("stablehlo.bitcast_convert", {r}, ir::TensorType{to, {m}});
}

// The storage as a flat array of view.dtype elements.
Value Flat(ir::Builder& b, Value base, ir::DType dtype) {
  const ir::TensorType& t = b.type(base);
  return Reinterpret(b, ir::Reshape(b, base, {t.numel()}), dtype);
}

// Flat position of every element of the view, shaped like the view.
Value Positions(ir::Builder& b, const ViewSpec& v) {
  const ir::DType s64 = ir::DType::S64;
  Value pos = ir::Full(b, ir::ConstantI(b, v.offset, s64), v.sizes);
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d] == 1 || v.strides[d] == 0) continue;
    Value iota = ir::Iota(b, v.sizes, static_cast<int64_t>(d), s64);
    Value stride = ir::Full(b, ir::ConstantI(b, v.strides[d], s64), v.sizes);
    pos = ir::Binary(b, "stablehlo.add", pos, ir::Binary(b, "stablehlo.multiply", iota, stride));
  }
  return pos;
}

// Reads a view without a gather when its dims (sorted by stride) tile a
// row-major block: each stride a multiple of the next, without overlap.
bool ReadStridedBlock(ir::Builder& b, Value flat, const ViewSpec& v, Value* out) {
  std::vector<int64_t> real;  // dims with size > 1 and stride != 0
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] > 1 && v.strides[d] != 0) real.push_back(static_cast<int64_t>(d));
  for (int64_t d : real)
    if (v.strides[d] < 0) return false;
  std::stable_sort(real.begin(), real.end(),
                   [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });
  const size_t m = real.size();
  const int64_t n = b.type(flat).dims[0];
  Value block;
  Dims block_sizes;  // the real dims, in stride order
  if (m == 0) {
    if (v.offset >= n) return false;
    block = ir::Slice(b, flat, {v.offset}, {v.offset + 1}, {1});
  } else {
    Dims shape{v.sizes[real[0]]};
    for (size_t k = 0; k + 1 < m; ++k) {
      const int64_t dk = v.strides[real[k]], dn = v.strides[real[k + 1]];
      if (dk % dn != 0 || dk < dn * v.sizes[real[k + 1]]) return false;
      shape.push_back(dk / dn);
    }
    shape.push_back(v.strides[real[m - 1]]);
    const int64_t extent = v.sizes[real[0]] * v.strides[real[0]];
    Value src = flat;
    if (v.offset + extent > n) {  // the block's padding runs past the end
      Value zero = ir::ConstantI(b, 0, b.type(flat).dtype);
      src = ir::Pad(b, flat, zero, {0}, {v.offset + extent - n}, {0});
    }
    src = ir::Slice(b, src, {v.offset}, {v.offset + extent}, {1});
    src = ir::Reshape(b, src, shape);
    Dims start(shape.size(), 0), limit = shape, step(shape.size(), 1);
    for (size_t k = 1; k < m; ++k) limit[k] = v.sizes[real[k]];
    limit[m] = 1;
    src = ir::Slice(b, src, start, limit, step);
    for (int64_t d : real) block_sizes.push_back(v.sizes[d]);
    block = ir::Reshape(b, src, block_sizes);
    // Back from stride order to the view's dim order.
    std::vector<int64_t> order(real.begin(), real.end());
    std::sort(order.begin(), order.end());
    Dims perm;
    for (int64_t d : order)
      perm.push_back(std::find(real.begin(), real.end(), d) - real.begin());
    block = ir::Transpose(b, block, perm);
    real = order;
  }
  // Size-1 and broadcast (stride 0) dims.
  Dims bdims, kept;
  for (size_t i = 0; i < real.size(); ++i) {
    bdims.push_back(real[i]);
    kept.push_back(v.sizes[real[i]]);
  }
  block = ir::Reshape(b, block, kept);
  *out = ir::BroadcastInDim(b, block, v.sizes, bdims);
  return true;
}

// A view whose dims of size > 1 (positive strides, sorted by stride) tile
// a row-major block: each stride a multiple of the next, without overlap.
// The block is `shape` (the outermost size, each stride over the next, the
// innermost stride) and spans `extent` elements from the view's offset, of
// which the last `pad` lie past the view's last element (possibly past the
// storage's end). Reading or writing such a view slices the block out and
// takes or puts the view as a corner of it: no gather or scatter, which
// are many times slower on XLA CPU, and the offset can be a run-time value.
struct Block {
  std::vector<int64_t> real;   // the view's dims of size > 1, in its order
  std::vector<int64_t> order;  // the same dims by stride, largest first
  Dims shape;
  int64_t extent = 0, pad = 0;
};

bool PlanBlock(const ViewSpec& v, Block* blk) {
  Block p;
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d] <= 1) continue;
    if (v.strides[d] <= 0) return false;  // broadcast or reversed
    p.real.push_back(static_cast<int64_t>(d));
  }
  const size_t m = p.real.size();
  if (m == 0) return false;
  p.order = p.real;
  std::stable_sort(p.order.begin(), p.order.end(),
                   [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });
  p.shape = {v.sizes[p.order[0]]};
  int64_t span = 1;
  for (size_t k = 0; k < m; ++k) {
    const int64_t dk = v.strides[p.order[k]];
    span += (v.sizes[p.order[k]] - 1) * dk;
    if (k + 1 == m) break;
    const int64_t dn = v.strides[p.order[k + 1]];
    if (dk % dn != 0 || dk < dn * v.sizes[p.order[k + 1]]) return false;
    p.shape.push_back(dk / dn);
  }
  p.shape.push_back(v.strides[p.order[m - 1]]);
  p.extent = v.sizes[p.order[0]] * v.strides[p.order[0]];
  p.pad = p.extent - span;
  *blk = std::move(p);
  return true;
}

// The flat storage with the block's padding after it, and the block at
// `offset` (an s64 scalar) sliced out of it, shaped blk.shape.
Value PaddedFlat(ir::Builder& b, Value flat, const Block& blk) {
  if (blk.pad == 0) return flat;
  return ir::Pad(b, flat, ir::ConstantI(b, 0, b.type(flat).dtype), {0}, {blk.pad}, {0});
}
Value BlockAt(ir::Builder& b, Value padded, const Block& blk, Value offset) {
  const ir::DType t = b.type(padded).dtype;
  Value run = b.Op1("stablehlo.dynamic_slice", {padded, offset}, ir::TensorType{t, {blk.extent}},
                    {{"slice_sizes", ir::I64Array({blk.extent})}});
  return ir::Reshape(b, run, blk.shape);
}

Value ReadBlockAt(ir::Builder& b, Value flat, const ViewSpec& v, const Block& blk, Value offset) {
  Value block = BlockAt(b, PaddedFlat(b, flat, blk), blk, offset);
  Dims start(blk.shape.size(), 0), limit, step(blk.shape.size(), 1), by_stride;
  for (int64_t d : blk.order) by_stride.push_back(v.sizes[d]);
  limit = by_stride;
  limit.push_back(1);
  block = ir::Reshape(b, ir::Slice(b, block, start, limit, step), by_stride);
  Dims perm;  // back to the view's dim order
  for (int64_t d : blk.real)
    perm.push_back(std::find(blk.order.begin(), blk.order.end(), d) - blk.order.begin());
  return ir::Reshape(b, ir::Transpose(b, block, perm), v.sizes);
}

Value WriteBlockAt(ir::Builder& b, Value flat, const ViewSpec& v, const Block& blk, Value update,
                   Value offset) {
  const int64_t n = b.type(flat).dims[0];
  Dims in_view, by_stride, perm;
  for (int64_t d : blk.real) in_view.push_back(v.sizes[d]);
  for (int64_t d : blk.order) {
    by_stride.push_back(v.sizes[d]);
    perm.push_back(std::find(blk.real.begin(), blk.real.end(), d) - blk.real.begin());
  }
  Value upd = ir::Transpose(b, ir::Reshape(b, update, in_view), perm);
  by_stride.push_back(1);
  upd = ir::Reshape(b, upd, by_stride);
  Value padded = PaddedFlat(b, flat, blk);
  Value block = BlockAt(b, padded, blk, offset);
  std::vector<Value> args{block, upd};
  for (size_t i = 0; i < blk.shape.size(); ++i) args.push_back(ir::ConstantI(b, 0, ir::DType::S64));
  block = b.Op1("stablehlo.dynamic_update_slice", args, b.type(block));
  padded = b.Op1("stablehlo.dynamic_update_slice",
                 {padded, ir::Reshape(b, block, {blk.extent}), offset}, b.type(padded));
  return blk.pad == 0 ? padded : ir::Slice(b, padded, {0}, {n}, {1});
}

}  // namespace

Value ReadView(ir::Builder& b, Value base, const ViewSpec& v) {
  const ir::TensorType& t = b.type(base);
  if (t.dtype == v.dtype && CoversWhole(v, t.numel())) return ir::Reshape(b, base, v.sizes);
  Value flat = Flat(b, base, v.dtype);
  const int64_t numel = v.numel();
  if (numel == 0) return ir::Full(b, ir::ConstantI(b, 0, v.dtype), v.sizes);
  if (v.is_contiguous()) {
    return ir::Reshape(b, ir::Slice(b, flat, {v.offset}, {v.offset + numel}, {1}), v.sizes);
  }
  Value out;
  if (ReadStridedBlock(b, flat, v, &out)) return out;
  return ir::Take(b, flat, Positions(b, v));
}

Value WriteView(ir::Builder& b, Value base, const ViewSpec& v, Value update) {
  const ir::TensorType base_t = b.type(base);
  Value flat = Flat(b, base, v.dtype);
  const int64_t n = base_t.numel();
  const int64_t numel = v.numel();
  Value result;
  if (numel == 0) {
    result = flat;
  } else if (v.is_contiguous()) {
    // A contiguous run: dynamic_update_slice at a constant offset.
    Value upd = ir::Reshape(b, update, {numel});
    Value start = ir::ConstantI(b, v.offset, ir::DType::S64);
    result = b.Op1("stablehlo.dynamic_update_slice", {flat, upd, start}, b.type(flat));
  } else if (Block blk; PlanBlock(v, &blk)) {
    result = WriteBlockAt(b, flat, v, blk, update, ir::ConstantI(b, v.offset, ir::DType::S64));
  } else {
    result = ir::Put(b, flat, Positions(b, v), update);
  }
  if (base_t.dtype != v.dtype) {
    result = Reinterpret(b, result, base_t.dtype);
    const int64_t got = b.type(result).dims[0];
    if (got < n) {  // bytes past the last whole view element keep their value
      Value tail = ir::Slice(b, ir::Reshape(b, base, {n}), {got}, {n}, {1});
      result = ir::Concatenate(b, {result, tail}, 0);
    }
  }
  return result;
}

namespace {
// A complex view of a storage written through its real view (x.normal_()
// on a complex tensor) or the reverse: ReadViewAt reinterprets the whole
// storage, then slices at the run-time offset.
bool ComplexPair(ir::DType a, ir::DType b) {
  using ir::DType;
  return (a == DType::C64 && b == DType::F32) || (a == DType::F32 && b == DType::C64) ||
         (a == DType::C128 && b == DType::F64) || (a == DType::F64 && b == DType::C128);
}
}  // namespace

bool HasDynamicOffset(const ViewSpec& v, const ir::TensorType& base, bool blocks, bool read) {
  Block blk;
  const bool same = base.dtype == v.dtype || (read && ComplexPair(base.dtype, v.dtype));
  return same && v.numel() > 0 && !CoversWhole(v, base.numel()) &&
         (v.is_contiguous() || (blocks && PlanBlock(v, &blk)));
}

Value ReadViewAt(ir::Builder& b, Value base, const ViewSpec& v, Value offset) {
  Value flat = Flat(b, base, v.dtype);
  if (Block blk; !v.is_contiguous() && PlanBlock(v, &blk)) return ReadBlockAt(b, flat, v, blk, offset);
  Value run = b.Op1("stablehlo.dynamic_slice", {flat, offset}, ir::TensorType{v.dtype, {v.numel()}},
                    {{"slice_sizes", ir::I64Array({v.numel()})}});
  return ir::Reshape(b, run, v.sizes);
}

Value WriteViewAt(ir::Builder& b, Value base, const ViewSpec& v, Value update, Value offset) {
  Value flat = Flat(b, base, v.dtype);
  if (Block blk; !v.is_contiguous() && PlanBlock(v, &blk))
    return WriteBlockAt(b, flat, v, blk, update, offset);
  Value upd = ir::Reshape(b, update, {v.numel()});
  return b.Op1("stablehlo.dynamic_update_slice", {flat, upd, offset}, b.type(flat));
}

}  // namespace tpu::lazy
