#include "device/allocator.h"

#include "device/memory_history.h"
#include "lazy/node.h"
#include "lazy/runtime.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

namespace tpu::device {

namespace {

// Device addresses. Each storage owns a range of addresses of its own, as
// device memory would, so that data_ptr() values of different storages
// never overlap (code that finds shared storages by address ranges, as
// safetensors does, sees the truth) and an address inside a storage (a
// byte slice of an UntypedStorage: PyTorch offsets the data pointer) leads
// back to it. Addresses are never dereferenced; they are handed out from a
// range no host pointer uses, 512-byte aligned as CUDA's, and not reused
// (2^63 - 2^56 bytes last a process far longer than it runs). A DataPtr's
// context is its address too (PyTorch's copy-on-write clones need data ==
// context); the slot is found from it.
constexpr uintptr_t kFirstAddress = uintptr_t{1} << 56;
constexpr uintptr_t kAlign = 512;

struct AddressSpace {
  std::mutex mu;
  uintptr_t next = kFirstAddress;
  std::map<uintptr_t, lazy::StorageSlot*> live;  // by first address
};
AddressSpace& Addresses() {
  static auto* a = new AddressSpace();  // never destroyed: storages outlive static teardown
  return *a;
}

// Storage bytes held now (what torch.profiler's profile_memory reports as
// the device total; PJRT buffers are counted apart, in Runtime).
std::atomic<int64_t> g_storage_bytes{0};

// profile_memory and the memory history see a storage's whole size when it
// is made and when it dies (PJRT owns the memory; nothing is cached).
void NoteAllocation(void* addr, size_t nbytes, bool alloc) {
  const int64_t delta = alloc ? static_cast<int64_t>(nbytes) : -static_cast<int64_t>(nbytes);
  const int64_t total = g_storage_bytes.fetch_add(delta) + delta;
  if (c10::memoryProfilingEnabled())
    c10::reportMemoryUsageToProfiler(addr, delta, static_cast<size_t>(total), static_cast<size_t>(total),
                                     c10::Device(c10::DeviceType::PrivateUse1, ProcessDevice()));
  if (MemoryHistoryEnabled()) RecordMemoryEvent(addr, nbytes, alloc);
}

void DeleteAddress(void* p) {
  lazy::StorageSlot* slot = nullptr;
  {
    AddressSpace& as = Addresses();
    std::lock_guard<std::mutex> lock(as.mu);
    auto it = as.live.find(reinterpret_cast<uintptr_t>(p));
    if (it == as.live.end()) return;
    slot = it->second;
    as.live.erase(it);
  }
  NoteAllocation(p, slot->nbytes, false);
  delete slot;
}

}  // namespace

lazy::StorageSlot* SlotAt(const c10::DataPtr& p, size_t* byte_offset) {
  return SlotAtAddress(p.get(), byte_offset);
}

lazy::StorageSlot* SlotAtAddress(const void* p, size_t* byte_offset) {
  *byte_offset = 0;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  if (addr < kFirstAddress) return nullptr;
  AddressSpace& as = Addresses();
  std::lock_guard<std::mutex> lock(as.mu);
  auto it = as.live.upper_bound(addr);  // the first storage past addr
  if (it == as.live.begin()) return nullptr;
  --it;
  lazy::StorageSlot* slot = it->second;
  if (addr > slot->addr + slot->nbytes) return nullptr;  // (the end: an empty slice)
  *byte_offset = addr - slot->addr;
  return slot;
}

std::vector<std::pair<uintptr_t, size_t>> LiveStorages() {
  AddressSpace& as = Addresses();
  std::lock_guard<std::mutex> lock(as.mu);
  std::vector<std::pair<uintptr_t, size_t>> out;
  out.reserve(as.live.size());
  for (const auto& [addr, slot] : as.live) out.emplace_back(addr, slot->nbytes);
  return out;
}

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
  int64_t live = rt.live_bytes();
  if (limit <= 0 || live + static_cast<int64_t>(nbytes) <= limit) return;
  rt.Reap();  // finished programs may still hold inputs nothing else needs
  live = rt.live_bytes();
  if (live + static_cast<int64_t>(nbytes) <= limit) return;
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
  {
    AddressSpace& as = Addresses();
    std::lock_guard<std::mutex> lock(as.mu);
    slot->addr = as.next;
    as.next += (std::max<size_t>(nbytes, 1) + kAlign - 1) / kAlign * kAlign;
    as.live.emplace(slot->addr, slot);
  }
  void* addr = reinterpret_cast<void*>(slot->addr);
  NoteAllocation(addr, nbytes, true);
  return c10::DataPtr(addr, addr, &DeleteAddress,
                      c10::Device(c10::DeviceType::PrivateUse1, ProcessDevice()));
}

c10::DeleterFnPtr TpuAllocator::raw_deleter() const { return &DeleteAddress; }

// A whole storage's bytes into another's, as copy-on-write storages
// (Tensor._lazy_clone) materialize: values are immutable nodes, so the copy
// shares the node.
void TpuAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  size_t at_dest = 0, at_src = 0;
  lazy::StorageSlot* d = SlotAtAddress(dest, &at_dest);
  lazy::StorageSlot* s = SlotAtAddress(src, &at_src);
  TORCH_CHECK(d != nullptr && s != nullptr, "tpu: copy_data between addresses that are not "
              "both in live tpu storages");
  TORCH_CHECK(at_dest == 0 && at_src == 0 && count == s->nbytes && count == d->nbytes,
              "tpu storages are copied whole by the allocator; use tensor.copy_() for parts");
  d->node = s->node;
}

bool TpuAllocator::initialized() { return lazy::Runtime::initialized(); }

c10::CachingDeviceAllocator::DeviceStats TpuAllocator::getDeviceStats(c10::DeviceIndex) {
  c10::CachingDeviceAllocator::DeviceStats stats;
  if (!lazy::Runtime::initialized()) return stats;
  lazy::Runtime& rt = lazy::Runtime::Get();
  rt.Reap();
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
