// The bridge between ATen tensors and the lazy layer: what a kernel uses to
// turn its arguments into operands and its results into tpu tensors.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <initializer_list>
#include <vector>

#include "ir/ir.h"
#include "lazy/executor.h"
#include "lazy/lowering.h"
#include "lazy/node.h"

namespace tpu::ops {

ir::DType ToIr(at::ScalarType t);  // throws TypeError for unsupported dtypes
at::ScalarType ToAten(ir::DType t);
// A dtype as an Attrs integer.
inline int64_t IrCode(at::ScalarType t) { return static_cast<int64_t>(ToIr(t)); }
// The dtype an op on `t` values computes in when it computes in its input's
// dtype: itself, but complex64 for complex32 (only stored on tpu).
inline at::ScalarType ComputableType(at::ScalarType t) {
  return t == at::kComplexHalf ? at::kComplexFloat : t;
}
// PyTorch computes half, bfloat16 and float8 math in float32 ("opmath"),
// complex32 in complex64 (on tpu complex32 is only stored: ir::DType::C32).
inline at::ScalarType OpMathType(at::ScalarType t) {
  if (t == at::kComplexHalf) return at::kComplexFloat;
  return (t == at::kHalf || t == at::kBFloat16 || at::isFloat8Type(t)) ? at::kFloat : t;
}

lazy::StorageSlot* SlotOf(const at::Tensor& t);
// The operand for a tpu tensor, or for a 0-d CPU tensor (a wrapped scalar);
// a conjugate or negative view's bits are resolved first.
lazy::Operand OperandOf(const at::Tensor& t);
// The tpu tensor's storage as its view reads it, math bits ignored (what
// resolving those bits starts from).
lazy::Operand StorageOperandOf(const at::Tensor& t);
// A scalar as a 0-d device operand of `dtype`: its value is data, not part
// of the compiled program, so a changing learning rate does not recompile.
lazy::Operand ScalarOperand(const c10::Scalar& s, at::ScalarType dtype);

// A new tpu tensor (fresh, uninitialized storage).
at::Tensor EmptyTpu(at::IntArrayRef sizes, at::ScalarType dtype);
at::Tensor EmptyStridedTpu(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype);

ir::TensorType TypeOf(at::IntArrayRef sizes, at::ScalarType dtype);

// An op's operands, moved into the vector (a braced list copies each one,
// with its view's sizes and strides).
template <class... T>
std::vector<lazy::Operand> Operands(T&&... in) {
  std::vector<lazy::Operand> v;
  v.reserve(sizeof...(in));
  (v.push_back(std::forward<T>(in)), ...);
  return v;
}

// Runs `op` and returns its results as new contiguous tpu tensors.
std::vector<at::Tensor> Run(const lazy::Lowering& op, lazy::Attrs attrs,
                            std::vector<lazy::Operand> inputs,
                            const std::vector<ir::TensorType>& out_types);
at::Tensor Run1(const lazy::Lowering& op, lazy::Attrs attrs,
                std::vector<lazy::Operand> inputs, const ir::TensorType& out_type);
// Runs an elementwise op: its result takes the layout of the first of
// `like` that already has the result's sizes and a dense layout, permuted
// or not (channels-last, transposed), as TensorIterator lays out CPU and
// CUDA results; contiguous otherwise.
at::Tensor RunElementwise(const lazy::Lowering& op, lazy::Attrs attrs,
                          std::vector<lazy::Operand> inputs, const ir::TensorType& out_type,
                          std::initializer_list<const at::Tensor*> like);
// Runs `op` and writes its results into existing tpu tensors (in-place and
// out= variants); each value is converted to its destination's dtype.
void RunInto(const lazy::Lowering& op, lazy::Attrs attrs,
             std::vector<lazy::Operand> inputs,
             const std::vector<ir::TensorType>& out_types, const std::vector<at::Tensor>& dsts,
             bool allow_overlap = false);

// Resizes an out= argument as PyTorch does (warning when a non-empty tensor
// changes shape) and checks that `result_dtype` can be cast to it.
void PrepareOut(const char* op, const at::Tensor& out, at::IntArrayRef sizes,
                at::ScalarType result_dtype);

// Checks that `t` lives on tpu (or is a CPU scalar), naming the op.
void CheckTpu(const char* op, const at::Tensor& t, const char* arg);

}  // namespace tpu::ops
