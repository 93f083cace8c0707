// TpuAllocator: a tpu storage's bytes live in PJRT buffers, so "allocating"
// makes a StorageSlot that later refers to the node holding the value.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

namespace tpu::lazy {
struct StorageSlot;
}

namespace tpu::device {

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  // PyTorch expects a DataPtr whose device is tpu:0; ours points at a slot.
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  // Whole storages only (copy-on-write materialization); see allocator.cc.
  void copy_data(void* dest, const void* src, std::size_t count) const override;
  bool initialized() override;
  // PJRT owns device memory; freeing happens when the last node dies.
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override {}
  // One stream per device: nothing to record.
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  // Bytes held by live PJRT buffers (current and peak).
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex) override;
  // (free, total) as the plugin reports them.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;
};

TpuAllocator* GetTpuAllocator();
// The slot behind a tpu data pointer, and the byte offset into its storage
// that the pointer is at (0 but for byte slices of an UntypedStorage).
// Null for a pointer that is not in a live tpu storage.
lazy::StorageSlot* SlotAt(const c10::DataPtr& p, size_t* byte_offset);
lazy::StorageSlot* SlotAtAddress(const void* p, size_t* byte_offset);
// (address, bytes) of every live tpu storage, by address.
std::vector<std::pair<uintptr_t, size_t>> LiveStorages();
// Raises torch.OutOfMemoryError, with the figures CUDA's message gives, when
// `nbytes` more would exceed what this process may hold on the device.
void CheckCanAllocate(size_t nbytes);

// guard.cc: the index of this process's device (LOCAL_RANK under torchrun
// with one device per process, else 0), the number of device indices that
// count as visible, and the check that an index names this process's device.
c10::DeviceIndex ProcessDevice() noexcept;
c10::DeviceIndex VisibleDevices() noexcept;
void CheckDevice(c10::DeviceIndex index);

}  // namespace tpu::device
