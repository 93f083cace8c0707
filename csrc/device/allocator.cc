#include "device/allocator.h"

#include "lazy/node.h"
#include "lazy/runtime.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace tpu::device {

namespace {
void DeleteSlot(void* p) { delete static_cast<lazy::StorageSlot*>(p); }
}  // namespace

namespace {
std::string FormatBytes(double n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (n >= 1024 && u < 5) n /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", n, units[u]);
  return buf;
}
}  // namespace

void CheckCanAllocate(size_t nbytes) {
  lazy::Runtime& rt = lazy::Runtime::Get();
  const int64_t limit = rt.memory_limit();
  const int64_t live = rt.live_bytes();
  if (limit <= 0 || live + static_cast<int64_t>(nbytes) <= limit) return;
  const int64_t total = rt.total_memory();
  const double fraction = rt.memory_fraction();
  TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu out of memory. Tried to allocate ",
                   FormatBytes(static_cast<double>(nbytes)), ". tpu:", static_cast<int>(ProcessDevice()),
                   " has a total capacity of ", FormatBytes(static_cast<double>(total)),
                   " of which ", FormatBytes(static_cast<double>(std::max<int64_t>(limit - live, 0))),
                   " is free", fraction < 1 ? " to this process (memory fraction " : "",
                   fraction < 1 ? std::to_string(fraction) + ")" : std::string(),
                   ". Of the allocated memory ", FormatBytes(static_cast<double>(live)),
                   " is allocated by PyTorch. Free tensors that are no longer needed, use a "
                   "smaller batch, or raise the limit with "
                   "torch.tpu.set_per_process_memory_fraction.");
}

c10::DataPtr TpuAllocator::allocate(size_t nbytes) {
  if (nbytes > 0) CheckCanAllocate(nbytes);
  auto* slot = new lazy::StorageSlot(nbytes);
  return c10::DataPtr(slot, slot, &DeleteSlot, c10::Device(c10::DeviceType::PrivateUse1, ProcessDevice()));
}

c10::DeleterFnPtr TpuAllocator::raw_deleter() const { return &DeleteSlot; }

void TpuAllocator::copy_data(void*, const void*, std::size_t) const {
  TORCH_CHECK(false, "tpu storages cannot be copied byte-wise; use tensor.copy_()");
}

bool TpuAllocator::initialized() { return lazy::Runtime::initialized(); }

c10::CachingDeviceAllocator::DeviceStats TpuAllocator::getDeviceStats(c10::DeviceIndex) {
  c10::CachingDeviceAllocator::DeviceStats stats;
  if (!lazy::Runtime::initialized()) return stats;
  lazy::Runtime& rt = lazy::Runtime::Get();
  const auto agg = static_cast<size_t>(c10::CachingDeviceAllocator::StatType::AGGREGATE);
  for (auto* s : {&stats.allocated_bytes[agg], &stats.reserved_bytes[agg],
                  &stats.active_bytes[agg]}) {
    s->current = rt.live_bytes();
    s->peak = rt.peak_bytes();
  }
  return stats;
}

void TpuAllocator::resetPeakStats(c10::DeviceIndex) {
  if (lazy::Runtime::initialized()) lazy::Runtime::Get().reset_peak();
}

std::pair<size_t, size_t> TpuAllocator::getMemoryInfo(c10::DeviceIndex) {
  pjrt::MemoryStats m = lazy::Runtime::Get().client().memory_stats(0);
  const size_t total = m.limit_known ? static_cast<size_t>(m.bytes_limit) : 0;
  const size_t used = static_cast<size_t>(m.bytes_in_use);
  return {total > used ? total - used : 0, total};
}

TpuAllocator* GetTpuAllocator() {
  static TpuAllocator* a = new TpuAllocator();
  return a;
}

// Registered at load, so c10::GetAllocator(PrivateUse1) finds it.
static struct RegisterAllocator {
  RegisterAllocator() { c10::SetAllocator(c10::DeviceType::PrivateUse1, GetTpuAllocator()); }
} register_allocator;

}  // namespace tpu::device
