// The executables of programs, by structural key: in memory (an LRU of at
// most TORCH_TPU_EXECUTABLE_CACHE_SIZE, fewer near the process's limit of
// memory mappings), on disk (the persistent cache,
// whose entries carry the plugin's, this build's and the compiler
// environment's identity), prefetched at start-up from the manifest of the
// last run; compiled on a miss, the quick way for small programs.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <cstring>
#include <fstream>
#include <optional>

#include "lazy/batch.h"
#include "lazy/cache_limits.h"
#include "lazy/modes.h"
#include "lazy/runtime.h"
#include "pjrt/pjrt.h"
#include "profiler/trace.h"

namespace tpu::lazy {

// The identity of this extension's build for the persistent cache: a hash
// of the shared object's bytes, so that entries compiled by a build with
// different lowerings are never loaded, while an identical rebuild keeps
// its entries.
static const std::string& ExtensionIdentity() {
  static const std::string id = [] {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&ExtensionIdentity), &info) || !info.dli_fname) return std::string("ext=?");
    std::ifstream f(info.dli_fname, std::ios::binary);
    uint64_t h = 1469598103934665603ULL;  // FNV-1a
    char buf[1 << 16];
    while (f.read(buf, sizeof buf) || f.gcount() > 0) {
      for (std::streamsize i = 0; i < f.gcount(); ++i) {
        h ^= static_cast<unsigned char>(buf[i]);
        h *= 1099511628211ULL;
      }
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return std::string("ext=") + hex;
  }();
  return id;
}

// Environment variables that change what a plugin compiles: XLA's debug
// options (every XLA plugin parses XLA_FLAGS) and libtpu's arguments.
static std::string CompilerEnvironment() {
  std::string s;
  for (const char* name : {"XLA_FLAGS", "LIBTPU_INIT_ARGS"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') s += std::string("|") + name + "=" + v;
  }
  return s;
}

// The identity a persistent cache entry must carry to be loaded: the
// plugin's, this extension build's and the compiler environment.
static const std::string& CacheIdentity() {
  // The runtime first: starting it may add to XLA_FLAGS (runtime.cc).
  static const std::string id = [] {
    std::string plugin = Runtime::Get().client().plugin_identity();
    return plugin + "|" + ExtensionIdentity() + CompilerEnvironment();
  }();
  return id;
}

struct Executor::Entry {
  std::once_flag once;
  // Read and replaced (at a tier-up) with std::atomic_load / atomic_store.
  std::shared_ptr<pjrt::Executable> exe;
  std::atomic<bool> quick{false};  // exe was compiled the quick way
  std::atomic<int64_t> runs{0};    // requests while quick
  bool excess_precision = false;   // compiled with xla_allow_excess_precision
  std::string error;
  bool requested = true;  // false while only prefetched
  uint64_t last_use = 0;   // Executor::use_clock_ at the last request
};

// Runs of a quickly compiled program after which it is compiled fully
// (Executor::TierUp).
static constexpr int64_t kTierUpRuns = 100;

// The persistent cache's key of a quick program's fully optimized build.
static std::string FullKey(const std::string& key) { return key + std::string("\0full", 5); }

// Executables kept in memory at most (TORCH_TPU_EXECUTABLE_CACHE_SIZE).
static size_t ExecutableCacheLimit() {
  static const size_t n = [] {
    const char* v = std::getenv("TORCH_TPU_EXECUTABLE_CACHE_SIZE");
    long long x = v ? std::atoll(v) : 0;
    return x > 0 ? static_cast<size_t>(x) : size_t{2048};
  }();
  return n;
}

// The cache is bounded by memory mappings too. Each loaded XLA CPU
// executable holds memory mappings of its JIT code (about 5 with one
// codegen module, 20-30 for a fused program split into XLA's default 32
// modules) and EH frame registrations. Past the kernel's vm.max_map_count
// (65530 by default) an mmap or mprotect in the JIT fails half-way, the
// compile fails ("Failed to materialize symbols"), and the JIT's error path
// leaves an EH frame registered over memory it unmapped: the next C++
// exception anywhere in the process then crashed in the unwinder (issue
// 27: Fused Eager, 2048 cached programs, after 18 of PyTorch's indexing
// tests). So the process's mappings are counted every so many new
// executables; over half of vm.max_map_count, the cache's limit drops in
// proportion until they are under it again, and is lifted when they fall
// below a quarter. A count reads /proc/self/maps (about 14 ms at 30,000
// mappings here), so the next one comes after as many new programs as,
// at twice the mappings each has added so far, would fill the room left
// under the budget: every 16 programs near it, up to every 1024 far below.
static constexpr int64_t kMapCheckMin = 16, kMapCheckMax = 1024;
static constexpr size_t kMinCachedUnderMapBudget = 64;
static std::atomic<int64_t> g_new_since_map_check{0};
static std::atomic<int64_t> g_map_check_every{kMapCheckMin};
static std::atomic<int64_t> g_last_maps{-1};  // at the last count
static std::atomic<size_t> g_map_limit{0};  // 0: none
static std::atomic<bool> g_map_check_due{false};
static std::atomic<int64_t> g_map_budget_override{0};

static int64_t MapBudget() {
  if (int64_t o = g_map_budget_override.load()) return o;
  static const int64_t budget = [] {
    int64_t max_maps = 65530;
    std::ifstream f("/proc/sys/vm/max_map_count");
    int64_t v = 0;
    if (f >> v && v > 0) max_maps = v;
    return max_maps / 2;
  }();
  return budget;
}

// The number of memory mappings of this process (lines of
// /proc/self/maps), or -1 where there is no such file.
static int64_t CountMappings() {
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return -1;
  int64_t lines = 0;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    lines += std::count(buf, buf + n, '\n');
  std::fclose(f);
  return lines;
}

void SetMapBudgetForTesting(int64_t budget) {
  g_map_budget_override.store(budget);
  g_map_limit.store(0);
  g_map_check_every.store(kMapCheckMin);
  g_last_maps.store(-1);
  g_map_check_due.store(true);  // the next request checks
}

int64_t MapLimitForTesting() { return static_cast<int64_t>(g_map_limit.load()); }

// Drops least recently used entries until at most `target` remain
// (callers holding an executable keep it alive until they are done).
template <class Cache>
static void DropLeastRecentlyUsed(Cache& cache, size_t target, CacheStats& stats) {
  if (cache.size() <= target) return;
  std::vector<std::pair<uint64_t, const std::string*>> uses;
  uses.reserve(cache.size());
  for (auto& [key, entry] : cache) uses.emplace_back(entry->last_use, &key);
  const size_t drop = cache.size() - target;
  std::nth_element(uses.begin(), uses.begin() + static_cast<std::ptrdiff_t>(drop - 1), uses.end());
  std::vector<std::string> keys;
  for (size_t i = 0; i < drop; ++i) keys.push_back(*uses[i].second);
  for (const std::string& k : keys) cache.erase(k);
  stats.evicted += static_cast<int64_t>(keys.size());
}

// Applies the mapping budget to the cache, given the process's mappings.
template <class Cache>
static void ApplyMapBudget(Cache& cache, int64_t maps, CacheStats& stats) {
  const int64_t budget = MapBudget();
  // Mappings per new program since the last count (at least 4: a program
  // that loads adds about 3), doubled for safety.
  const int64_t programs = std::max<int64_t>(1, g_map_check_every.load());
  const int64_t last = g_last_maps.exchange(maps);
  const int64_t per = std::max<int64_t>(4, last < 0 ? 0 : (maps - last) / programs);
  g_map_check_every.store(
      std::clamp<int64_t>((budget - maps) / (2 * per), kMapCheckMin, kMapCheckMax));
  if (maps > budget) {
    // Mappings not held by executables are counted too; the floor keeps a
    // working set cached even when they alone are over the budget.
    const double keep = 0.75 * static_cast<double>(budget) / static_cast<double>(maps);
    const size_t target = std::max(kMinCachedUnderMapBudget,
                                   static_cast<size_t>(keep * static_cast<double>(cache.size())));
    g_map_limit.store(target);
    DropLeastRecentlyUsed(cache, target, stats);
  } else if (maps < budget / 2) {
    g_map_limit.store(0);
  }
}

// The cache's limit now: its size limit, lowered by the mapping budget.
static size_t EffectiveCacheLimit() {
  const size_t m = g_map_limit.load();
  return m ? std::min(ExecutableCacheLimit(), m) : ExecutableCacheLimit();
}

void Executor::EvictLocked() {
  const size_t limit = EffectiveCacheLimit();
  if (cache_.size() <= limit) return;
  DropLeastRecentlyUsed(cache_, limit - limit / 8, stats_);
}

// The compiles listed in the stats: the most recent ones (a process that
// runs for days compiles without end).
static constexpr size_t kListedCompiles = 4096;

static void NoteCompile(CacheStats& stats, const std::string& name, double secs) {
  stats.compile_seconds += secs;
  if (stats.entries.size() >= 2 * kListedCompiles)
    stats.entries.erase(stats.entries.begin(), stats.entries.end() - kListedCompiles);
  stats.entries.emplace_back(name, secs);
}

// Entries a manifest lists (the first programs a run asks for: its start-up).
static constexpr size_t kManifestEntries = 512;
// Serialized bytes prefetched at most.
static constexpr size_t kPrefetchBytes = size_t{512} << 20;

std::shared_ptr<Executor::Entry> Executor::Lookup(const std::string& key, bool* hit) {
  // Counted before the lock: reading the mappings takes about 14 ms at
  // 30,000. (A plain load first: no atomic write on the hit path.)
  const int64_t maps = g_map_check_due.load(std::memory_order_relaxed) && g_map_check_due.exchange(false)
                           ? CountMappings()
                           : -1;
  std::lock_guard<std::mutex> lock(mu_);
  if (maps >= 0) ApplyMapBudget(cache_, maps, stats_);
  ++stats_.requests;
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    it->second->last_use = ++use_clock_;
    *hit = true;
    if (it->second->requested) {
      ++stats_.hits;
    } else {  // prefetched: this is its first request
      it->second->requested = true;
      NoteFirstUseLocked(key);
    }
    return it->second;
  }
  *hit = false;
  if (g_new_since_map_check.fetch_add(1) + 1 >= g_map_check_every.load()) {
    g_new_since_map_check.store(0);
    g_map_check_due.store(true);
  }
  EvictLocked();
  auto e = std::make_shared<Entry>();
  e->last_use = ++use_clock_;
  cache_.emplace(key, e);
  NoteFirstUseLocked(key);
  return e;
}

void Executor::NoteFirstUseLocked(const std::string& key) {
  if (!disk_.enabled() || first_used_.size() >= kManifestEntries) return;
  first_used_.push_back(DiskCache::EntryName(CacheIdentity(), key));
  // Written as it grows (1, 2, 4, ... entries) and at exit, so that a run
  // that ends abruptly still leaves its start-up behind.
  const size_t n = first_used_.size();
  if ((n & (n - 1)) == 0) disk_.WriteManifest(ManifestName(), first_used_);
}

std::string Executor::ManifestName() {
  return HashName(CacheIdentity() + '\0' + program_);
}

void Executor::SetProgram(std::string name, bool prefetch) {
  std::lock_guard<std::mutex> lock(prefetch_mu_);
  program_ = std::move(name);
  prefetch_enabled_ = prefetch;
}

void Executor::StartPrefetch() {
  std::lock_guard<std::mutex> lock(prefetch_mu_);
  if (!prefetch_enabled_ || !disk_.enabled() || prefetch_) return;
  stop_prefetch_ = false;
  prefetch_pid_ = ::getpid();
  prefetch_ = std::make_unique<std::thread>([this] { Prefetch(); });
}

void Executor::Prefetch() {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    names = disk_.ReadManifest(ManifestName());
  }
  size_t bytes = 0;
  for (const std::string& name : names) {
    if (stop_prefetch_) return;
    // Quietly: an entry that is missing, damaged or foreign is left to the
    // request that needs it, which warns and recompiles.
    std::optional<DiskCache::Stored> stored = disk_.Read(name);
    if (!stored || stored->identity != CacheIdentity()) continue;
    // A quick program's optimized build (TierUp), where there is one.
    if (auto full = disk_.Read(DiskCache::EntryName(CacheIdentity(), FullKey(stored->key))))
      if (full->identity == CacheIdentity()) stored->executable = std::move(full->executable);
    bytes += stored->executable.size();
    if (bytes > kPrefetchBytes) return;
    std::shared_ptr<Entry> entry;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cache_.count(stored->key)) continue;  // already asked for
      if (cache_.size() >= EffectiveCacheLimit()) return;  // never evict for a prefetch
      entry = std::make_shared<Entry>();
      entry->requested = false;
      entry->last_use = ++use_clock_;
      cache_.emplace(stored->key, entry);
    }
    // A request for this key meanwhile waits here instead of loading it twice.
    std::call_once(entry->once, [&] {
      std::string error;
      std::atomic_store(&entry->exe, std::shared_ptr<pjrt::Executable>(
                                         Runtime::Get().client().TryDeserialize(stored->executable, &error)));
      if (!std::atomic_load(&entry->exe)) {
        // Left without an executable, and the file set aside: the request
        // for it compiles (DiskCache::Load finds no entry any more).
        RefuseEntry(name, error);
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.disk_hits;
      ++stats_.prefetched;
    });
  }
}

// The plugin did not load a stored executable. The failure is reported
// without a C++ exception: the plugin's loader may leave the process's
// unwinder state behind it (issue 27). The entry is set aside so that no
// later process tries it again, and counted.
void Executor::RefuseEntry(const std::string& name, const std::string& error) {
  const std::string moved = disk_.SetAside(name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.disk_refused;
  }
  Warn("ignoring a compilation cache entry that does not load (" + error + "); recompiling" +
       (moved.empty() ? std::string() : "; the entry is kept as " + moved));
}

void Executor::StopPrefetch() {
  std::lock_guard<std::mutex> lock(prefetch_mu_);
  stop_prefetch_ = true;
  if (!prefetch_) return;
  if (prefetch_pid_ == ::getpid()) {
    prefetch_->join();
    prefetch_.reset();
  } else {
    (void)prefetch_.release();  // a forked child: the thread is the parent's
  }
}

void Executor::Shutdown() {
  StopPrefetch();
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_used_.empty()) disk_.WriteManifest(ManifestName(), first_used_);
}

void Executor::ConfigureDiskCache(std::string dir) {
  StopPrefetch();
  std::lock_guard<std::mutex> lock(mu_);
  disk_.Configure(std::move(dir));
  first_used_.clear();
}

// Programs whose tensors all hold at most this many elements
// (TORCH_TPU_QUICK_COMPILE_ELEMENTS, default 1024; 0: never) are compiled
// the quick way: without LLVM's optimizations
// (xla_backend_optimization_level=0) and with XLA CPU's elemental emitters
// instead of its MLIR fusion emitters (xla_cpu_use_fusion_emitters=false).
// On the CPU plugin that cuts the compile of a small op of a new shape from
// 35-45 ms to about 15 ms (benchmarks/cold_ops.py), while the run time of a
// program this small is its launch overhead either way. A user who sets
// either option in XLA_FLAGS decides for every program. Other plugins: not
// measured, off.
int64_t QuickCompileElements() {
  static const int64_t n = [] {
    const char* flags = std::getenv("XLA_FLAGS");
    if (flags != nullptr && (std::strstr(flags, "xla_backend_optimization_level") ||
                             std::strstr(flags, "xla_cpu_use_fusion_emitters")))
      return int64_t{0};
    // Measured on the CPU plugin only; other plugins compile every program
    // with their own defaults.
    if (Runtime::Get().client().platform_name() != "cpu") return int64_t{0};
    const char* v = std::getenv("TORCH_TPU_QUICK_COMPILE_ELEMENTS");
    return v ? std::max<int64_t>(0, std::atoll(v)) : int64_t{1024};
  }();
  return n;
}

// XLA CPU splits a program's kernels into this many LLVM modules and
// compiles them in parallel (xla_cpu_parallel_codegen_split_count, 32 by
// default). Each module is linked into the process on its own, with its
// own code, data and EH frame mappings: a fused program of a dozen kernels
// held 23 mappings split, 5 in one module, and on this project's 2-core
// machine one module compiled faster (benchmarks/compile_step.py, GPT step:
// compile's cold first step 7.12 s against 7.83 s split 32). So the CPU
// plugin gets one module per hardware thread pair, at most 8, and at least
// one; XLA_FLAGS that set the option decide instead.
static std::string CpuCodegenSplit() {
  const char* flags = std::getenv("XLA_FLAGS");
  if (flags != nullptr && std::strstr(flags, "xla_cpu_parallel_codegen_split_count")) return "";
  if (Runtime::Get().client().platform_name() != "cpu") return "";
  const int64_t threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
  return pjrt::EncodeOptionOverride("xla_cpu_parallel_codegen_split_count",
                                    std::clamp<int64_t>(threads / 2, 1, 8));
}

namespace {
std::atomic<bool> g_excess_precision{[] {
  const char* v = std::getenv("TORCH_TPU_ALLOW_EXCESS_PRECISION");
  return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0);
}()};
}  // namespace

bool AllowExcessPrecision() { return g_excess_precision.load(std::memory_order_relaxed); }
void SetAllowExcessPrecision(bool allow) { g_excess_precision.store(allow); }

// XLA's default lets a plugin keep a bf16/f16 intermediate in f32 across
// the ops of one program (the TPU and GPU compilers drop the rounding
// converts); PyTorch rounds every op's result, so that is off unless
// torch.backends.tpu.allow_excess_precision is set.
static const std::string& CompileOptions(bool quick, bool excess_precision) {
  static const std::string base = pjrt::EncodeCompileOptions() + CpuCodegenSplit();
  static const std::string normal[2] = {
      base + pjrt::EncodeBoolOptionOverride("xla_allow_excess_precision", false),
      base + pjrt::EncodeBoolOptionOverride("xla_allow_excess_precision", true)};
  // xla_cpu_enable_fast_min_max=false: the elemental emitters' min and max
  // then propagate NaN, as torch.maximum / clamp do.
  static const std::string quick_options =
      pjrt::EncodeOptionOverride("xla_backend_optimization_level", int64_t{0}) +
      pjrt::EncodeBoolOptionOverride("xla_cpu_use_fusion_emitters", false) +
      pjrt::EncodeBoolOptionOverride("xla_cpu_enable_fast_min_max", false);
  static const std::string cheap[2] = {normal[0] + quick_options, normal[1] + quick_options};
  return quick ? cheap[excess_precision] : normal[excess_precision];
}

std::shared_ptr<pjrt::Executable> Executor::GetExecutable(
    const std::string& key, const std::string& name, const std::function<std::string()>& print,
    bool quick, const std::function<const char*()>& cause, bool excess_precision) {
  bool hit = false;
  std::shared_ptr<Entry> entry = Lookup(key, &hit);
  // Concurrent misses of one key compile once; the others wait here.
  std::call_once(entry->once, [&] {
    entry->excess_precision = excess_precision;  // the key holds it too
    pjrt::Client& client = Runtime::Get().client();
    const std::string& identity = CacheIdentity();
    auto t0 = std::chrono::steady_clock::now();
    const int64_t start_ns = profiler::NowNs();
    const uint64_t fingerprint = std::hash<std::string>{}(key);
    // A program this process had not asked for: why (a disk hit too).
    const char* why = cause ? cause() : nullptr;
    profiler::NoteCompileCause(why, name);
    // A quick program that an earlier process ran often enough was stored
    // fully optimized as well (TierUp); that one is preferred.
    for (int tier = quick ? 0 : 1; tier < 2; ++tier) {
      const bool full = tier == 0;  // tier 1: the key's own build
      const std::string stored_key = full ? FullKey(key) : key;
      if (auto bytes = disk_.Load(identity, stored_key)) {
        std::string error;
        auto exe = client.TryDeserialize(*bytes, &error);
        if (exe) {
          std::atomic_store(&entry->exe, std::shared_ptr<pjrt::Executable>(std::move(exe)));
          entry->quick = quick && !full;
          const int64_t end_ns = profiler::NowNs();
          profiler::counters().load_ns.fetch_add(end_ns - start_ns, std::memory_order_relaxed);
          profiler::NoteCompileDone(name, "disk", why, (end_ns - start_ns) * 1e-9);
          if (profiler::Recording())
            profiler::OnCompile(name, "disk", fingerprint, 0, start_ns, end_ns, why);
          std::lock_guard<std::mutex> lock(mu_);
          ++stats_.disk_hits;
          return;
        }
        RefuseEntry(DiskCache::EntryName(identity, stored_key), error);
      }
    }
    const std::string text = print();
    try {
      profiler::CompileWatch watch(name);
      std::atomic_store(&entry->exe,
                        std::shared_ptr<pjrt::Executable>(client.Compile(text, CompileOptions(quick, excess_precision))));
      entry->quick = quick;
    } catch (const std::exception& e) {
      entry->error = "tpu: compiling " + name + " failed: " + e.what() + "\nProgram:\n" + text;
      return;
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int64_t end_ns = profiler::NowNs();
    profiler::NoteCompileDone(name, "miss", why, secs);
    if (profiler::Recording())
      profiler::OnCompile(name, "miss", fingerprint, text.size(), start_ns, end_ns, why);
    if (disk_.enabled()) {
      try {
        disk_.Store(identity, key, std::atomic_load(&entry->exe)->Serialize());
      } catch (const std::exception& e) {
        Warn(std::string("could not write the compilation cache: ") + e.what());
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.compiles;
    NoteCompile(stats_, name, secs);
  });
  std::shared_ptr<pjrt::Executable> exe = std::atomic_load(&entry->exe);
  if (!exe) {
    if (entry->error.empty()) {
      // A prefetched entry that did not load: drop it and load or compile here.
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = cache_.find(key);
        if (it != cache_.end() && it->second == entry) cache_.erase(it);
      }
      return GetExecutable(key, name, print, quick, cause, excess_precision);
    }
    throw std::runtime_error(entry->error);
  }
  if (entry->quick && entry->runs.fetch_add(1) + 1 == kTierUpRuns) {
    TierUp(*entry, key, name, print);
    exe = std::atomic_load(&entry->exe);
  }
  return exe;
}

// A quickly compiled program that has run kTierUpRuns times is compiled
// again with every optimization, on the thread that asked for it (once per
// program and process), and replaces the quick one; the optimized one is
// stored beside it in the persistent cache, so later processes load it
// directly. The quick tier saves 20-30 ms on each program's first call,
// but its unoptimized code runs slower (a tanh of 1024 floats: several
// microseconds), which a program run this often repays.
void Executor::TierUp(Entry& entry, const std::string& key, const std::string& name,
                      const std::function<std::string()>& print) {
  auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<pjrt::Executable> full;
  try {
    full = Runtime::Get().client().Compile(print(), CompileOptions(false, entry.excess_precision));
  } catch (const std::exception&) {
    entry.quick = false;  // the quick executable stays in use
    return;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (disk_.enabled()) {
    try {
      disk_.Store(CacheIdentity(), FullKey(key), full->Serialize());
    } catch (const std::exception& e) {
      Warn(std::string("could not write the compilation cache: ") + e.what());
    }
  }
  std::atomic_store(&entry.exe, std::move(full));
  entry.quick = false;
  // Counted apart from `compiles` (the programs compiled on a miss).
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.tier_ups;
  NoteCompile(stats_, name, secs);
}

CacheStats Executor::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  CacheStats s = stats_;
  s.cached = static_cast<int64_t>(cache_.size());
  return s;
}

void Executor::ClearCache() {
  StopPrefetch();
  std::lock_guard<std::mutex> lock(mu_);
  cache_.clear();
}

}  // namespace tpu::lazy
