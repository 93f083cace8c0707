// TpuGeneratorImpl: the device RNG state is (seed, offset). Kernels draw
// Philox random bits on the device from it (StableHLO rng_bit_generator)
// and advance the offset, so results are reproducible from the seed.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace tpu::device {

class TpuGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit TpuGeneratorImpl(c10::DeviceIndex index = 0);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;  // a nondeterministic new seed
  // State: 16 bytes (seed, offset) in a CPU uint8 tensor.
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }
  // Returns the (seed, offset) for a draw of `count` 32-bit words and
  // advances the offset past it.
  std::pair<uint64_t, uint64_t> Reserve(uint64_t count);

 private:
  TpuGeneratorImpl* clone_impl() const override;
  uint64_t seed_ = 67280421310721ULL;
  uint64_t offset_ = 0;
};

const at::Generator& DefaultGenerator();
TpuGeneratorImpl* GeneratorOrDefault(const std::optional<at::Generator>& gen);

}  // namespace tpu::device
