// TpuHooks: what PyTorch asks of a PrivateUse1 backend (torch.accelerator,
// generators, pinned memory, storage resizing).
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>

#include "device/allocator.h"
#include "device/generator.h"
#include "lazy/node.h"
#include "lazy/runtime.h"

namespace tpu::device {

void ResizeStorageBytes(const c10::Storage& storage, size_t newsize);  // storage.cc

namespace {

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  // Built into this extension, always.
  bool isBuilt() const override { return true; }
  // A plugin loads and reports at least one device.
  bool isAvailable() const override {
    try {
      return lazy::Runtime::Get().client().device_count() > 0;
    } catch (...) {
      return false;
    }
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return DefaultGenerator();
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<TpuGeneratorImpl>(index < 0 ? ProcessDevice() : index);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return at::Device(c10::DeviceType::PrivateUse1, ProcessDevice());
  }
  // Host memory is ordinary CPU memory; PJRT copies from any of it.
  bool isPinnedPtr(const void*) const override { return false; }
  at::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  // The client is created lazily, on the first use of the device.
  bool hasPrimaryContext(c10::DeviceIndex) const override { return lazy::Runtime::initialized(); }
  void init() const override { lazy::Runtime::Get(); }
  c10::DeviceIndex deviceCount() const override { return VisibleDevices(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { CheckDevice(device); }
  c10::DeviceIndex getCurrentDevice() const override { return ProcessDevice(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    setCurrentDevice(device);
    return ProcessDevice();
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex) const override { return ProcessDevice(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    ResizeStorageBytes(storage, newsize);
  }
};

struct Register {
  Register() { at::RegisterPrivateUse1HooksInterface(new TpuHooks()); }
} register_hooks;

}  // namespace
}  // namespace tpu::device
