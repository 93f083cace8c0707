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

// The storage as a flat array of view.dtype elements.
Value Flat(ir::Builder& b, Value base, ir::DType dtype) {
  const ir::TensorType& t = b.type(base);
  if (t.dtype != dtype) {
    if (ir::BitWidth(t.dtype) != ir::BitWidth(dtype))
      throw std::runtime_error(
          "tpu: reading a storage as a dtype of a different element size is not supported");
    base = b.Op1("stablehlo.bitcast_convert", {base}, ir::TensorType{dtype, t.dims});
  }
  return ir::Reshape(b, base, {t.numel()});
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
  } else {
    result = ir::Put(b, flat, Positions(b, v), update);
  }
  if (base_t.dtype != v.dtype)
    result = b.Op1("stablehlo.bitcast_convert", {result}, ir::TensorType{base_t.dtype, {n}});
  return result;
}

bool HasDynamicOffset(const ViewSpec& v, const ir::TensorType& base) {
  return base.dtype == v.dtype && v.numel() > 0 && v.is_contiguous() &&
         !CoversWhole(v, base.numel());
}

Value ReadViewAt(ir::Builder& b, Value base, const ViewSpec& v, Value offset) {
  Value flat = Flat(b, base, v.dtype);
  Value run = b.Op1("stablehlo.dynamic_slice", {flat, offset}, ir::TensorType{v.dtype, {v.numel()}},
                    {{"slice_sizes", ir::I64Array({v.numel()})}});
  return ir::Reshape(b, run, v.sizes);
}

Value WriteViewAt(ir::Builder& b, Value base, const ViewSpec& v, Value update, Value offset) {
  Value flat = Flat(b, base, v.dtype);
  Value upd = ir::Reshape(b, update, {v.numel()});
  return b.Op1("stablehlo.dynamic_update_slice", {flat, upd, offset}, b.type(flat));
}

}  // namespace tpu::lazy
