// The process's one PJRT client and the bookkeeping around it: plugin
// choice, buffer memory accounting, outstanding work.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pjrt/pjrt.h"

namespace tpu::lazy {

struct PluginConfig {
  std::string explicit_path;  // TORCH_TPU_PLUGIN_PATH
  std::string platform;       // TORCH_TPU_PLATFORM
  std::vector<std::string> search_dirs;
};

class Runtime {
 public:
  // Set before first use (by the Python package at import).
  static void Configure(PluginConfig cfg);
  // Decides the client's options from the chosen plugin when the client is
  // created (tpu_dist sets one for multi-process jobs).
  using OptionsProvider = std::function<pjrt::ClientOptions(const pjrt::PluginChoice&)>;
  static void SetOptionsProvider(OptionsProvider provider);
  // Called once, right after the runtime has started (outside its lock).
  static void SetStartHook(std::function<void()> hook);
  // The runtime, creating the client on first call (lazy init, like CUDA).
  static Runtime& Get();
  static bool initialized();
  // Whether glibc's malloc was tuned for the CPU plugin (see runtime.cc).
  static bool host_malloc_tuned();

  pjrt::Client& client() { return *client_; }
  const std::string& platform() const { return platform_; }
  // "XLA CPU", "XLA CUDA (NVIDIA H200)", "TPU v5e", ...
  std::string device_name() const;

  // Wraps a plugin buffer so that its bytes are counted while it lives.
  std::shared_ptr<pjrt::Buffer> Track(std::unique_ptr<pjrt::Buffer> buf);
  // A tracked buffer that a launch has donated: its bytes now belong to the
  // program's output, so they stop counting here. Returns them.
  int64_t Donated(const std::shared_ptr<pjrt::Buffer>& buf);
  int64_t live_bytes() const { return live_bytes_.load(); }
  int64_t peak_bytes() const { return peak_bytes_.load(); }
  void reset_peak() { peak_bytes_.store(live_bytes_.load()); }
  // The device's memory: the plugin's limit, or physical memory on the CPU
  // plugin (whose device memory is host memory); 0 if unknown.
  int64_t total_memory();
  // What this process may hold: total_memory() times the fraction set by
  // torch.tpu.set_per_process_memory_fraction (1 by default); 0 if unknown.
  int64_t memory_limit();
  void set_memory_fraction(double f) { memory_fraction_.store(f); }
  double memory_fraction() const { return memory_fraction_.load(); }

  // Remembers an execution's completion event; Synchronize waits for all.
  // `inputs` (the program's argument buffers) are kept alive until the event
  // has fired: a buffer whose tensor is overwritten or freed meanwhile must
  // not be released while the program may still read it.
  void AddPending(std::unique_ptr<pjrt::Event> ev, std::vector<std::shared_ptr<const void>> inputs = {});
  // Releases what finished executions held, oldest first: launches call it
  // before a new program allocates its outputs, so that a finished
  // program's inputs (a backward pass's activations) are gone by then, and
  // the memory statistics before they read the counts. A failed
  // execution's event stays for Synchronize to raise.
  void Reap();
  void Synchronize();
  // Waits for every outstanding execution without taking their errors
  // (Synchronize still raises them); the profiler's stop uses it.
  void AwaitPending();

 private:
  Runtime() = default;
  std::shared_ptr<pjrt::Client> client_;
  std::string platform_;
  std::atomic<int64_t> live_bytes_{0}, peak_bytes_{0};
  std::atomic<int64_t> total_memory_{-1};  // -1: not read yet
  std::atomic<double> memory_fraction_{1.0};
  std::mutex pending_mu_;
  struct Pending {
    std::unique_ptr<pjrt::Event> done;
    std::vector<std::shared_ptr<const void>> inputs;
  };
  std::deque<Pending> pending_;
  std::deque<std::unique_ptr<pjrt::Event>> failed_;  // finished with an error, for Synchronize
  // Moves the finished executions at the front of pending_ to `finished`
  // (their inputs are released by the caller, outside the lock).
  void ReapLocked(std::deque<Pending>& finished);
};

}  // namespace tpu::lazy
