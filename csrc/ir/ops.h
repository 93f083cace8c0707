// Pure StableHLO builders: one small function per construct, shared by every
// lowering. No torch here; shapes are validated by the callers.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace tpu::ir {

using Dims = std::vector<int64_t>;

std::string I64Array(const Dims& v);  // "array<i64: 1, 2>"
std::string I64List(const Dims& v);   // "[1, 2]"

// Scalar constants, printed bit-exactly (floats as hex).
Value ConstantF(Builder& b, double v, DType t);   // 0-d
Value ConstantI(Builder& b, int64_t v, DType t);  // 0-d (PRED: v != 0)
// The 0-d constant whose value is the identity/extreme for a type.
Value MinValue(Builder& b, DType t);  // -inf for floats, lowest for ints
Value MaxValue(Builder& b, DType t);
// Constant of the given shape, broadcast from a 0-d constant.
Value Full(Builder& b, Value scalar, const Dims& dims);

Value Convert(Builder& b, Value x, DType to);
Value BroadcastInDim(Builder& b, Value x, const Dims& out_dims, const Dims& bcast_dims);
// NumPy-style broadcast of x (right-aligned) to out_dims; no-op if equal.
Value BroadcastTo(Builder& b, Value x, const Dims& out_dims);
Value Reshape(Builder& b, Value x, const Dims& dims);
Value Transpose(Builder& b, Value x, const Dims& perm);
Value Slice(Builder& b, Value x, const Dims& start, const Dims& limit, const Dims& strides);
Value Concatenate(Builder& b, const std::vector<Value>& xs, int64_t dim);
Value Pad(Builder& b, Value x, Value pad_value, const Dims& low, const Dims& high,
          const Dims& interior);
Value Iota(Builder& b, const Dims& dims, int64_t iota_dim, DType t);

Value Unary(Builder& b, const std::string& op, Value x);               // result type = x's
Value Binary(Builder& b, const std::string& op, Value x, Value y);     // same types in/out
// max/min that return NaN when either operand is NaN (as PyTorch), which
// stablehlo.maximum/minimum do not guarantee on every backend.
Value Max(Builder& b, Value x, Value y);
Value Min(Builder& b, Value x, Value y);
enum class Cmp { EQ, NE, LT, LE, GT, GE };
Value Compare(Builder& b, Value x, Value y, Cmp dir);                 // -> PRED
Value Select(Builder& b, Value pred, Value on_true, Value on_false);

// Reduction over `dims` with a binary body op ("stablehlo.add", ...); a
// maximum/minimum body propagates NaN as Max/Min do.
Value Reduce(Builder& b, Value x, Value init, const Dims& dims, const std::string& body_op);
// Variadic reduce of (values, indices) picking the max (or min) value and
// the first index of it, as torch.max(dim) does. NaN wins, as on CPU.
std::pair<Value, Value> ArgReduce(Builder& b, Value x, int64_t dim, bool is_max);

struct DotDims {
  Dims lhs_batch, rhs_batch, lhs_contract, rhs_contract;
};
// dot_general with result type `out`; `precision` is "" or one of
// DEFAULT/HIGH/HIGHEST; `algorithm` is "" or the MLIR text of a dot algorithm.
Value DotGeneral(Builder& b, Value lhs, Value rhs, const DotDims& dd, const TensorType& out,
                 const std::string& precision = "", const std::string& algorithm = "");

// f32 values rounded to the nearest bf16 (ties to even), kept in f32. Done
// with integer ops on the bits, so a compiler cannot turn a following f32
// dot into a (slower on some backends) mixed-precision bf16 dot.
Value RoundToBF16(Builder& b, Value x);

// Elements of the 1-d `flat` at the (integer) positions in `indices`,
// result shaped like `indices`.
Value Take(Builder& b, Value flat, Value indices);
// `flat` with the positions in `indices` replaced by `updates` (same shape
// as indices). Later duplicates win, as a sequential write would.
Value Put(Builder& b, Value flat, Value indices, Value updates);

}  // namespace tpu::ir

namespace tpu::ir {

// ---- shape, sort and index builders ----

Value Reverse(Builder& b, Value x, const Dims& dims);
// Sorts `xs` (same shape) along `dim`; `less` gets (lhs0, rhs0, lhs1, rhs1,
// ...) as 0-d values and returns a 0-d PRED.
std::vector<Value> Sort(Builder& b, const std::vector<Value>& xs, int64_t dim, bool stable,
                        const RegionFn& less);
// Inclusive prefix reduction along `dim` (cumsum with "stablehlo.add"), as a
// reduce_window whose window spans the whole dim, padded below with `init`.
Value CumReduce(Builder& b, Value x, Value init, int64_t dim, const std::string& body_op);

struct GatherDims {
  Dims offset_dims, collapsed_slice_dims, start_index_map;
  int64_t index_vector_dim = 0;
};
Value Gather(Builder& b, Value x, Value indices, const GatherDims& gd, const Dims& slice_sizes,
             const TensorType& out);
struct ScatterDims {
  Dims update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
};
// `body_op` combines the old and the new value ("stablehlo.add", ...); ""
// replaces (later duplicates win). maximum/minimum propagate NaN.
Value Scatter(Builder& b, Value x, Value indices, Value updates, const ScatterDims& sd,
              const std::string& body_op);

}  // namespace tpu::ir

namespace tpu::ir {

// ---- window and constant-array builders (pooling, padding, resampling) ----

struct Window {
  Dims dims, strides, dilations, pad_lo, pad_hi;  // one entry per operand dim
};
// stablehlo.reduce_window over one or more operands of the same shape, with
// one init value each; `body` gets (acc0, acc1, ..., x0, x1, ...) as 0-d values.
std::vector<Value> ReduceWindow(Builder& b, const std::vector<Value>& xs,
                                const std::vector<Value>& inits, const Window& w,
                                const RegionFn& body);
// 1-d constants from host values (integers as `t`, e.g. S64; floats printed
// so that they round-trip).
Value ConstantVectorI(Builder& b, const std::vector<int64_t>& v, DType t);
Value ConstantVectorF(Builder& b, const std::vector<double>& v, DType t);
// The element count of x over `dims`, shaped like Reduce(x, dims), in x's
// (float) dtype: a constant, or in a dynamic program (Builder::dynamic)
// counted from x itself, so that XLA's dynamic padder supplies the run-time
// sizes. (NaN elements are not counted; the sum they divide is NaN anyway.)
Value CountOver(Builder& b, Value x, const Dims& dims);
// x with static dimensions: a dynamic program's results must not carry
// dynamic sizes (PJRT would return bounded buffers), so each dimension is
// re-gathered by its iota; the padding holds unspecified values.
Value MakeStatic(Builder& b, Value x);
// x's slices at positions idx (1-d integer) along `dim`: the result has
// idx's length at `dim`.
Value TakeAlong(Builder& b, Value x, int64_t dim, Value idx);
// The transpose of TakeAlong: zeros of length `size` at `dim`, with the
// slices of `g` added at positions idx (duplicates accumulate).
Value ScatterAddAlong(Builder& b, Value g, int64_t dim, Value idx, int64_t size);

}  // namespace tpu::ir
