// tpu_dist's XLA engine: each collective is a StableHLO program
// (collective_program.h) compiled for the devices of the group and launched
// by every member on its own device; the plugin moves the data (ICI on TPU,
// NCCL inside XLA on GPU). Used with plugins that run collectives across
// processes; the multi-process client it needs is created from torchrun's
// environment (RegisterDistClientOptions).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dist/collective_program.h"

namespace tpu::pjrt {
class Executable;
}

namespace tpu::dist {

class XlaEngine {
 public:
  // Collective over the group: every rank publishes its device's global id
  // in `store` and reads the others'.
  XlaEngine(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size);

  // Each takes this rank's input as a tpu tensor (any layout) and returns
  // its result as a new flat (1-D) tpu tensor; the program is launched
  // before the call returns and its result is ready when the device is.
  at::Tensor AllReduce(const at::Tensor& input, Reduce reduce, std::optional<double> factor = {});
  at::Tensor AllGather(const at::Tensor& input);                      // [G*n]
  at::Tensor ReduceScatter(const at::Tensor& input, Reduce reduce,   // [G*n] -> [n]
                           std::optional<double> factor = {});
  at::Tensor AllToAll(const at::Tensor& input);                       // [G*n] -> [G*n]
  at::Tensor Broadcast(const at::Tensor& input, int root);
  at::Tensor Scatter(const at::Tensor& input, int root);              // [G*n] -> [n]
  // src's input arrives at dst (both call it; others must not).
  at::Tensor SendRecv(const at::Tensor& input, int src, int dst);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<int>& devices() const { return devices_; }

 private:
  at::Tensor Run(CollectiveSpec spec, const std::vector<int>& devices, const at::Tensor& input,
                 std::optional<double> factor);

  int rank_, size_;
  std::vector<int> devices_;  // global device id of each group rank
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<pjrt::Executable>> programs_;
};

// Makes the runtime create a multi-process client (node = RANK of
// WORLD_SIZE, the device LOCAL_RANK, torchrun's store as the key-value
// store) when the process is one of several under torchrun and the plugin
// is an accelerator's; called once at import.
void RegisterDistClientOptions();

}  // namespace tpu::dist
