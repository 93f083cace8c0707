#include "lazy/runtime.h"
#include "lazy/modes.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>
#endif

namespace tpu::lazy {

namespace {
std::mutex g_mu;
PluginConfig g_config;
Runtime::OptionsProvider g_options;
std::function<void()> g_start_hook;
Runtime* g_runtime = nullptr;

// XLA CPU runs a dot through XNNPACK when it can, and when the dot's
// right-hand operand is an entry parameter it packs that operand once and
// reuses the packing for as long as the argument has the same address (XLA
// keys the capture on the device address; its source notes that two
// arguments can share an address over time). Eager programs are dots of
// entry parameters whose buffers come and go, so a new weight that lands
// at a freed weight's address was multiplied with the old weight's values.
// Turning XNNPACK off puts every dot on XLA's own kernels; a user who sets
// the flag in XLA_FLAGS decides for themselves.
void KeepCpuDotsOffXnnpack() {
  const char* current = std::getenv("XLA_FLAGS");
  std::string flags = current != nullptr ? current : "";
  if (flags.find("xla_cpu_use_xnnpack") != std::string::npos) return;
  flags += flags.empty() ? "" : " ";
  flags += "--xla_cpu_use_xnnpack=false";
  setenv("XLA_FLAGS", flags.c_str(), 1);
}

std::atomic<bool> g_host_malloc_tuned{false};

// On the CPU plugin device memory is host memory from glibc's malloc, and
// every program allocates its outputs afresh. glibc's defaults hand a freed
// block of a few hundred KB or more back to the kernel (an arena's top is
// trimmed past 2x the adaptive mmap threshold), so the next op's output of
// the same size faults in and zeroes every page again: an elementwise op on
// a 1 MB tensor spent three quarters of its time in page faults. Keeping
// blocks up to 32 MB in the arenas and not trimming below 128 MB lets
// outputs reuse warm pages. This is process-wide (PyTorch's CPU tensors use
// the same malloc); TORCH_TPU_HOST_MALLOC_TUNING=0 leaves glibc's defaults.
void TuneHostMalloc() {
#if defined(__GLIBC__)
  const char* env = std::getenv("TORCH_TPU_HOST_MALLOC_TUNING");
  if (env != nullptr && std::string(env) == "0") return;
  g_host_malloc_tuned = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 &&
                        mallopt(M_TRIM_THRESHOLD, 128 << 20) == 1;
#endif
}
}  // namespace

bool Runtime::host_malloc_tuned() { return g_host_malloc_tuned.load(); }

void Runtime::Configure(PluginConfig cfg) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_config = std::move(cfg);
}

void Runtime::SetOptionsProvider(OptionsProvider provider) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_options = std::move(provider);
}

void Runtime::SetStartHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_start_hook = std::move(hook);
}

bool Runtime::initialized() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_runtime != nullptr;
}

Runtime& Runtime::Get() {
  std::function<void()> hook;
  std::string warning;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_runtime) return *g_runtime;
    std::vector<pjrt::PluginChoice> skipped;
    const std::vector<pjrt::PluginChoice> choices =
        pjrt::FindPlugins(g_config.explicit_path, g_config.platform, g_config.search_dirs, &skipped);
    auto rt = std::unique_ptr<Runtime>(new Runtime());
    // Automatic mode (no platform or path given) falls back to the next
    // plugin found when one loads but cannot make a client: libtpu on a
    // machine without a TPU, a CUDA plugin without a usable GPU. Said once,
    // as a warning, naming what failed.
    std::string fallback;
    size_t used = 0;
    for (size_t i = 0; i < choices.size(); ++i) {
      const pjrt::PluginChoice& choice = choices[i];
      const bool cpu = choice.platform == "cpu" ||
                       (choice.platform.empty() &&
                        choice.path.find("cpu", choice.path.rfind('/') + 1) != std::string::npos);
      if (cpu) {
        KeepCpuDotsOffXnnpack();
        TuneHostMalloc();
      }
      const bool tpu = choice.platform == "tpu" || choice.path.find("libtpu") != std::string::npos;
      if (tpu && !pjrt::TpuPresent()) {
        // Asked for explicitly on a machine without a chip: libtpu would
        // query the GCE metadata server for minutes before failing.
        ::setenv("TPU_SKIP_MDS_QUERY", "1", /*overwrite=*/0);
      }
      try {
        rt->client_ =
            pjrt::Client::Create(choice.path, g_options ? g_options(choice)
                                                         : pjrt::PlatformClientOptions(choice));
        used = i;
        break;
      } catch (const pjrt::Error& e) {
        if (i + 1 == choices.size()) {
          std::string msg = fallback.empty() ? std::string(e.what())
                                             : fallback + "; " + choice.path + " failed too: " + e.what();
          if (!g_config.platform.empty())
            msg += " (TORCH_TPU_PLATFORM=" + g_config.platform +
                   " restricts torch_tpu to this platform: unset it to use another installed "
                   "plugin, such as the CPU plugin: pip install xla-cpu-pjrt)";
          throw pjrt::Error(msg, e.code());
        }
        fallback += (fallback.empty() ? "" : "; ") + std::string("the ") + choice.platform +
                    " plugin " + choice.path + " could not be used: " + e.what();
      }
    }
    for (const pjrt::PluginChoice& s : skipped) {
      fallback += (fallback.empty() ? "" : "; ") + std::string("the ") + s.platform + " plugin " +
                  s.path + " is installed, but this machine has no " +
                  (s.platform == "tpu" ? "TPU (no /dev/accel*, /dev/vfio/*, or Google TPU PCI device)"
                                       : "GPU (no /dev/nvidia0)");
    }
    if (!fallback.empty()) {
      warning = "torch_tpu: " + fallback + ". Using the " + choices[used].platform + " plugin " +
                choices[used].path + " instead (set TORCH_TPU_PLATFORM to choose a platform).";
    }
    rt->platform_ = rt->client_->platform_name();
    g_runtime = rt.release();  // lives for the process: buffers may outlive exit order
    hook = std::move(g_start_hook);
  }
  if (!warning.empty()) Warn(warning);
  if (hook) hook();
  return *g_runtime;
}

std::string Runtime::device_name() const {
  std::string p = platform_;
  for (char& c : p) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (platform_ == "cpu") return "XLA CPU";
  std::string kind = client_->device_count() ? client_->device_kind(0) : "";
  if (platform_ == "tpu") return kind.empty() ? "TPU" : kind;
  return "XLA " + p + (kind.empty() ? "" : " (" + kind + ")");
}

int64_t Runtime::total_memory() {
  int64_t total = total_memory_.load();
  if (total >= 0) return total;
  total = 0;
  try {
    pjrt::MemoryStats m = client_->memory_stats(0);
    if (m.limit_known) total = m.bytes_limit;
  } catch (const std::exception&) {  // a plugin without memory stats
  }
  if (total == 0 && platform_ == "cpu")
    total = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  total_memory_.store(total);
  return total;
}

int64_t Runtime::memory_limit() {
  return static_cast<int64_t>(static_cast<double>(total_memory()) * memory_fraction_.load());
}

namespace {

// Uncounts a tracked buffer's bytes when it is destroyed, unless a launch
// donated it (Runtime::Donated uncounted them then).
struct Untrack {
  std::atomic<int64_t>* live;
  int64_t bytes;
  bool donated = false;
  void operator()(pjrt::Buffer* b) const {
    if (!donated) live->fetch_sub(bytes);
    delete b;
  }
};

}  // namespace

std::shared_ptr<pjrt::Buffer> Runtime::Track(std::unique_ptr<pjrt::Buffer> buf) {
  const int64_t n = static_cast<int64_t>(buf->on_device_size_bytes());
  const int64_t now = live_bytes_.fetch_add(n) + n;
  int64_t peak = peak_bytes_.load();
  while (now > peak && !peak_bytes_.compare_exchange_weak(peak, now)) {
  }
  return std::shared_ptr<pjrt::Buffer>(buf.release(), Untrack{&live_bytes_, n});
}

int64_t Runtime::Donated(const std::shared_ptr<pjrt::Buffer>& buf) {
  Untrack* u = std::get_deleter<Untrack>(buf);
  if (u == nullptr || u->donated) return 0;
  u->donated = true;
  live_bytes_.fetch_sub(u->bytes);
  return u->bytes;
}

void Runtime::ReapLocked(std::deque<Pending>& finished) {
  while (!pending_.empty() && pending_.front().done->IsReady()) {
    Pending& p = pending_.front();
    try {
      p.done->Await();  // ready: returns at once, or throws the execution's error
    } catch (const pjrt::Error&) {
      failed_.push_back(std::move(p.done));
    }
    finished.push_back(std::move(p));
    pending_.pop_front();
  }
}

void Runtime::AddPending(std::unique_ptr<pjrt::Event> ev, std::vector<std::shared_ptr<const void>> inputs) {
  std::deque<Pending> finished;  // released outside the lock
  std::lock_guard<std::mutex> lock(pending_mu_);
  pending_.push_back(Pending{std::move(ev), std::move(inputs)});
  ReapLocked(finished);
}

void Runtime::Reap() {
  std::deque<Pending> finished;  // released outside the lock
  std::lock_guard<std::mutex> lock(pending_mu_);
  ReapLocked(finished);
}

void Runtime::AwaitPending() {
  std::lock_guard<std::mutex> lock(pending_mu_);
  for (auto& p : pending_) {
    try {
      p.done->Await();
    } catch (const pjrt::Error&) {
      // Left for Synchronize (and the results) to raise.
    }
  }
}

void Runtime::Synchronize() {
  std::deque<Pending> events;
  std::deque<std::unique_ptr<pjrt::Event>> failed;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    events.swap(pending_);
    failed.swap(failed_);
  }
  std::string first_error;
  for (auto& ev : failed) {
    try {
      ev->Await();
    } catch (const pjrt::Error& e) {
      if (first_error.empty()) first_error = e.what();
    }
  }
  for (auto& p : events) {
    try {
      p.done->Await();
    } catch (const pjrt::Error& e) {
      if (first_error.empty()) first_error = e.what();
    }
  }
  if (!first_error.empty()) throw pjrt::Error(first_error, 13);
}

}  // namespace tpu::lazy
