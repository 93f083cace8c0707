// TpuGuardImpl: one device per process, one stream per device.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "lazy/executor.h"
#include "lazy/runtime.h"

namespace tpu::device {

namespace {

c10::DeviceIndex CountDevices() noexcept {
  try {
    return static_cast<c10::DeviceIndex>(lazy::Runtime::Get().client().device_count());
  } catch (...) {
    return 0;
  }
}

void CheckIndex(c10::DeviceIndex index) {
  const auto n = CountDevices();
  TORCH_CHECK(index >= 0 && index < n, "Invalid device tpu:", static_cast<int>(index), ": ",
              "this process sees ", static_cast<int>(n), " tpu device(s). Each process owns ",
              "one device, visible as tpu:0 (launch one process per device for more).");
}

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType D = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return D; }
  // Sets the current device, returning the previous one.
  c10::Device exchangeDevice(c10::Device d) const override {
    CheckIndex(d.index());
    return c10::Device(D, 0);
  }
  c10::Device getDevice() const override { return c10::Device(D, 0); }
  void setDevice(c10::Device d) const override { CheckIndex(d.index()); }
  // Called from destructors: must not throw.
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(D, 0));
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return getStream(d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return getStream(d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override { return getStream(s.device()); }
  c10::DeviceIndex deviceCount() const noexcept override { return CountDevices(); }
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
