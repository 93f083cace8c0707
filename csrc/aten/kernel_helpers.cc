#include "aten/kernel_helpers.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty_strided.h>

#include "lazy/executor.h"

namespace tpu::ops {

c10::TensorOptions TpuOptions(at::ScalarType t) {
  return c10::TensorOptions().dtype(t).device(c10::Device(c10::DeviceType::PrivateUse1));
}

at::Tensor& CopyInto(const char* op, const at::Tensor& r, at::Tensor& out) {
  PrepareOut(op, out, r.sizes(), r.scalar_type());
  out.copy_(r);
  return out;
}

bool WarnIfExpandedWrite(const at::Tensor& self, const char* op, const char* example) {
  if (at::has_internal_overlap(self) != at::MemOverlap::Yes) return false;
  TORCH_WARN("Use of ", op, " on expanded tensors is deprecated. Please clone() the tensor "
             "before performing this operation. This also applies to advanced indexing e.g. ",
             example);
  return true;
}

at::Tensor MetaOf(const at::Tensor& t) {
  if (!t.defined()) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

std::vector<at::Tensor> RunMixed(const lazy::Lowering& op, const lazy::Attrs& attrs,
                                 const std::vector<lazy::Operand>& inputs,
                                 const std::vector<ir::TensorType>& out_types,
                                 const std::vector<const at::Tensor*>& dsts) {
  std::vector<lazy::OutputTarget> targets;
  for (size_t i = 0; i < out_types.size(); ++i) {
    lazy::OutputTarget t{out_types[i], nullptr, {}};
    if (const at::Tensor* d = dsts[i]) {
      TORCH_CHECK(d->device().type() == c10::DeviceType::PrivateUse1, op.name,
                  ": expected the output on tpu but got ", d->device());
      t.slot = SlotOf(*d);
      t.view = lazy::ViewSpec{d->sizes().vec(), d->strides().vec(), d->storage_offset(),
                              ToIr(d->scalar_type())};
    }
    targets.push_back(std::move(t));
  }
  std::vector<lazy::NodePtr> nodes = lazy::Executor::Get().Run(op, attrs, inputs, targets);
  std::vector<at::Tensor> out(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (dsts[i]) continue;
    out[i] = EmptyTpu(out_types[i].dims, ToAten(out_types[i].dtype));
    if (lazy::StorageSlot* slot = SlotOf(out[i])) slot->node = nodes[i];
  }
  return out;
}

ir::Value WrapIndex(ir::Builder& b, ir::Value idx, int64_t size) {
  idx = ir::Convert(b, idx, ir::DType::S64);
  const ir::TensorType t = b.type(idx);
  ir::Value zero = ir::Full(b, ir::ConstantI(b, 0, ir::DType::S64), t.dims);
  ir::Value n = ir::Full(b, ir::ConstantI(b, size, ir::DType::S64), t.dims);
  return ir::Select(b, ir::Compare(b, idx, zero, ir::Cmp::LT),
                    ir::Binary(b, "stablehlo.add", idx, n), idx);
}

std::vector<ir::Value> LowerCopy(ir::Builder& b, const std::vector<ir::Value>& in,
                                 const lazy::Attrs&, const std::vector<ir::TensorType>& out) {
  ir::Value v = ir::BroadcastTo(b, in[0], out[0].dims);
  return {ir::Convert(b, v, out[0].dtype)};
}

}  // namespace tpu::ops
