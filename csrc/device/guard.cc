// TpuGuardImpl: one device per process, one stream per device.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdlib>

#include "device/allocator.h"
#include "lazy/executor.h"
#include "lazy/runtime.h"

namespace tpu::device {

// One device per process. Under torchrun (LOCAL_RANK, LOCAL_WORLD_SIZE set)
// with a plugin that gives the process one device, that device is
// tpu:LOCAL_RANK and tpu:0 .. tpu:LOCAL_WORLD_SIZE-1 count as visible (the
// other processes' devices), so the CUDA idioms -- set_device(local_rank),
// torch.device("tpu", local_rank), DeviceMesh's rank % device_count -- hold.
c10::DeviceIndex ProcessDevice() noexcept {
  static const c10::DeviceIndex index = [] {
    const char* rank = std::getenv("LOCAL_RANK");
    const char* size = std::getenv("LOCAL_WORLD_SIZE");
    if (!rank || !size) return c10::DeviceIndex{0};
    const int r = std::atoi(rank), n = std::atoi(size);
    return static_cast<c10::DeviceIndex>(r > 0 && r < n ? r : 0);
  }();
  return index;
}

c10::DeviceIndex VisibleDevices() noexcept {
  c10::DeviceIndex n = 0;
  try {
    n = static_cast<c10::DeviceIndex>(lazy::Runtime::Get().client().device_count());
  } catch (...) {
    return 0;
  }
  const char* size = std::getenv("LOCAL_WORLD_SIZE");
  if (n == 1 && size && std::getenv("LOCAL_RANK")) {
    const int local = std::atoi(size);
    if (local > 1) return static_cast<c10::DeviceIndex>(local);
  }
  return n;
}

void CheckDevice(c10::DeviceIndex index) {
  if (index < 0 || index == ProcessDevice()) return;
  const auto n = VisibleDevices();
  TORCH_CHECK(index < n, "Invalid device tpu:", static_cast<int>(index), ": this process sees ",
              static_cast<int>(n), " tpu device(s)");
  TORCH_CHECK(false, "tpu:", static_cast<int>(index), " is not this process's device: each "
              "process owns one device, tpu:", static_cast<int>(ProcessDevice()),
              " here (launch one process per device, e.g. with torchrun, and use "
              "tpu:LOCAL_RANK)");
}

namespace {

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType D = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return D; }
  // Sets the current device, returning the previous one.
  c10::Device exchangeDevice(c10::Device d) const override {
    CheckDevice(d.index());
    return c10::Device(D, ProcessDevice());
  }
  c10::Device getDevice() const override { return c10::Device(D, ProcessDevice()); }
  void setDevice(c10::Device d) const override { CheckDevice(d.index()); }
  // Called from destructors: must not throw.
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(D, ProcessDevice()));
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return getStream(d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return getStream(d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override { return getStream(s.device()); }
  c10::DeviceIndex deviceCount() const noexcept override { return VisibleDevices(); }
  // Work is ordered by data dependencies inside PJRT; events are satisfied
  // by waiting for all outstanding work.
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override { SyncAll(); }
  void synchronizeEvent(void*) const override { SyncAll(); }
  void synchronizeDevice(const c10::DeviceIndex) const override { SyncAll(); }
  static void SyncAll() {
    lazy::Executor::Get().Flush();
    lazy::Runtime::Get().Synchronize();
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace tpu::device
