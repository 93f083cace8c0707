// Helpers that many ATen kernels share: running a lowering into new or
// existing tensors, meta tensors for PyTorch's own argument checks, index
// wrapping, tensor options on tpu and the copy lowering.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "aten/tensor_bridge.h"
#include "ir/ops.h"
#include "lazy/lowering.h"

namespace tpu::ops {

// The names every kernel file uses: ATen's tensor, the IR builder's
// types, and a lowering's value and type lists.
using at::Tensor;
using ir::Builder;
using ir::DType;
using ir::Value;
using VS = std::vector<Value>;
using TT = std::vector<ir::TensorType>;

// Whether an optional tensor argument is given (present and defined).
inline bool Has(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// The tpu device (index 0: one device per process).
inline const c10::Device kTpu(c10::DeviceType::PrivateUse1, 0);

// t on tpu: a CPU tensor (an index or mask given on the host) is copied
// there, a tpu tensor is returned as it is.
inline at::Tensor OnTpu(const at::Tensor& t) { return t.device().is_cpu() ? t.to(kTpu) : t; }

// Options for a new tpu tensor of dtype t.
c10::TensorOptions TpuOptions(at::ScalarType t);

// Writes r into the out= argument `out` (resized as PyTorch does, with its
// dtype checked), naming the op in errors.
at::Tensor& CopyInto(const char* op, const at::Tensor& r, at::Tensor& out);

// CPU's in-place indexing ops write a tensor with internal overlap (an
// expanded one) with a deprecation warning naming the op and an indexing
// example ("tensor[mask] = scalar"); true when `self` overlaps itself, to be
// passed on as RunInto's allow_overlap.
bool WarnIfExpandedWrite(const at::Tensor& self, const char* op, const char* example);

// A meta tensor with t's sizes, strides and dtype. Running an ATen op on
// meta arguments validates them with PyTorch's own checks and messages and
// gives the result's sizes and dtype without touching data. Only for ops
// whose meta kernel is C++: many are Python decompositions once
// torch._meta_registrations is loaded (about 0.1-2 ms a call, and they may
// raise other exception types than CPU does).
at::Tensor MetaOf(const at::Tensor& t);

// Runs `op`; output i goes into *dsts[i] when dsts[i] is non-null (in-place
// update of an existing tensor, e.g. batch norm's running stats) and into a
// new tensor otherwise. Returns the new tensors (undefined where written
// in place).
std::vector<at::Tensor> RunMixed(const lazy::Lowering& op, const lazy::Attrs& attrs,
                                 const std::vector<lazy::Operand>& inputs,
                                 const std::vector<ir::TensorType>& out_types,
                                 const std::vector<const at::Tensor*>& dsts);

// Integer indices with negative values wrapped by `size` (idx + size where
// idx < 0), converted to s64. Out-of-range values are not detected on the
// device (that would need a host sync); XLA clamps gather starts and drops
// scatter updates that fall outside.
ir::Value WrapIndex(ir::Builder& b, ir::Value idx, int64_t size);

// inputs[0] broadcast to out_types[0]'s dims and converted to its dtype.
std::vector<ir::Value> LowerCopy(ir::Builder& b, const std::vector<ir::Value>& in,
                                 const lazy::Attrs&, const std::vector<ir::TensorType>& out);
inline constexpr lazy::Lowering kCopy{"aten::copy_", &LowerCopy};

}  // namespace tpu::ops
