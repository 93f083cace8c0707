// What the runtime tells the profiler and the metrics: programs launched
// and completed, compiles, copies, host syncs, CPU fallbacks. Light on
// purpose (no torch or Kineto header): the launch path includes it.
//
// Device events are recorded only while a torch.profiler session with the
// tpu activity is recording (Recording(), one relaxed load when it is not);
// the counters of torch_tpu.metrics are kept always (a few atomic adds per
// program, nothing per op).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tpu::pjrt {
class Event;
}

namespace tpu::profiler {

extern std::atomic<bool> g_recording;
inline bool Recording() { return g_recording.load(std::memory_order_relaxed); }

// Nanoseconds since the Unix epoch (the clock of Kineto's activities).
int64_t NowNs();

// The correlation id of the ATen op that the calling thread is in, as
// torch.profiler pushes them (0 outside any op or when not recording).
void PushCorrelation(uint64_t id);
void PopCorrelation();
uint64_t CurrentCorrelation();

// Key/value metadata of a trace event; `quoted` false for numbers.
struct Meta {
  std::string key, value;
  bool quoted = true;
};

// A program handed to the plugin at `issued_ns`, returning at `returned_ns`
// (the host side: a "tpu::execute" span on the calling thread with a flow
// arrow to the kernel). The kernel ends when `done` fires; it starts when
// the plugin got it or when the device's previous program ended, whichever
// is later. `ops` lists the ATen ops the program holds. Only call while
// Recording().
void OnLaunch(const std::string& name, int64_t issued_ns, int64_t returned_ns,
              std::vector<Meta> meta, pjrt::Event* done);

// A compile or a persistent-cache load, tier "disk" or "miss" (a memory
// hit costs nothing and is counted, not traced). `fingerprint`: the
// program's cache key hash; `bytes`: its StableHLO text (0 for a load).
void OnCompile(const std::string& name, const char* tier, uint64_t fingerprint, size_t bytes,
               int64_t start_ns, int64_t end_ns, const char* cause);

// A copy between host and device memory.
void OnCopy(bool to_device, size_t bytes, int64_t start_ns, int64_t end_ns);

// ---- counters (torch_tpu.metrics) ----

// (Programs executed, cache hits and compiles are the executor's own
// CacheStats; torch_tpu.metrics reports them relative to its last reset.)
struct Counters {
  std::atomic<int64_t> host_syncs{0};
  std::atomic<int64_t> h2d_copies{0}, h2d_bytes{0}, d2h_copies{0}, d2h_bytes{0};
  std::atomic<int64_t> load_ns{0};  // persistent-cache loads
};
Counters& counters();

// A host sync: the host waited for a device value (`what`: the reason, such
// as "copy to host"), from the user's line `where` (may be null).
void NoteHostSync(const char* what, const std::string* where);
// An op that ran on CPU through the fallback.
void NoteCpuFallback(const std::string& op);
// The cause of a compile miss, from what differs from the last compile of
// the same ops: "new shape", "new dtype", "new precision", "new attributes",
// or nullptr for the first compile of these ops. `ops`: the program's op
// sequence; `types`: its parameters' dtypes and `shapes` their dims;
// `attrs`: everything else in the cache key.
const char* RecompileCause(const std::string& ops, const std::string& types,
                           const std::string& shapes, const std::string& attrs);
void NoteCompileCause(const char* cause, const std::string& name);
// The matmul precision in effect (set by the ATen layer).
void SetPrecisionProbe(int64_t (*probe)());

// ---- logs (torch_tpu._logging) ----

// Called after every compile or persistent-cache load on the thread that
// asked for it (the Python logger, when logs are on).
using CompileListener = void (*)(const std::string& name, const char* tier, const char* cause,
                                 double seconds);
void SetCompileListener(CompileListener listener, double slow_seconds);
void NoteCompileDone(const std::string& name, const char* tier, const char* cause, double seconds);
// While a compile runs past the slow threshold, a watchdog thread says so
// on stderr every threshold seconds (the compiling thread holds the GIL).
class CompileWatch {
 public:
  explicit CompileWatch(const std::string& name);
  ~CompileWatch();
  CompileWatch(const CompileWatch&) = delete;
  CompileWatch& operator=(const CompileWatch&) = delete;

 private:
  uint64_t id_ = 0;
};

// Snapshot of the keyed counters: (key, count) lists.
struct KeyedCounts {
  std::vector<std::pair<std::string, int64_t>> host_syncs, cpu_fallbacks, recompiles;
  std::vector<std::pair<std::string, std::string>> recent_recompiles;  // (cause, program)
};
KeyedCounts keyed_counts();
void ResetCounters();

}  // namespace tpu::profiler
