#include "device/allocator.h"
#include "device/generator.h"

#include <ATen/core/DistributionsHelper.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/CPUAllocator.h>
#include <ATen/Utils.h>
#include <ATen/ops/empty.h>

#include <cstring>
#include <random>

namespace tpu::device {

TpuGeneratorImpl::TpuGeneratorImpl(c10::DeviceIndex index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

void TpuGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t TpuGeneratorImpl::seed() {
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) | rd();
  set_current_seed(s);
  return s;
}

void TpuGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
                  new_state.numel() == 16 && new_state.device().is_cpu(),
              "tpu RNG state must be a CPU uint8 tensor of 16 bytes (seed, offset), "
              "as returned by torch.tpu.get_rng_state()");
  const auto* p = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed_, p, 8);
  std::memcpy(&offset_, p + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> TpuGeneratorImpl::get_state() const {
  at::Tensor t = at::empty({16}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  auto* p = t.data_ptr<uint8_t>();
  std::memcpy(p, &seed_, 8);
  std::memcpy(p + 8, &offset_, 8);
  return t.getIntrusivePtr();
}

std::pair<uint64_t, uint64_t> TpuGeneratorImpl::Reserve(uint64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto r = std::make_pair(seed_, offset_);
  offset_ += (count + 3) / 4 * 4;
  return r;
}

TpuGeneratorImpl* TpuGeneratorImpl::clone_impl() const {
  auto* g = new TpuGeneratorImpl(device().index());
  g->seed_ = seed_;
  g->offset_ = offset_;
  return g;
}

const at::Generator& DefaultGenerator() {
  static at::Generator g = at::make_generator<TpuGeneratorImpl>(ProcessDevice());
  return g;
}

TpuGeneratorImpl* GeneratorOrDefault(const std::optional<at::Generator>& gen) {
  const at::Generator& g = gen.has_value() && gen->defined() ? *gen : DefaultGenerator();
  TORCH_CHECK(g.device().type() == c10::DeviceType::PrivateUse1,
              "Expected a 'tpu' device type for generator but found '", g.device().type(), "'");
  return at::check_generator<TpuGeneratorImpl>(g);
}

}  // namespace tpu::device
