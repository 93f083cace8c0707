#include "aten/tensor_bridge.h"

#include "device/allocator.h"

#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/COW.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <c10/util/complex.h>

#include <cstring>

namespace tpu::ops {

ir::DType ToIr(at::ScalarType t) {
  switch (t) {
    case at::kBool: return ir::DType::PRED;
    case at::kChar: return ir::DType::S8;
    case at::kShort: return ir::DType::S16;
    case at::kInt: return ir::DType::S32;
    case at::kLong: return ir::DType::S64;
    case at::kByte: return ir::DType::U8;
    case at::kUInt16: return ir::DType::U16;
    case at::kUInt32: return ir::DType::U32;
    case at::kUInt64: return ir::DType::U64;
    case at::kHalf: return ir::DType::F16;
    case at::kBFloat16: return ir::DType::BF16;
    case at::kFloat: return ir::DType::F32;
    case at::kDouble: return ir::DType::F64;
    case at::kComplexFloat: return ir::DType::C64;
    case at::kComplexDouble: return ir::DType::C128;
    case at::kComplexHalf: return ir::DType::C32;
    case at::kFloat8_e5m2: return ir::DType::F8E5M2;
    case at::kFloat8_e4m3fn: return ir::DType::F8E4M3FN;
    case at::kFloat8_e5m2fnuz: return ir::DType::F8E5M2FNUZ;
    case at::kFloat8_e4m3fnuz: return ir::DType::F8E4M3FNUZ;
    default:
      TORCH_CHECK_TYPE(false, "tpu does not support dtype ", t);
  }
}

at::ScalarType ToAten(ir::DType t) {
  switch (t) {
    case ir::DType::PRED: return at::kBool;
    case ir::DType::S8: return at::kChar;
    case ir::DType::S16: return at::kShort;
    case ir::DType::S32: return at::kInt;
    case ir::DType::S64: return at::kLong;
    case ir::DType::U8: return at::kByte;
    case ir::DType::U16: return at::kUInt16;
    case ir::DType::U32: return at::kUInt32;
    case ir::DType::U64: return at::kUInt64;
    case ir::DType::F16: return at::kHalf;
    case ir::DType::BF16: return at::kBFloat16;
    case ir::DType::F32: return at::kFloat;
    case ir::DType::F64: return at::kDouble;
    case ir::DType::C64: return at::kComplexFloat;
    case ir::DType::C128: return at::kComplexDouble;
    case ir::DType::C32: return at::kComplexHalf;
    case ir::DType::F8E5M2: return at::kFloat8_e5m2;
    case ir::DType::F8E4M3FN: return at::kFloat8_e4m3fn;
    case ir::DType::F8E5M2FNUZ: return at::kFloat8_e5m2fnuz;
    case ir::DType::F8E4M3FNUZ: return at::kFloat8_e4m3fnuz;
  }
  return at::kFloat;
}

ir::TensorType TypeOf(at::IntArrayRef sizes, at::ScalarType dtype) {
  return ir::TensorType{ToIr(dtype), sizes.vec()};
}

namespace {

// The slot of t's storage and t's offset into it in elements: its storage
// offset, plus where the storage starts in the slot when the storage is a
// byte slice of another (UntypedStorage[start:end] offsets the pointer).
lazy::StorageSlot* SlotAndOffset(const at::Tensor& t, int64_t* offset, bool write) {
  *offset = t.storage_offset();
  // A copy-on-write storage (Tensor._lazy_clone) shares its slot with its
  // clones until written: a write materializes it (TpuAllocator::copy_data).
  if (write && c10::impl::cow::is_cow_data_ptr(t.storage().data_ptr()))
    t.unsafeGetTensorImpl()->unsafe_storage().mutable_data();
  const c10::DataPtr& p = t.storage().data_ptr();
  if (p.get() == nullptr) return nullptr;
  size_t bytes = 0;
  lazy::StorageSlot* slot = device::SlotAt(p, &bytes);
  TORCH_CHECK(slot != nullptr, "tpu: tensor data at ", p.get(),
              " is not in a live tpu storage (was its storage made from a foreign pointer?)");
  if (bytes != 0) {
    const size_t itemsize = t.element_size();
    TORCH_CHECK_NOT_IMPLEMENTED(bytes % itemsize == 0, "tpu: a ", t.scalar_type(),
                                " tensor on a byte slice of a tpu storage that starts at byte ",
                                bytes, ", not at a whole element; slice the tensor instead");
    *offset += static_cast<int64_t>(bytes / itemsize);
  }
  return slot;
}

}  // namespace

lazy::StorageSlot* SlotOf(const at::Tensor& t) {
  int64_t offset = 0;
  lazy::StorageSlot* slot = SlotAndOffset(t, &offset, /*write=*/true);
  TORCH_CHECK_NOT_IMPLEMENTED(
      offset == t.storage_offset(), "tpu: this op does not take a tensor on a byte slice of a "
      "tpu storage (UntypedStorage[start:end] with start > 0); slice the tensor instead");
  return slot;
}

void CheckTpu(const char* op, const at::Tensor& t, const char* arg) {
  if (t.device().type() == c10::DeviceType::PrivateUse1) return;
  if (t.device().is_cpu() && t.dim() == 0) return;
  // PyTorch's own wording (tests and users match it), then the op and the fix.
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two "
              "devices, tpu:0 and ", t.device(), "! (when checking argument for argument ", arg,
              " in method ", op, "; move it with .to('tpu'))");
}

lazy::Operand ScalarOperand(const c10::Scalar& s, at::ScalarType dtype) {
  alignas(8) unsigned char bits[16] = {0};
  switch (dtype) {
#define TPU_SCALAR_CASE(T, name)          \
  case at::ScalarType::name: {            \
    T v = s.to<T>();                      \
    std::memcpy(bits, &v, sizeof(T));     \
    break;                                \
  }
    TPU_SCALAR_CASE(bool, Bool)
    TPU_SCALAR_CASE(int8_t, Char)
    TPU_SCALAR_CASE(int16_t, Short)
    TPU_SCALAR_CASE(int32_t, Int)
    TPU_SCALAR_CASE(int64_t, Long)
    TPU_SCALAR_CASE(uint8_t, Byte)
    TPU_SCALAR_CASE(uint16_t, UInt16)
    TPU_SCALAR_CASE(uint32_t, UInt32)
    TPU_SCALAR_CASE(uint64_t, UInt64)
    TPU_SCALAR_CASE(c10::Half, Half)
    TPU_SCALAR_CASE(c10::BFloat16, BFloat16)
    TPU_SCALAR_CASE(float, Float)
    TPU_SCALAR_CASE(double, Double)
    TPU_SCALAR_CASE(c10::complex<float>, ComplexFloat)
    TPU_SCALAR_CASE(c10::complex<double>, ComplexDouble)
    TPU_SCALAR_CASE(c10::complex<c10::Half>, ComplexHalf)
#undef TPU_SCALAR_CASE
#define TPU_SCALAR_CASE(T, name)                      \
  case at::ScalarType::name: {                        \
    T v(static_cast<float>(s.to<double>()));          \
    std::memcpy(bits, &v, sizeof(T));                 \
    break;                                            \
  }
    TPU_SCALAR_CASE(c10::Float8_e5m2, Float8_e5m2)
    TPU_SCALAR_CASE(c10::Float8_e4m3fn, Float8_e4m3fn)
    TPU_SCALAR_CASE(c10::Float8_e5m2fnuz, Float8_e5m2fnuz)
    TPU_SCALAR_CASE(c10::Float8_e4m3fnuz, Float8_e4m3fnuz)
#undef TPU_SCALAR_CASE
    default:
      TORCH_CHECK_TYPE(false, "tpu does not support dtype ", dtype);
  }
  lazy::Operand o;
  o.node = lazy::Executor::Get().Scalar(bits, ToIr(dtype));
  o.view.dtype = ToIr(dtype);
  return o;
}

lazy::Operand OperandOf(const at::Tensor& t) {
  if (t.device().is_cpu()) {
    TORCH_CHECK(t.dim() == 0, "expected a tpu tensor but got a CPU tensor of shape ", t.sizes(),
                "; move it with .to('tpu')");
    return ScalarOperand(t.item(), t.scalar_type());
  }
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "expected a tpu tensor but got one on ", t.device());
  // A lazily conjugated or negated view (x.conj(), x.mH, x._neg_view())
  // reaching a kernel's inputs directly: its values, not its storage's.
  if (t.is_conj() || t.is_neg()) return StorageOperandOf(t.resolve_conj().resolve_neg());
  return StorageOperandOf(t);
}

lazy::Operand StorageOperandOf(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "expected a tpu tensor but got one on ", t.device());
  int64_t offset = 0;
  lazy::StorageSlot* slot = SlotAndOffset(t, &offset, /*write=*/false);
  TORCH_CHECK(slot != nullptr || t.numel() == 0, "tpu tensor without storage");
  const ir::DType dtype = ToIr(t.scalar_type());
  lazy::Operand o;
  o.view.sizes = t.sizes().vec();
  o.view.strides = t.strides().vec();
  o.view.offset = offset;
  o.view.dtype = dtype;
  if (slot == nullptr || slot->node == nullptr) {
    // Never written (torch.empty): PyTorch leaves it undefined; we read zeros.
    const size_t itemsize = t.element_size();
    const int64_t n = slot ? static_cast<int64_t>(slot->nbytes / itemsize) : 0;
    std::vector<unsigned char> zeros(static_cast<size_t>(n) * itemsize, 0);
    lazy::NodePtr node = lazy::Executor::Get().Upload(zeros.data(), dtype, {n});
    if (slot) slot->node = node;
    o.node = node;
    if (!slot) o.view = lazy::ViewSpec{t.sizes().vec(), t.strides().vec(), 0, dtype};
  } else {
    o.node = slot->node;
  }
  return o;
}

at::Tensor EmptyTpu(at::IntArrayRef sizes, at::ScalarType dtype) {
  return at::detail::empty_generic(sizes, c10::GetAllocator(c10::DeviceType::PrivateUse1),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype,
                                   std::nullopt);
}

at::Tensor EmptyStridedTpu(at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype) {
  return at::detail::empty_strided_generic(
      sizes, strides, c10::GetAllocator(c10::DeviceType::PrivateUse1),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
}

std::vector<at::Tensor> Run(const lazy::Lowering& op, lazy::Attrs attrs,
                            std::vector<lazy::Operand> inputs,
                            const std::vector<ir::TensorType>& out_types) {
  std::vector<lazy::OutputTarget> targets;
  targets.reserve(out_types.size());
  for (const auto& t : out_types) targets.push_back(lazy::OutputTarget{t, nullptr, {}});
  std::vector<lazy::NodePtr> nodes =
      lazy::Executor::Get().Run(op, std::move(attrs), std::move(inputs), std::move(targets));
  std::vector<at::Tensor> out;
  out.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    at::Tensor t = EmptyTpu(out_types[i].dims, ToAten(out_types[i].dtype));
    if (lazy::StorageSlot* slot = SlotOf(t)) slot->node = nodes[i];
    out.push_back(std::move(t));
  }
  return out;
}

at::Tensor Run1(const lazy::Lowering& op, lazy::Attrs attrs,
                std::vector<lazy::Operand> inputs, const ir::TensorType& out_type) {
  std::vector<lazy::OutputTarget> targets(1);
  targets[0].type = out_type;
  lazy::NodePtr node =
      lazy::Executor::Get().Run(op, std::move(attrs), std::move(inputs), std::move(targets))[0];
  at::Tensor t = EmptyTpu(out_type.dims, ToAten(out_type.dtype));
  if (lazy::StorageSlot* slot = SlotOf(t)) slot->node = std::move(node);
  return t;
}

at::Tensor RunElementwise(const lazy::Lowering& op, lazy::Attrs attrs,
                          std::vector<lazy::Operand> inputs, const ir::TensorType& out_type,
                          std::initializer_list<const at::Tensor*> like) {
  for (const at::Tensor* t : like) {
    if (t == nullptr || !t->defined() || t->device().type() != c10::DeviceType::PrivateUse1 ||
        t->sizes() != at::IntArrayRef(out_type.dims))
      continue;
    if (t->is_contiguous() || !t->is_non_overlapping_and_dense()) break;
    at::Tensor out = EmptyStridedTpu(t->sizes(), t->strides(), ToAten(out_type.dtype));
    RunInto(op, std::move(attrs), std::move(inputs), {out_type}, {out});
    return out;
  }
  return Run1(op, std::move(attrs), std::move(inputs), out_type);
}

void RunInto(const lazy::Lowering& op, lazy::Attrs attrs,
             std::vector<lazy::Operand> inputs,
             const std::vector<ir::TensorType>& out_types, const std::vector<at::Tensor>& dsts,
             bool allow_overlap) {
  bool any = false;
  for (const at::Tensor& d : dsts) any |= d.numel() > 0;
  if (!any) return;
  std::vector<lazy::OutputTarget> targets;
  for (size_t i = 0; i < dsts.size(); ++i) {
    const at::Tensor& d = dsts[i];
    TORCH_CHECK(d.device().type() == c10::DeviceType::PrivateUse1, op.name,
                ": expected the output on tpu but got ", d.device());
    if (!allow_overlap) at::assert_no_internal_overlap(d);
    lazy::OutputTarget t;
    t.type = out_types[i];
    int64_t offset = 0;
    t.slot = SlotAndOffset(d, &offset, /*write=*/true);
    t.view = lazy::ViewSpec{d.sizes().vec(), d.strides().vec(), offset, ToIr(d.scalar_type())};
    targets.push_back(std::move(t));
  }
  lazy::Executor::Get().Run(op, std::move(attrs), std::move(inputs), std::move(targets));
}

void PrepareOut(const char* op, const at::Tensor& out, at::IntArrayRef sizes,
                at::ScalarType result_dtype) {
  // The check of structured kernels' out= overloads, with their message.
  TORCH_CHECK(out.device().type() == c10::DeviceType::PrivateUse1, op,
              ": Expected out tensor to have device tpu:0, but got ", out.device(), " instead");
  TORCH_CHECK(c10::canCast(result_dtype, out.scalar_type()), op, ": result type ",
              result_dtype, " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, sizes);
}

}  // namespace tpu::ops
