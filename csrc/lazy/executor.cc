#include "lazy/executor.h"

#include <algorithm>

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "ir/ops.h"
#include "lazy/modes.h"
#include "lazy/runtime.h"
#include "lazy/views.h"
#include "lazy/where.h"
#include "pjrt/pjrt.h"

namespace tpu::lazy {

pjrt::ElementType ToPjrt(ir::DType t) {
  using E = pjrt::ElementType;
  switch (t) {
    case ir::DType::PRED: return E::PRED;
    case ir::DType::S8: return E::S8;
    case ir::DType::S16: return E::S16;
    case ir::DType::S32: return E::S32;
    case ir::DType::S64: return E::S64;
    case ir::DType::U8: return E::U8;
    case ir::DType::U16: return E::U16;
    case ir::DType::U32: return E::U32;
    case ir::DType::U64: return E::U64;
    case ir::DType::F16: return E::F16;
    case ir::DType::BF16: return E::BF16;
    case ir::DType::F32: return E::F32;
    case ir::DType::F64: return E::F64;
    case ir::DType::C64: return E::C64;
    case ir::DType::C128: return E::C128;
    case ir::DType::F8E5M2: return E::F8E5M2;
    case ir::DType::F8E4M3FN: return E::F8E4M3FN;
    case ir::DType::F8E5M2FNUZ: return E::F8E5M2FNUZ;
    case ir::DType::F8E4M3FNUZ: return E::F8E4M3FNUZ;
  }
  return E::INVALID;
}

namespace {

size_t ItemSize(ir::DType t) { return t == ir::DType::PRED ? 1 : ir::BitWidth(t) / 8; }

// `dynamic`: the offset is a run-time operand, not part of the program.
void WriteView(KeyWriter& k, const ViewSpec& v, bool dynamic) {
  k.Ints(v.sizes);
  k.Ints(v.strides);
  k.Int(dynamic ? -1 : v.offset);
  k.Int(static_cast<int64_t>(v.dtype));
}

// The event after which a launched program is done with its buffers: the
// definition of its last output, or its completion event when it has no
// outputs. Until then the runtime holds the program's inputs and outputs
// (Runtime::AddPending), the later of the two events, so that no plugin's
// ordering of completion and definition matters. Outputs are held too, so
// that a temporary the caller drops at once is not destroyed before it is
// written.
std::unique_ptr<pjrt::Event> DoneWithBuffers(std::unique_ptr<pjrt::Event> done,
                                             const std::vector<std::unique_ptr<pjrt::Buffer>>& outs) {
  return outs.empty() ? std::move(done) : outs.back()->ReadyEvent();
}

// How an output reaches its storage.
enum class Store : int64_t { kFresh = 0, kWhole = 1, kPartial = 2 };

}  // namespace

// A recorded op. Its inputs keep their nodes alive until it has run; its
// results are deferred nodes that point back at it.
struct PendingOp {
  int index = 0;  // position in the pending batch
  Lowering op;
  Attrs attrs;
  std::vector<Operand> inputs;
  struct Out {
    ir::TensorType type;  // what the lowering returns
    Store store = Store::kFresh;
    ViewSpec view;        // kWhole / kPartial: the destination view
    NodePtr base;         // kPartial: the storage's previous value (may be null)
    int64_t storage_numel = 0;
    std::weak_ptr<BufferNode> result;
  };
  std::vector<Out> outs;
  const std::string* where = nullptr;  // the user's line that issued the op (interned)
};

namespace {
WhereFn g_where = nullptr;

// "aten::mul.Tensor at train.py:12" for one op; for a batch, its ops with
// their lines (the first few distinct ones).
std::string Issued(const std::vector<std::shared_ptr<PendingOp>>& batch) {
  std::string out;
  int shown = 0;
  std::string last;
  for (const auto& p : batch) {
    std::string one = std::string(p->op.name) + (p->where ? " at " + *p->where : "");
    if (one == last) continue;
    last = one;
    if (shown == 6) {
      out += ", ...";
      break;
    }
    out += (shown++ ? ", " : "") + one;
  }
  return out;
}
}  // namespace

void SetWhereHook(WhereFn fn) { g_where = fn; }
const std::string* CurrentWhere() { return g_where ? g_where() : nullptr; }

NodePtr BufferNode::Failed(ir::TensorType type, std::string error) {
  return NodePtr(new BufferNode(std::move(type), std::move(error)));
}

const std::shared_ptr<pjrt::Buffer>& BufferNode::buffer() const {
  if (!error_.empty()) throw std::runtime_error(error_);
  if (producer_) throw std::logic_error("tpu: reading a deferred node before it ran");
  return buffer_;
}

size_t BufferNode::nbytes() const { return type_.numel() * ItemSize(type_.dtype); }

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
  std::shared_ptr<pjrt::Executable> exe;
  std::string error;
  bool requested = true;  // false while only prefetched
  uint64_t last_use = 0;   // Executor::use_clock_ at the last request
};

// Executables kept in memory at most (TORCH_TPU_EXECUTABLE_CACHE_SIZE).
// Each loaded XLA CPU executable holds several memory mappings of JIT code
// and an EH frame registration; an unbounded cache reached the kernel's
// vm.max_map_count (65530) in a long test run, after which the JIT's
// mapping failed half-way and left a registration over unmapped memory
// that crashed the next C++ exception (issue 27). The least recently used
// are dropped (and reloaded from disk or recompiled when asked for again).
static size_t ExecutableCacheLimit() {
  static const size_t n = [] {
    const char* v = std::getenv("TORCH_TPU_EXECUTABLE_CACHE_SIZE");
    long long x = v ? std::atoll(v) : 0;
    return x > 0 ? static_cast<size_t>(x) : size_t{2048};
  }();
  return n;
}

// Drops the least recently used eighth of the cache once it is over its
// limit (callers holding an executable keep it alive until they are done).
void Executor::EvictLocked() {
  const size_t limit = ExecutableCacheLimit();
  if (cache_.size() <= limit) return;
  std::vector<std::pair<uint64_t, const std::string*>> uses;
  uses.reserve(cache_.size());
  for (auto& [key, entry] : cache_) uses.emplace_back(entry->last_use, &key);
  const size_t drop = cache_.size() - limit + limit / 8;
  std::nth_element(uses.begin(), uses.begin() + static_cast<std::ptrdiff_t>(drop - 1), uses.end());
  std::vector<std::string> keys;
  for (size_t i = 0; i < drop; ++i) keys.push_back(*uses[i].second);
  for (const std::string& k : keys) cache_.erase(k);
  stats_.evicted += static_cast<int64_t>(keys.size());
}

// Entries a manifest lists (the first programs a run asks for: its start-up).
static constexpr size_t kManifestEntries = 512;
// Serialized bytes prefetched at most.
static constexpr size_t kPrefetchBytes = size_t{512} << 20;

Executor& Executor::Get() {
  static Executor* e = new Executor();  // never destroyed: outlives static teardown
  return *e;
}

std::shared_ptr<Executor::Entry> Executor::Lookup(const std::string& key, bool* hit) {
  std::lock_guard<std::mutex> lock(mu_);
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
    bytes += stored->executable.size();
    if (bytes > kPrefetchBytes) return;
    std::shared_ptr<Entry> entry;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cache_.count(stored->key)) continue;  // already asked for
      if (cache_.size() >= ExecutableCacheLimit()) return;  // never evict for a prefetch
      entry = std::make_shared<Entry>();
      entry->requested = false;
      entry->last_use = ++use_clock_;
      cache_.emplace(stored->key, entry);
    }
    // A request for this key meanwhile waits here instead of loading it twice.
    std::call_once(entry->once, [&] {
      std::string error;
      entry->exe = Runtime::Get().client().TryDeserialize(stored->executable, &error);
      if (!entry->exe) {
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
static int64_t QuickCompileElements() {
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

static const std::string& CompileOptions(bool quick) {
  static const std::string normal = pjrt::EncodeCompileOptions();
  // xla_cpu_enable_fast_min_max=false: the elemental emitters' min and max
  // then propagate NaN, as torch.maximum / clamp do.
  static const std::string cheap =
      normal + pjrt::EncodeOptionOverride("xla_backend_optimization_level", int64_t{0}) +
      pjrt::EncodeBoolOptionOverride("xla_cpu_use_fusion_emitters", false) +
      pjrt::EncodeBoolOptionOverride("xla_cpu_enable_fast_min_max", false);
  return quick ? cheap : normal;
}

std::shared_ptr<pjrt::Executable> Executor::GetExecutable(
    const std::string& key, const std::string& name, const std::function<std::string()>& print,
    bool quick) {
  bool hit = false;
  std::shared_ptr<Entry> entry = Lookup(key, &hit);
  // Concurrent misses of one key compile once; the others wait here.
  std::call_once(entry->once, [&] {
    pjrt::Client& client = Runtime::Get().client();
    const std::string& identity = CacheIdentity();
    auto t0 = std::chrono::steady_clock::now();
    if (auto bytes = disk_.Load(identity, key)) {
      std::string error;
      entry->exe = client.TryDeserialize(*bytes, &error);
      if (entry->exe) {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.disk_hits;
        return;
      }
      RefuseEntry(DiskCache::EntryName(identity, key), error);
    }
    const std::string text = print();
    try {
      entry->exe = client.Compile(text, CompileOptions(quick));
    } catch (const std::exception& e) {
      entry->error = "tpu: compiling " + name + " failed: " + e.what() + "\nProgram:\n" + text;
      return;
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (disk_.enabled()) {
      try {
        disk_.Store(identity, key, entry->exe->Serialize());
      } catch (const std::exception& e) {
        Warn(std::string("could not write the compilation cache: ") + e.what());
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.compiles;
    stats_.compile_seconds += secs;
    stats_.entries.emplace_back(name, secs);
  });
  if (!entry->exe) {
    if (entry->error.empty()) {
      // A prefetched entry that did not load: drop it and load or compile here.
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = cache_.find(key);
        if (it != cache_.end() && it->second == entry) cache_.erase(it);
      }
      return GetExecutable(key, name, print, quick);
    }
    throw std::runtime_error(entry->error);
  }
  return entry->exe;
}

// The calling thread's BeginBatch depth.
thread_local int t_batch_depth = 0;

void Executor::BeginBatch() { ++t_batch_depth; }

void Executor::EndBatch() {
  if (t_batch_depth > 0 && --t_batch_depth == 0) Flush();
}

void Executor::EndBatchDeferred() {
  if (t_batch_depth > 0) --t_batch_depth;
}

std::vector<NodePtr> Executor::Run(const Lowering& op, Attrs attrs, std::vector<Operand> inputs,
                                   std::vector<OutputTarget> outputs) {
  // Fused Eager reports failures later than the op returns: remember the
  // user's line (before taking the lock: the hook takes the GIL). A batch
  // raises its failures before the foreach op that made it returns.
  const bool batching = t_batch_depth > 0;
  const std::string* where = nullptr;
  if (g_where != nullptr && CurrentMode() == EagerMode::kDeferAndFuse && !capturing_) where = g_where();
  std::lock_guard<std::recursive_mutex> lock(exec_mu_);
  const EagerMode mode = CurrentMode();
  // The first op of a backward pass launches the forward graph recorded so
  // far: it runs while the backward is traced, and its activations become
  // buffers of their own instead of one temporary block for the whole step.
  if (mode == EagerMode::kDeferAndFuse && !capturing_ && fused_hook_ && fused_hook_() &&
      !pending_.empty())
    FlushLocked();
  auto rec = std::make_shared<PendingOp>();
  rec->op = op;
  rec->where = where;
  rec->attrs = std::move(attrs);
  rec->inputs = std::move(inputs);
  rec->outs.reserve(outputs.size());
  std::vector<NodePtr> results;
  results.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    OutputTarget& o = outputs[i];
    PendingOp::Out out;
    ir::TensorType node_type = o.type;
    out.type = std::move(o.type);
    if (o.slot) {
      out.view = std::move(o.view);
      out.storage_numel = static_cast<int64_t>(o.slot->nbytes / ItemSize(out.view.dtype));
      if (CoversWhole(out.view, out.storage_numel)) {
        out.store = Store::kWhole;
        node_type = {out.view.dtype, out.view.sizes};
      } else {
        out.store = Store::kPartial;
        out.base = o.slot->node;
        // The storage keeps its node's dims, so later keys do not change.
        node_type = out.base ? out.base->type()
                             : ir::TensorType{out.view.dtype, {out.storage_numel}};
      }
    }
    auto node = std::make_shared<BufferNode>(std::move(node_type), nullptr, op.name, where);
    node->producer_ = rec;
    node->producer_output_ = static_cast<int>(i);
    out.result = node;
    rec->outs.push_back(std::move(out));
    if (o.slot) o.slot->node = node;
    results.push_back(std::move(node));
  }
  uint64_t sig = 0;
  if (mode == EagerMode::kDeferAndFuse && !capturing_) {
    // The op's structure (not its data): name, attrs, input views.
    sig = reinterpret_cast<uintptr_t>(op.name) * 1099511628211ULL;
    auto mix = [&sig](int64_t v) { sig = (sig ^ static_cast<uint64_t>(v)) * 1099511628211ULL; };
    for (int64_t v : rec->attrs.ints) mix(v);
    for (const Operand& in : rec->inputs) {
      for (int64_t d : in.view.sizes) mix(d);
      mix(static_cast<int64_t>(in.view.dtype));
    }
  }
  rec->index = static_cast<int>(pending_.size());
  pending_.push_back(std::move(rec));
  if (capturing_) {
    // The whole captured graph becomes one program.
  } else if (batching) {
    if (pending_.size() >= max_pending_) FlushLocked();
  } else if (mode != EagerMode::kDeferAndFuse) {
    FlushLocked();
  } else if (ShouldCut(sig)) {
    FlushLocked();
  }
  if (mode == EagerMode::kDeferNeverLaunchBlocking && !capturing_ && !batching) {
    for (const NodePtr& n : results) {
      if (n->failed()) throw std::runtime_error(n->error());
      try {
        n->buffer_->ReadyEvent()->Await();
      } catch (const pjrt::Error& e) {
        throw std::runtime_error("tpu: " + std::string(op.name) + " failed: " + e.what());
      }
    }
  }
  return results;
}

bool Executor::ShouldCut(uint64_t sig) {
  const size_t n = pending_.size();
  history_.push_back(sig);
  if (history_.size() > 2 * max_pending_) history_.erase(history_.begin(), history_.end() - max_pending_);
  const size_t h = history_.size();
  if (period_ && (h <= period_ || history_[h - 1] != history_[h - 1 - period_])) period_ = 0;
  if (period_) {
    const size_t per_batch = std::max<size_t>(1, max_pending_ / period_) * period_;
    return n >= per_batch;
  }
  if (n < max_pending_) return false;
  // At the limit: look for the shortest period in the recent history.
  for (size_t p = 1; 2 * p <= h && p <= max_pending_ / 2; ++p) {
    bool repeats = true;
    for (size_t i = 0; i < p && repeats; ++i) repeats = history_[h - 1 - i] == history_[h - 1 - i - p];
    if (repeats) {
      period_ = p;
      break;
    }
  }
  return true;
}

void Executor::Flush() {
  std::lock_guard<std::recursive_mutex> lock(exec_mu_);
  FlushLocked();
}

size_t Executor::pending() const {
  std::lock_guard<std::recursive_mutex> lock(exec_mu_);
  return pending_.size();
}

void Executor::Materialize(const NodePtr& node) {
  if (node->deferred()) Flush();
  if (node->failed()) throw std::runtime_error(node->error());
}

void Executor::BeginCapture() {
  std::lock_guard<std::recursive_mutex> lock(exec_mu_);
  if (capturing_) throw std::runtime_error("tpu: a graph capture is already in progress");
  FlushLocked();
  capturing_ = true;
  capture_broken_ = false;
  rng_nodes_.clear();
}

bool Executor::EndCapture(Captured* out) {
  std::lock_guard<std::recursive_mutex> lock(exec_mu_);
  if (!capturing_) throw std::logic_error("tpu: EndCapture without BeginCapture");
  capturing_ = false;
  if (capture_broken_) {
    rng_nodes_.clear();
    FlushLocked();
    return false;
  }
  out->exe.reset();
  out->results.clear();
  FlushLocked(out);
  rng_nodes_.clear();
  return !capture_broken_;
}

void Executor::NoteRngState(const NodePtr& node, std::function<void(uint64_t*)> refresh) {
  std::lock_guard<std::recursive_mutex> lock(exec_mu_);
  if (capturing_) rng_nodes_.emplace_back(node, std::move(refresh));
}

std::vector<NodePtr> Executor::Launch(const Captured& c, const std::vector<NodePtr>& args) {
  std::vector<NodePtr> results;
  if (!c.exe) return results;
  std::vector<PJRT_Buffer*> raw;
  raw.reserve(args.size());
  for (const NodePtr& a : args) {
    Materialize(a);
    raw.push_back(a->buffer()->raw());
  }
  Runtime& rt = Runtime::Get();
  std::unique_ptr<pjrt::Event> done;
  std::vector<std::unique_ptr<pjrt::Buffer>> bufs;
  try {
    bufs = c.exe->Execute(raw, {}, &done);
  } catch (const std::exception& e) {
    throw std::runtime_error("tpu: running " + c.name + " failed: " + e.what());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.launches;
  }
  done = DoneWithBuffers(std::move(done), bufs);
  std::vector<std::shared_ptr<const void>> hold(args.begin(), args.end());
  results.reserve(bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) {
    results.push_back(std::make_shared<BufferNode>(c.results[i]->type(), rt.Track(std::move(bufs[i])), c.name));
    hold.push_back(results.back()->buffer_);
  }
  if (done) rt.AddPending(std::move(done), std::move(hold));
  if (CurrentMode() == EagerMode::kDeferNeverLaunchBlocking) {
    for (const NodePtr& n : results) {
      try {
        n->buffer_->ReadyEvent()->Await();
      } catch (const pjrt::Error& e) {
        throw std::runtime_error("tpu: " + c.name + " failed: " + e.what());
      }
    }
  }
  return results;
}

void Executor::FlushLocked(Captured* capture) {
  if (capturing_ && !capture && !pending_.empty()) capture_broken_ = true;
  if (pending_.empty()) return;
  std::vector<std::shared_ptr<PendingOp>> batch;
  batch.swap(pending_);
  pending_.reserve(std::min(batch.size(), max_pending_));  // the next batch is likely as long

  // A reference to a value: a parameter, or output `out` of record `rec`.
  struct Ref {
    int param = -1, rec = -1, out = -1;
  };
  std::vector<const BufferNode*> params;
  std::vector<NodePtr> param_nodes;
  std::unordered_map<const BufferNode*, int> param_index;
  std::string failure;
  auto ref_of = [&](const NodePtr& n) {
    Ref ref;
    if (n->deferred()) {
      ref.rec = n->producer_->index;
      if (ref.rec >= static_cast<int>(batch.size()) || batch[ref.rec] != n->producer_)
        throw std::logic_error("tpu: deferred node outside the batch");
      ref.out = n->producer_output_;
      ++n->flush_uses_;
      return ref;
    }
    if (n->failed() && failure.empty()) failure = n->error();
    // A short scan while there are few parameters, then a map.
    if (params.size() <= 16) {
      for (size_t i = 0; i < params.size(); ++i)
        if (params[i] == n.get()) {
          ref.param = static_cast<int>(i);
          return ref;
        }
      if (params.size() == 16)
        for (size_t i = 0; i < params.size(); ++i) param_index.emplace(params[i], static_cast<int>(i));
    } else {
      auto it = param_index.find(n.get());
      if (it != param_index.end()) {
        ref.param = it->second;
        return ref;
      }
    }
    if (params.size() >= 16) param_index.emplace(n.get(), static_cast<int>(params.size()));
    params.push_back(n.get());
    param_nodes.push_back(n);
    ref.param = static_cast<int>(params.size()) - 1;
    return ref;
  };
  // Internal references hold their node, so the lock always succeeds.
  auto type_of = [&](const Ref& r) -> const ir::TensorType& {
    if (r.param >= 0) return params[r.param]->type();
    return batch[r.rec]->outs[r.out].result.lock()->type();
  };
  // Per input and per output of every op, flat: op r's start at in_at[r]
  // and out_at[r].
  std::vector<size_t> in_at(batch.size() + 1, 0), out_at(batch.size() + 1, 0);
  for (size_t r = 0; r < batch.size(); ++r) {
    in_at[r + 1] = in_at[r] + batch[r]->inputs.size();
    out_at[r + 1] = out_at[r] + batch[r]->outs.size();
  }
  std::vector<Ref> in_refs(in_at.back()), base_refs(out_at.back());
  for (size_t r = 0; r < batch.size(); ++r) {
    for (size_t i = 0; i < batch[r]->inputs.size(); ++i)
      in_refs[in_at[r] + i] = ref_of(batch[r]->inputs[i].node);
    for (size_t o = 0; o < batch[r]->outs.size(); ++o)
      if (batch[r]->outs[o].base) base_refs[out_at[r] + o] = ref_of(batch[r]->outs[o].base);
  }
  // Results that someone outside this batch still holds are the outputs.
  std::vector<NodePtr> live;
  std::vector<std::pair<int, int>> live_at;
  for (size_t r = 0; r < batch.size(); ++r) {
    for (size_t o = 0; o < batch[r]->outs.size(); ++o) {
      NodePtr n = batch[r]->outs[o].result.lock();
      if (!n) continue;
      const long internal = n->flush_uses_;
      n->flush_uses_ = 0;
      if (n.use_count() - 1 > internal) {
        live.push_back(n);
        live_at.emplace_back(static_cast<int>(r), static_cast<int>(o));
      }
    }
  }
  auto fail_all = [&](const std::string& msg) {
    for (const NodePtr& n : live) {
      n->error_ = msg;
      n->producer_.reset();
    }
  };
  if (!failure.empty()) {  // an input failed earlier: the results carry its error
    fail_all(failure);
    if (capture) {
      capture_broken_ = true;
      return;
    }
    if (CurrentMode() != EagerMode::kDeferAndFuse) throw std::runtime_error(failure);
    return;
  }

  // Offsets of contiguous runs as run-time operands (see HasDynamicOffset).
  const bool blocks = !(capture && !capture->dynamic.empty());
  std::vector<int64_t> offsets;
  std::vector<int> in_offset(in_at.back(), -1), out_offset(out_at.back(), -1);
  for (size_t r = 0; r < batch.size(); ++r) {
    for (size_t i = 0; i < batch[r]->inputs.size(); ++i) {
      const bool dyn =
          HasDynamicOffset(batch[r]->inputs[i].view, type_of(in_refs[in_at[r] + i]), blocks);
      if (dyn) in_offset[in_at[r] + i] = static_cast<int>(offsets.size());
      if (dyn) offsets.push_back(batch[r]->inputs[i].view.offset);
    }
    for (size_t o = 0; o < batch[r]->outs.size(); ++o) {
      const auto& out = batch[r]->outs[o];
      const bool dyn = out.store == Store::kPartial && out.base &&
                       HasDynamicOffset(out.view, type_of(base_refs[out_at[r] + o]), blocks);
      if (dyn) out_offset[out_at[r] + o] = static_cast<int>(offsets.size());
      if (dyn) offsets.push_back(out.view.offset);
    }
  }

  // The key: everything that shapes the program.
  KeyWriter k;
  k.str().reserve(64 + 32 * params.size() + 160 * batch.size());
  k.Int(static_cast<int64_t>(batch.size()));
  for (const BufferNode* p : params) k.Type(p->type());
  auto key_ref = [&](const Ref& ref) {
    k.Int(ref.param);
    k.Int(ref.rec);
    k.Int(ref.out);
  };
  for (size_t r = 0; r < batch.size(); ++r) {
    const PendingOp& p = *batch[r];
    k.Str(p.op.name);
    k.Ints(p.attrs.ints);
    k.Int(static_cast<int64_t>(p.attrs.floats.size()));
    for (double f : p.attrs.floats) k.Double(f);
    k.Str(p.attrs.str);
    k.Int(static_cast<int64_t>(p.inputs.size()));
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      key_ref(in_refs[in_at[r] + i]);
      WriteView(k, p.inputs[i].view, in_offset[in_at[r] + i] >= 0);
    }
    k.Int(static_cast<int64_t>(p.outs.size()));
    for (size_t o = 0; o < p.outs.size(); ++o) {
      const auto& out = p.outs[o];
      k.Type(out.type);
      k.Int(static_cast<int64_t>(out.store));
      if (out.store != Store::kFresh) WriteView(k, out.view, out_offset[out_at[r] + o] >= 0);
      if (out.store == Store::kPartial) {
        key_ref(base_refs[out_at[r] + o]);
        k.Int(out.storage_numel);
      }
    }
  }
  for (const auto& [r, o] : live_at) {
    k.Int(r);
    k.Int(o);
  }
  // The largest tensor that the program reads or that one of its ops makes.
  int64_t largest = 0;
  for (const BufferNode* p : params) largest = std::max(largest, p->type().numel());
  for (const auto& rec : batch)
    for (const auto& out : rec->outs) largest = std::max(largest, out.type.numel());
  const bool quick = largest <= QuickCompileElements();
  k.Int(quick);
  // Bounded dynamism (capture only): (parameter, dim, size) triples.
  std::vector<std::array<int, 3>> dyn;
  if (capture) {
    for (const auto& d : capture->dynamic)
      for (size_t i = 0; i < params.size(); ++i)
        if (params[i] == d.node.get()) dyn.push_back({static_cast<int>(i), d.dim, d.size});
    if (!capture->dynamic.empty()) {
      k.Str("dynamic");
      k.Int(static_cast<int64_t>(capture->sizes.size()));
      for (const auto& t : dyn)
        for (int v : t) k.Int(v);
    }
  }
  const size_t num_sizes = capture && !capture->dynamic.empty() ? capture->sizes.size() : 0;
  std::string name = batch.size() == 1 ? std::string(batch[0]->op.name)
                                        : "fused(" + std::to_string(batch.size()) + " ops, " +
                                              batch[0]->op.name + "...)";
  if (capture) {
    k.Str("graph");
    name = "graph(" + std::to_string(batch.size()) + " ops)";
  }

  auto print = [&]() {
    ir::Builder b;
    std::vector<ir::Value> pvals, offset_vals, size_vals;
    for (const BufferNode* p : params) pvals.push_back(b.Param(p->type()));
    for (size_t i = 0; i < offsets.size(); ++i)
      offset_vals.push_back(b.Param(ir::TensorType{ir::DType::S64, {}}));
    for (size_t i = 0; i < num_sizes; ++i)
      size_vals.push_back(b.Param(ir::TensorType{ir::DType::S32, {}}));
    b.set_dynamic(num_sizes > 0);
    for (const auto& [pi, dim, si] : dyn)
      pvals[pi] = b.Op1("stablehlo.set_dimension_size", {pvals[pi], size_vals[si]},
                        b.type(pvals[pi]), {{"dimension", std::to_string(dim) + " : i64"}});
    std::vector<std::vector<ir::Value>> vals(batch.size());
    auto value_of = [&](const Ref& ref) { return ref.param >= 0 ? pvals[ref.param] : vals[ref.rec][ref.out]; };
    for (size_t r = 0; r < batch.size(); ++r) {
      const PendingOp& p = *batch[r];
      std::vector<ir::Value> ins;
      for (size_t i = 0; i < p.inputs.size(); ++i) {
        ir::Value base = value_of(in_refs[in_at[r] + i]);
        ins.push_back(in_offset[in_at[r] + i] >= 0
                          ? ReadViewAt(b, base, p.inputs[i].view, offset_vals[in_offset[in_at[r] + i]])
                          : ReadView(b, base, p.inputs[i].view));
      }
      std::vector<ir::TensorType> out_types;
      for (const auto& o : p.outs) out_types.push_back(o.type);
      std::vector<ir::Value> outs = p.op.fn(b, ins, p.attrs, out_types);
      if (outs.size() != p.outs.size())
        throw std::logic_error(std::string("lowering of ") + p.op.name + " returned a wrong count");
      for (size_t o = 0; o < p.outs.size(); ++o) {
        const auto& out = p.outs[o];
        ir::Value v = outs[o];
        if (b.type(v) != out.type)
          throw std::logic_error(std::string("lowering of ") + p.op.name + " returned " +
                                 ir::TypeText(b.type(v)) + ", expected " +
                                 ir::TypeText(out.type));
        if (out.store != Store::kFresh)
          v = ir::Reshape(b, ir::Convert(b, v, out.view.dtype), out.view.sizes);
        if (out.store == Store::kPartial) {
          ir::Value base = out.base ? value_of(base_refs[out_at[r] + o])
                                    : ir::Full(b, ir::ConstantI(b, 0, out.view.dtype),
                                               {out.storage_numel});
          v = out_offset[out_at[r] + o] >= 0
                  ? WriteViewAt(b, base, out.view, v, offset_vals[out_offset[out_at[r] + o]])
                  : lazy::WriteView(b, base, out.view, v);
          v = ir::Reshape(b, v, b.type(base).dims);
        }
        vals[r].push_back(v);
      }
    }
    std::vector<ir::Value> results;
    for (const auto& [r, o] : live_at)
      results.push_back(num_sizes ? ir::MakeStatic(b, vals[r][o]) : vals[r][o]);
    return b.Print(results);
  };

  std::shared_ptr<pjrt::Executable> exe;
  try {
    exe = GetExecutable(k.str(), name, print, quick);
  } catch (const std::exception& e) {
    const std::string msg = std::string(e.what()) + "\n(issued by: " + Issued(batch) + ")";
    fail_all(msg);
    throw std::runtime_error(msg);
  }
  Runtime& rt = Runtime::Get();
  std::vector<PJRT_Buffer*> args;
  for (const BufferNode* p : params) args.push_back(p->buffer()->raw());
  std::vector<NodePtr> offset_nodes;  // keep the scalars alive over the call
  for (int64_t off : offsets) {
    offset_nodes.push_back(Scalar(&off, ir::DType::S64));
    args.push_back(offset_nodes.back()->buffer()->raw());
  }
  for (size_t i = 0; i < num_sizes; ++i) {
    offset_nodes.push_back(Scalar(&capture->sizes[i], ir::DType::S32));
    args.push_back(offset_nodes.back()->buffer()->raw());
  }
  std::unique_ptr<pjrt::Event> done;
  std::vector<std::unique_ptr<pjrt::Buffer>> bufs;
  try {
    bufs = exe->Execute(args, {}, &done);
  } catch (const std::exception& e) {
    const std::string msg = "tpu: running " + name + " (issued by: " + Issued(batch) + ") failed: " + e.what();
    fail_all(msg);
    throw std::runtime_error(msg);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.launches;
  }
  done = DoneWithBuffers(std::move(done), bufs);
  std::vector<std::shared_ptr<const void>> hold(param_nodes.begin(), param_nodes.end());
  hold.insert(hold.end(), offset_nodes.begin(), offset_nodes.end());
  for (size_t i = 0; i < live.size(); ++i) {
    live[i]->buffer_ = rt.Track(std::move(bufs[i]));
    live[i]->producer_.reset();
    hold.push_back(live[i]->buffer_);
  }
  if (done) rt.AddPending(std::move(done), std::move(hold));
  if (capture) {
    capture->exe = exe;
    capture->name = name;
    capture->args = std::move(param_nodes);
    capture->args.insert(capture->args.end(), offset_nodes.begin(), offset_nodes.end());
    capture->size_args = static_cast<int>(capture->args.size() - num_sizes);
    capture->results = std::move(live);
    capture->rng.clear();
    for (auto& [weak, refresh] : rng_nodes_) {
      NodePtr n = weak.lock();
      for (size_t i = 0; n && i < capture->args.size(); ++i)
        if (capture->args[i] == n) capture->rng.emplace_back(static_cast<int>(i), refresh);
    }
  }
}

NodePtr Executor::Upload(const void* data, ir::DType dtype, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& byte_strides) {
  Runtime& rt = Runtime::Get();
  auto buf = rt.client().BufferFromHost(data, ToPjrt(dtype), dims, byte_strides);
  return std::make_shared<BufferNode>(ir::TensorType{dtype, dims}, rt.Track(std::move(buf)),
                                      "host-to-device copy");
}

NodePtr Executor::Scalar(const void* bits, ir::DType dtype) {
  const size_t n = ItemSize(dtype);
  std::string key(reinterpret_cast<const char*>(bits), n);
  key += static_cast<char>(dtype);
  {
    std::lock_guard<std::mutex> lock(scalar_mu_);
    auto it = scalars_.find(key);
    if (it != scalars_.end()) return it->second;
  }
  NodePtr node = Upload(bits, dtype, {});
  std::lock_guard<std::mutex> lock(scalar_mu_);
  if (scalars_.size() > 4096) scalars_.clear();
  scalars_.emplace(key, node);
  return node;
}

void Executor::Download(const NodePtr& node, void* dst, size_t nbytes) {
  Materialize(node);
  const auto& buf = node->buffer();
  try {
    buf->ToHost(dst, nbytes);
  } catch (const pjrt::Error& e) {
    throw std::runtime_error(std::string("tpu: ") + node->origin() + " failed: " + e.what());
  }
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
