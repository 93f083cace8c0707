// The runtime's side of the profiler and the metrics (see trace.h).
#include "profiler/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <thread>
#include <memory>
#include <unordered_map>

#include "pjrt/pjrt.h"
#include "profiler/recorder.h"

namespace tpu::profiler {

std::atomic<bool> g_recording{false};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int32_t ThreadId() {
  thread_local const int32_t tid = static_cast<int32_t>(::syscall(SYS_gettid));
  return tid;
}

namespace {
thread_local std::vector<uint64_t> t_correlation;
std::atomic<uint32_t> g_flow{0};
}  // namespace

void PushCorrelation(uint64_t id) { t_correlation.push_back(id); }
void PopCorrelation() {
  if (!t_correlation.empty()) t_correlation.pop_back();
}
uint64_t CurrentCorrelation() { return t_correlation.empty() ? 0 : t_correlation.back(); }

Recorder& Recorder::Get() {
  static Recorder* r = new Recorder();  // outlives every plugin callback
  return *r;
}

void Recorder::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  records_.clear();
  ++generation_;
  last_end_ = 0;
  g_recording.store(true);
}

void Recorder::Stop() {
  g_recording.store(false);
  std::lock_guard<std::mutex> lock(mu_);
  ++generation_;  // kernels still running belong to no session
}

std::vector<Record> Recorder::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(records_);
}

void Recorder::Add(Record r) {
  std::lock_guard<std::mutex> lock(mu_);
  records_.push_back(std::move(r));
}

int64_t Recorder::Serialize(int64_t issued_ns, int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t start = std::min(std::max(issued_ns, last_end_), end_ns);
  last_end_ = std::max(last_end_, end_ns);
  return start;
}

void OnLaunch(const std::string& name, int64_t issued_ns, int64_t returned_ns,
              std::vector<Meta> meta, pjrt::Event* done) {
  Recorder& rec = Recorder::Get();
  const uint64_t corr = CurrentCorrelation();
  const uint32_t flow = ++g_flow;
  rec.Add(Record{Record::kExecute, "tpu::execute", issued_ns, returned_ns, corr, flow, ThreadId(),
                 {Meta{"program", name}}});
  auto kernel = std::make_shared<Record>(
      Record{Record::kKernel, "xla::" + name, issued_ns, returned_ns, corr, flow, 0, std::move(meta)});
  const uint64_t generation = rec.generation();
  auto finish = [kernel, generation, issued_ns](const std::string& error) {
    Recorder& r = Recorder::Get();
    const int64_t end = NowNs();
    if (r.generation() != generation) return;
    kernel->start_ns = r.Serialize(issued_ns, end);
    kernel->end_ns = end;
    if (!error.empty()) kernel->meta.push_back(Meta{"error", error});
    r.Add(std::move(*kernel));
  };
  if (done != nullptr) {
    done->OnReady(std::move(finish));
  } else {
    finish(std::string());
  }
}

void OnCompile(const std::string& name, const char* tier, uint64_t fingerprint, size_t bytes,
               int64_t start_ns, int64_t end_ns, const char* cause) {
  char fp[17];
  std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(fingerprint));
  std::vector<Meta> meta{Meta{"program", name}, Meta{"cache", tier}, Meta{"fingerprint", fp},
                         Meta{"program bytes", std::to_string(bytes), false},
                         Meta{"seconds", std::to_string((end_ns - start_ns) * 1e-9), false}};
  if (cause != nullptr) meta.push_back(Meta{"cause", cause});
  Recorder::Get().Add(Record{Record::kCompile,
                             std::string(tier[0] == 'd' ? "tpu::load_executable" : "tpu::compile"),
                             start_ns, end_ns, CurrentCorrelation(), 0, ThreadId(), std::move(meta)});
}

void OnCopy(bool to_device, size_t bytes, int64_t start_ns, int64_t end_ns) {
  Recorder::Get().Add(Record{to_device ? Record::kCopyToDevice : Record::kCopyToHost,
                             to_device ? "Memcpy HtoD (Host -> Device)" : "Memcpy DtoH (Device -> Host)",
                             start_ns, end_ns, CurrentCorrelation(), 0, ThreadId(),
                             {Meta{"bytes", std::to_string(bytes), false}}});
}

// ---- counters ----

Counters& counters() {
  static Counters* c = new Counters();
  return *c;
}

namespace {

struct LastCompile {
  std::string types, shapes, attrs;
  int64_t precision = -1;
};

struct Keyed {
  std::mutex mu;
  std::map<std::string, int64_t> syncs, fallbacks, recompiles;
  std::unordered_map<std::string, LastCompile> last;  // by op sequence
  std::vector<std::pair<std::string, std::string>> recent;
};

Keyed& keyed() {
  static Keyed* k = new Keyed();
  return *k;
}

int64_t (*g_precision_probe)() = nullptr;
constexpr size_t kMaxKeys = 4096;  // distinct lines / programs remembered
constexpr size_t kRecent = 32;

void Bump(std::map<std::string, int64_t>& m, const std::string& key) {
  auto it = m.find(key);
  if (it != m.end()) {
    ++it->second;
  } else if (m.size() < kMaxKeys) {
    m.emplace(key, 1);
  } else {
    ++m["(other)"];
  }
}

}  // namespace

void SetPrecisionProbe(int64_t (*probe)()) { g_precision_probe = probe; }

void NoteHostSync(const char* what, const std::string* where) {
  counters().host_syncs.fetch_add(1, std::memory_order_relaxed);
  Keyed& k = keyed();
  std::lock_guard<std::mutex> lock(k.mu);
  Bump(k.syncs, std::string(what) + (where ? " at " + *where : ""));
}

void NoteCpuFallback(const std::string& op) {
  Keyed& k = keyed();
  std::lock_guard<std::mutex> lock(k.mu);
  Bump(k.fallbacks, op);
}

const char* RecompileCause(const std::string& ops, const std::string& types,
                           const std::string& shapes, const std::string& attrs) {
  const int64_t precision = g_precision_probe ? g_precision_probe() : -1;
  Keyed& k = keyed();
  std::lock_guard<std::mutex> lock(k.mu);
  auto it = k.last.find(ops);
  if (it == k.last.end()) {
    if (k.last.size() >= kMaxKeys) k.last.clear();
    k.last.emplace(ops, LastCompile{types, shapes, attrs, precision});
    return nullptr;
  }
  LastCompile& last = it->second;
  const char* cause = last.types != types     ? "new dtype"
                      : last.shapes != shapes ? "new shape"
                      : last.precision != precision ? "new precision"
                                                    : "new attributes";
  last = LastCompile{types, shapes, attrs, precision};
  return cause;
}

void NoteCompileCause(const char* cause, const std::string& name) {
  if (cause == nullptr) return;
  Keyed& k = keyed();
  std::lock_guard<std::mutex> lock(k.mu);
  Bump(k.recompiles, cause);
  if (k.recent.size() == kRecent) k.recent.erase(k.recent.begin());
  k.recent.emplace_back(cause, name);
}

// ---- logs ----

namespace {

std::atomic<CompileListener> g_listener{nullptr};
std::atomic<double> g_slow_seconds{10.0};

// Compiles in progress, watched by one thread that starts with the first
// compile after logs are switched on.
struct Watch {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::pair<std::string, std::chrono::steady_clock::time_point>> running;
  uint64_t next = 0;
  bool started = false;

  void Loop() {
    std::unique_lock<std::mutex> lock(mu);
    std::map<uint64_t, int> reported;  // id -> reports made
    for (;;) {
      cv.wait_for(lock, std::chrono::seconds(1));
      const double slow = g_slow_seconds.load();
      const auto now = std::chrono::steady_clock::now();
      for (auto it = reported.begin(); it != reported.end();)
        it = running.count(it->first) ? std::next(it) : reported.erase(it);
      for (const auto& [id, job] : running) {
        const double secs = std::chrono::duration<double>(now - job.second).count();
        int& n = reported[id];
        if (slow > 0 && secs >= slow * (n + 1)) {
          ++n;
          std::fprintf(stderr, "[torch_tpu] still compiling %s: %.0f s so far\n", job.first.c_str(), secs);
          std::fflush(stderr);
        }
      }
    }
  }
};

Watch& watch() {
  static Watch* w = new Watch();  // its thread runs to the end of the process
  return *w;
}

}  // namespace

void SetCompileListener(CompileListener listener, double slow_seconds) {
  g_slow_seconds.store(slow_seconds);
  g_listener.store(listener);
}

void NoteCompileDone(const std::string& name, const char* tier, const char* cause, double seconds) {
  if (CompileListener l = g_listener.load(std::memory_order_relaxed)) l(name, tier, cause, seconds);
}

CompileWatch::CompileWatch(const std::string& name) {
  if (g_listener.load(std::memory_order_relaxed) == nullptr) return;
  Watch& w = watch();
  std::lock_guard<std::mutex> lock(w.mu);
  if (!w.started) {
    w.started = true;
    std::thread([&w] { w.Loop(); }).detach();
  }
  id_ = ++w.next;
  w.running.emplace(id_, std::make_pair(name, std::chrono::steady_clock::now()));
}

CompileWatch::~CompileWatch() {
  if (id_ == 0) return;
  Watch& w = watch();
  std::lock_guard<std::mutex> lock(w.mu);
  w.running.erase(id_);
}

KeyedCounts keyed_counts() {
  Keyed& k = keyed();
  std::lock_guard<std::mutex> lock(k.mu);
  KeyedCounts out;
  out.host_syncs.assign(k.syncs.begin(), k.syncs.end());
  out.cpu_fallbacks.assign(k.fallbacks.begin(), k.fallbacks.end());
  out.recompiles.assign(k.recompiles.begin(), k.recompiles.end());
  out.recent_recompiles = k.recent;
  return out;
}

void ResetCounters() {
  Counters& c = counters();
  for (auto* a : {&c.host_syncs, &c.h2d_copies, &c.h2d_bytes, &c.d2h_copies, &c.d2h_bytes, &c.load_ns})
    a->store(0);
  Keyed& k = keyed();
  std::lock_guard<std::mutex> lock(k.mu);
  k.syncs.clear();
  k.fallbacks.clear();
  k.recompiles.clear();
  k.recent.clear();
}

}  // namespace tpu::profiler
