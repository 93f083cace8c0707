// Tensor creation, views, storage resizing, copies between host and device,
// and reading single values: the kernels every PrivateUse1 backend must have.
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ExpandUtils.h>
#include <ATen/InferSize.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/is_set_to_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "device/allocator.h"
#include "lazy/executor.h"
#include "lazy/views.h"
#include "aten/tensor_bridge.h"
#include "aten/indexing/index_checks.h"
#include "ir/ops.h"
#include "aten/kernel_helpers.h"

namespace tpu::device {

using at::Tensor;

namespace {

void CheckDevice(std::optional<c10::Device> device) {
  if (!device.has_value()) return;
  TORCH_CHECK(device->type() == c10::DeviceType::PrivateUse1, "expected a tpu device, got ",
              *device);
  if (device->has_index()) tpu::device::CheckDevice(device->index());
}

// With torch.use_deterministic_algorithms(True) and
// torch.utils.deterministic.fill_uninitialized_memory (the default), new
// memory holds NaN (floating and complex) or the largest value (integers),
// as on CPU and CUDA; otherwise it reads as zeros.
bool FillUninitialized() {
  const auto& ctx = at::globalContext();
  return ctx.deterministicAlgorithms() && ctx.deterministicFillUninitializedMemory();
}

Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                           std::optional<at::Layout> layout, std::optional<at::Device> device,
                           std::optional<bool> pin_memory,
                           std::optional<at::MemoryFormat> memory_format) {
  CheckDevice(device);
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided,
              "tpu supports only strided tensors, got layout ", *layout);
  const auto dt = dtype.value_or(at::get_default_dtype_as_scalartype());
  ops::ToIr(dt);  // rejects unsupported dtypes early
  Tensor t = at::detail::empty_generic(size, GetTpuAllocator(),
                                       c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dt,
                                       memory_format);
  if (FillUninitialized()) at::native::fill_empty_deterministic_(t);
  return t;
}

Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                     std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                     std::optional<at::Device> device, std::optional<bool> pin_memory) {
  CheckDevice(device);
  const auto dt = dtype.value_or(at::get_default_dtype_as_scalartype());
  ops::ToIr(dt);
  Tensor t = at::detail::empty_strided_generic(
      size, stride, GetTpuAllocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dt);
  if (FillUninitialized()) at::native::fill_empty_deterministic_(t);
  return t;
}

// New storage bytes: the old value is kept, the rest reads as zeros.
std::vector<ir::Value> LowerResizeStorage(ir::Builder& b, const std::vector<ir::Value>& in,
                                          const lazy::Attrs&,
                                          const std::vector<ir::TensorType>& out) {
  const ir::TensorType& t = b.type(in[0]);
  ir::Value flat = ir::Reshape(b, in[0], {t.numel()});
  const int64_t n = out[0].dims[0];
  if (n <= t.numel()) return {ir::Slice(b, flat, {0}, {n}, {1})};
  ir::Value zero = ir::ConstantI(b, 0, t.dtype);
  return {ir::Pad(b, flat, zero, {0}, {n - t.numel()}, {0})};
}
constexpr lazy::Lowering kResizeStorage{"tpu::resize_storage", &LowerResizeStorage};

// The storage's bytes read as another dtype (the executor's view read does
// the bitcast); see RetypeBytes.
std::vector<ir::Value> LowerRetypeStorage(ir::Builder&, const std::vector<ir::Value>& in,
                                          const lazy::Attrs&, const std::vector<ir::TensorType>&) {
  return {in[0]};
}
constexpr lazy::Lowering kRetypeStorage{"tpu::retype_storage", &LowerRetypeStorage};

// A storage made from untyped bytes (torch.load, UntypedStorage copies)
// holds a u8 buffer, and every program that reads a tensor of it as its own
// dtype would bitcast the bytes, and write them back as bytes: other
// programs than the ones that made the saved values, which XLA need not
// round the same way to the last bit (a resumed run then drifts from the
// uninterrupted one), and a bitcast in each. The first tensor set on such a
// storage turns its buffer into one of the tensor's dtype, once; the bytes
// are the same, and a tensor of another dtype on it still reads them as its
// own.
// The buffer takes the tensor's shape when the tensor is all of it (as an
// op's output would be), else it is flat.
void RetypeBytes(const Tensor& self, const c10::Storage& storage) {
  size_t at = 0;
  auto* slot = SlotAt(storage.data_ptr(), &at);
  if (slot == nullptr || at != 0 || !slot->node || slot->node->type().dtype != ir::DType::U8) return;
  const at::ScalarType dtype = self.scalar_type();
  if (dtype == at::kByte || dtype == at::kBool) return;
  const int64_t itemsize = static_cast<int64_t>(c10::elementSize(dtype));
  const int64_t nbytes = slot->node->type().numel();
  if (nbytes == 0 || nbytes % itemsize != 0) return;
  lazy::ViewSpec as;
  const bool whole = self.storage_offset() == 0 && self.is_contiguous() &&
                     self.numel() * itemsize == nbytes;
  as.sizes = whole ? self.sizes().vec() : std::vector<int64_t>{nbytes / itemsize};
  as.strides = lazy::WholeView(ir::TensorType{ir::DType::U8, as.sizes}).strides;
  as.dtype = ops::ToIr(dtype);
  lazy::Operand in{slot->node, as};
  lazy::OutputTarget out{ir::TensorType{as.dtype, as.sizes}, nullptr, {}};
  slot->node = lazy::Executor::Get().Run(kRetypeStorage, {}, {in}, {out})[0];
}

}  // namespace

void ResizeStorageBytes(const c10::Storage& storage, size_t newsize) {
  size_t at = 0;
  auto* old_slot = SlotAt(storage.data_ptr(), &at);
  c10::DataPtr fresh = GetTpuAllocator()->allocate(newsize);
  auto* slot = SlotAt(fresh, &at);
  if (old_slot && old_slot->node) {
    const lazy::NodePtr& node = old_slot->node;
    const size_t itemsize = node->nbytes() / std::max<int64_t>(node->type().numel(), 1);
    lazy::Operand in{node, lazy::WholeView(node->type())};
    const int64_t n = static_cast<int64_t>(newsize / std::max<size_t>(itemsize, 1));
    lazy::OutputTarget out{ir::TensorType{node->type().dtype, {n}}, nullptr, {}};
    slot->node = lazy::Executor::Get().Run(kResizeStorage, {}, {in}, {out})[0];
  }
  const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
  const_cast<c10::Storage&>(storage).set_nbytes(newsize);
}

namespace {

const Tensor& resize_(const Tensor& self, at::IntArrayRef size,
                      std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  const int64_t itemsize = self.element_size();
  if (self.sizes() == size && !memory_format.has_value()) return self;
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve,
                "Unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  const size_t needed = static_cast<size_t>(
      at::detail::computeStorageNbytes(self.sizes(), self.strides(), itemsize,
                                       self.storage_offset()));
  const size_t old_nbytes = self.storage().nbytes();
  if (needed > old_nbytes) {
    ResizeStorageBytes(self.storage(), needed);
    if (FillUninitialized())
      at::native::fill_resize_deterministic_(self, static_cast<int64_t>(old_nbytes));
  }
  return self;
}

// set_: point a tensor at (part of) a storage, as torch.load's rebuild and
// UntypedStorage.copy_ do. Only metadata changes; a storage too small for
// the new sizes grows, keeping its value.
Tensor& set_storage(Tensor& self, c10::Storage source, int64_t offset, at::IntArrayRef size,
                    at::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, offset, size, stride);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(offset);
  if (stride.data() != nullptr) {
    impl->set_sizes_and_strides(size, stride);
  } else {
    impl->set_sizes_contiguous(size);
  }
  const size_t needed = static_cast<size_t>(at::detail::computeStorageNbytes(
      self.sizes(), self.strides(), self.element_size(), offset));
  if (self.numel() > 0 && needed > self.storage().nbytes())
    ResizeStorageBytes(self.storage(), needed);
  RetypeBytes(self, self.storage());
  return self;
}

Tensor& set_storage_whole(Tensor& self, c10::Storage source) {
  const int64_t n = static_cast<int64_t>(source.nbytes() / self.element_size());
  return set_storage(self, std::move(source), 0, {n}, {});
}

Tensor& set_tensor(Tensor& self, const Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(),
                     source.strides());
}

Tensor& set_empty(Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, GetTpuAllocator(), true);
  return set_storage(self, std::move(empty), 0, {0}, {});
}

// Whether `param.data = new` may swap a tensor's implementation in place,
// as module.to() does for CPU <-> CUDA: strided tensors on CPU and tpu
// qualify, so parameters keep their identity (and class, e.g. a lazy
// module's UninitializedParameter) when moved.
bool has_compatible_shallow_copy_type(const Tensor& self, const Tensor& from) {
  auto dense = [](const Tensor& t) {
    return t.layout() == at::kStrided && !t.is_quantized() &&
           (t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1);
  };
  return dense(self) && dense(from);
}

// The value of a tensor whose conjugate / negative bit is set.
std::vector<ir::Value> LowerResolveBits(ir::Builder& b, const std::vector<ir::Value>& in,
                                        const lazy::Attrs& a, const std::vector<ir::TensorType>&) {
  const ir::DType stored = b.type(in[0]).dtype;
  // complex32 is computed in complex64
  ir::Value x = stored == ir::DType::C32 ? ir::Convert(b, in[0], ir::DType::C64) : in[0];
  const ir::TensorType t = b.type(x);
  if (a.ints[0] && ir::IsComplex(t.dtype)) {
    const ir::TensorType part{t.dtype == ir::DType::C64 ? ir::DType::F32 : ir::DType::F64, t.dims};
    ir::Value re = b.Op1("stablehlo.real", {x}, part);
    ir::Value im = ir::Unary(b, "stablehlo.negate", b.Op1("stablehlo.imag", {x}, part));
    x = b.Op1("stablehlo.complex", {re, im}, t);
  }
  if (a.ints[1]) x = ir::Unary(b, "stablehlo.negate", x);
  return {ir::Convert(b, x, stored)};
}
constexpr lazy::Lowering kResolveBits{"aten::resolve_conj", &LowerResolveBits};

// Copies between host and device, and within the device.
Tensor CopyFrom(const Tensor& src_in, const Tensor& dst, bool non_blocking) {
  const bool src_tpu = src_in.device().type() == c10::DeviceType::PrivateUse1;
  const bool dst_tpu = dst.device().type() == c10::DeviceType::PrivateUse1;
  if (dst.numel() == 0) return dst;
  // _copy_from falls through the Conjugate / Negative keys (see below), so
  // the lazy conjugate and negative bits are resolved here: the source's,
  // and a tpu destination's (x written into a negative view stores -x).
  const bool dst_conj = dst_tpu && dst.is_conj(), dst_neg = dst_tpu && dst.is_neg();
  Tensor src = src_in;
  if (src.is_conj() || src.is_neg() || dst_conj || dst_neg) {
    const bool conj = src.is_conj() != dst_conj, neg = src.is_neg() != dst_neg;
    if (src_tpu) {
      src = ops::Run1(kResolveBits, {{conj ? 1 : 0, neg ? 1 : 0}, {}, {}},
                      {ops::StorageOperandOf(src_in)}, ops::TypeOf(src.sizes(), src.scalar_type()));
    } else {
      src = src.resolve_conj().resolve_neg();
      if (dst_conj) src = src.conj_physical();
      if (dst_neg) src = src.neg();
    }
  }
  if (dst_tpu && !src_tpu) {
    TORCH_CHECK(src.device().is_cpu(), "copy_: cannot copy from ", src.device(), " to tpu");
    Tensor host = src;
    if (host.sizes() != dst.sizes()) host = host.expand(dst.sizes());
    if (!host.is_non_overlapping_and_dense()) host = host.contiguous();
    std::vector<int64_t> byte_strides;
    if (!host.is_contiguous()) {
      for (int64_t s : host.strides()) byte_strides.push_back(s * host.element_size());
    }
    lazy::NodePtr node = lazy::Executor::Get().Upload(
        host.data_ptr(), ops::ToIr(host.scalar_type()), host.sizes().vec(), byte_strides);
    lazy::StorageSlot* slot = ops::SlotOf(dst);
    const int64_t storage_numel = static_cast<int64_t>(slot->nbytes / dst.element_size());
    if (host.scalar_type() == dst.scalar_type() && dst.is_contiguous() &&
        dst.storage_offset() == 0 && dst.numel() == storage_numel) {
      slot->node = node;  // the uploaded buffer becomes the storage's value
      return dst;
    }
    lazy::Operand in{node, lazy::WholeView(node->type())};
    ops::RunInto(ops::kCopy, {}, {in}, {ops::TypeOf(dst.sizes(), dst.scalar_type())}, {dst});
    return dst;
  }
  if (src_tpu && !dst_tpu) {
    TORCH_CHECK(dst.device().is_cpu(), "copy_: cannot copy from tpu to ", dst.device());
    Tensor dense = src;
    lazy::Operand in = ops::OperandOf(src);
    if (!lazy::CoversWhole(in.view, in.node->type().numel()) ||
        in.node->type().dtype != in.view.dtype) {
      dense = ops::Run1(ops::kCopy, {}, {in}, ops::TypeOf(src.sizes(), src.scalar_type()));
      in = ops::OperandOf(dense);
    }
    Tensor host = dst;
    const bool direct = dst.is_contiguous() && dst.scalar_type() == src.scalar_type() &&
                        dst.sizes() == src.sizes() && !dst.is_conj() && !dst.is_neg();
    if (!direct) host = at::empty(src.sizes(), src.options().device(at::kCPU));
    lazy::Executor::Get().Download(in.node, host.data_ptr(), host.nbytes());
    // A host read is where device-side index checks surface (index_checks.h).
    ops::RaisePendingIndexErrors();
    if (!direct) dst.copy_(host);
    return dst;
  }
  TORCH_CHECK(src_tpu && dst_tpu, "copy_: unsupported devices ", src.device(), " -> ",
              dst.device());
  at::assert_no_partial_overlap(dst, src_in);
  ops::RunInto(ops::kCopy, {}, {ops::OperandOf(src)},
               {ops::TypeOf(dst.sizes(), dst.scalar_type())}, {dst});
  return dst;
}

Tensor _copy_from_and_resize(const Tensor& src, const Tensor& dst) {
  if (dst.sizes() != src.sizes()) dst.resize_(src.sizes());
  return CopyFrom(src, dst, false);
}

c10::Scalar _local_scalar_dense(const Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "_local_scalar_dense: Empty tensor not supported");
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  Tensor host = at::empty({}, self.options().device(at::kCPU));
  CopyFrom(self.reshape({}), host, false);
  return host.item();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("_copy_from", TORCH_FN(CopyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(_copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(_local_scalar_dense));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(set_storage_whole));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor));
  m.impl("is_set_to", TORCH_FN(at::native::is_set_to));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

// The conjugate / negative fallbacks would materialize _copy_from's input
// with clone(), which calls _copy_from again: CopyFrom resolves the bits.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}

}  // namespace tpu::device
