// Records ops and runs them as XLA programs. Every op is recorded as a
// PendingOp whose results are deferred nodes; Flush turns everything
// recorded so far into one program (looked up in the compile cache by a
// structural key, with no MLIR printed on a hit) and launches it
// asynchronously. Strict eager flushes after every op, Debug eager also
// waits, Fused eager flushes only when a value is needed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ir/ir.h"
#include "lazy/disk_cache.h"
#include "lazy/lowering.h"
#include "lazy/node.h"

namespace tpu::pjrt {
class Executable;
enum class ElementType : int;
}

namespace tpu::lazy {

// Where an op's result goes.
struct OutputTarget {
  ir::TensorType type;          // the value the lowering returns
  StorageSlot* slot = nullptr;  // if set: written into this storage through `view`
  ViewSpec view;                // (the value is converted to view.dtype)
};

// A recorded batch that became one program (see Executor::EndCapture).
struct Captured {
  std::shared_ptr<pjrt::Executable> exe;
  std::string name;
  std::string ops;  // the ATen ops it holds (for the profiler)
  int op_count = 0;
  // The program's arguments in order: the nodes the capture read (graph
  // inputs, constants, RNG states, view offsets).
  std::vector<NodePtr> args;
  // The program's results in order: the recorded values still held when
  // the capture ended (graph outputs, new values of mutated inputs).
  std::vector<NodePtr> results;
  // (argument, result) pairs the program declares aliased: the argument is
  // a storage's value the graph overwrites with the result (Program::aliases).
  // Launch donates such an argument when nothing else holds it.
  std::vector<std::pair<int, int>> aliases;
  // Arguments that hold RNG state: at each replay, `refresh` writes the
  // state (two u64 words) for that run.
  std::vector<std::pair<int, std::function<void(uint64_t*)>>> rng;

  // Set before EndCapture for bounded dynamism: inputs whose dimension
  // `dim` holds only `sizes[size]` valid entries of its (upper-bound)
  // length. The program takes the sizes as its last arguments (s32
  // scalars, from `size_args` on) and marks the dimensions with
  // stablehlo.set_dimension_size; XLA's dynamic padder masks the padding.
  struct DynamicDim {
    NodePtr node;
    int dim = 0, size = 0;
  };
  std::vector<DynamicDim> dynamic;
  std::vector<int32_t> sizes;
  int size_args = -1;
};

struct CacheStats {
  // hits: requests served by an executable that an earlier request
  // compiled or loaded (so requests - hits counts the programs this process
  // has asked for); disk_hits: executables loaded from the persistent cache,
  // on demand or ahead of use (prefetched: those loaded ahead, at start-up);
  // disk_refused: stored executables the plugin did not load (set aside);
  // tier_ups: quickly compiled programs recompiled fully once they ran often
  // (GetExecutable; not in `compiles`, their time is in compile_seconds).
  int64_t requests = 0, hits = 0, disk_hits = 0, prefetched = 0, compiles = 0, launches = 0,
          disk_refused = 0, evicted = 0, tier_ups = 0;
  // donated: parameter buffers handed to the programs that overwrote them
  // (in-place updates; their bytes in donated_bytes).
  int64_t donated = 0, donated_bytes = 0;
  int64_t cached = 0;  // executables held in memory now
  double compile_seconds = 0;
  std::vector<std::pair<std::string, double>> entries;  // program name, compile seconds
};

// The PJRT element type of an IR dtype.
pjrt::ElementType ToPjrt(ir::DType t);

class Executor {
 public:
  static Executor& Get();

  // Records one op and, depending on the mode, runs it. Returns one node
  // per output; outputs with a slot have also been stored into it.
  std::vector<NodePtr> Run(const Lowering& op, Attrs attrs, std::vector<Operand> inputs,
                           std::vector<OutputTarget> outputs);
  // Launches everything recorded so far as one program.
  void Flush();
  // Between BeginBatch and EndBatch the calling thread's ops are recorded
  // and not launched, whatever the mode (up to the pending-op limit);
  // EndBatch launches them as one program. Nests. Used by the foreach ops
  // (aten/optim/foreach.cc) in Strict Eager.
  void BeginBatch();
  void EndBatch();
  // Ends a batch without launching it: what it recorded runs with the next
  // launch, so in Strict Eager a small op recorded this way (an index check,
  // aten/indexing/index_checks.h) shares the program of the op that follows.
  void EndBatchDeferred();
  // Makes `node` ready (flushing if it is deferred); raises its error.
  void Materialize(const NodePtr& node);
  size_t pending() const;
  // Ops recorded before a flush is forced (bounds deferred memory).
  void set_max_pending(size_t n) { max_pending_ = n; }

  // A node holding a host array (copied during the call).
  NodePtr Upload(const void* data, ir::DType dtype, const std::vector<int64_t>& dims,
                 const std::vector<int64_t>& byte_strides = {});
  // A 0-d node holding a scalar, from a small cache of recent values.
  NodePtr Scalar(const void* bits, ir::DType dtype);
  // Copies a node's whole value to host memory (blocks; raises its error).
  void Download(const NodePtr& node, void* dst, size_t nbytes);

  // Capture (torch.compile): everything recorded between BeginCapture and
  // EndCapture becomes one program, whatever the eager mode. A forced flush
  // in between (a value needed on the host) breaks the capture: the ops
  // still run correctly, and EndCapture returns false.
  void BeginCapture();
  bool capturing() const { return capturing_; }
  bool EndCapture(Captured* out);
  // Registers a node created for the capture as an RNG state operand.
  void NoteRngState(const NodePtr& node, std::function<void(uint64_t*)> refresh);
  // Runs a captured program on `args` and returns its results, ready nodes.
  // `owners[j]`, where nonzero, is the use count args[j] has when only the
  // caller holds it for a storage that the results overwrite: an aliased
  // argument with that count is donated (see Captured::aliases).
  std::vector<NodePtr> Launch(const Captured& c, const std::vector<NodePtr>& args,
                              const std::vector<long>& owners = {});

  // Called before each op is recorded in Fused Eager; true when the op is
  // the first of a backward pass (the extension also queues a flush for the
  // pass's end), and the ops recorded before it are then launched.
  void set_fused_hook(bool (*hook)()) { fused_hook_ = hook; }

  // The persistent cache. `dir` empty disables it.
  void ConfigureDiskCache(std::string dir);
  const std::string& disk_cache_dir() const { return disk_.dir(); }
  CacheStats stats();
  void ClearCache();  // the in-memory cache only

  // Start-up prefetch. Each program (`name`: the script) keeps a manifest
  // of the executables it asked for first; when the runtime starts, a
  // background thread loads those of its last run from the persistent
  // cache, while the main thread is still importing and building its
  // model. `enabled` false turns it off.
  void SetProgram(std::string name, bool prefetch);
  void StartPrefetch();
  // Stops the background loads (waits for the one in progress) and writes
  // this run's manifest; called at exit.
  void Shutdown();

 private:
  struct Entry;
  std::shared_ptr<Entry> Lookup(const std::string& key, bool* hit);
  // `quick`: compile with the cheap options of small programs
  // (QuickCompileElements in executable_cache.cc); `cause`, on a compile,
  // says why these ops compile again (profiler::RecompileCause).
  std::shared_ptr<pjrt::Executable> GetExecutable(const std::string& key, const std::string& name,
                                                  const std::function<std::string()>& print,
                                                  bool quick = false,
                                                  const std::function<const char*()>& cause = nullptr,
                                                  bool excess_precision = false);
  void TierUp(Entry& entry, const std::string& key, const std::string& name,
              const std::function<std::string()>& print);
  void NoteFirstUseLocked(const std::string& key);
  std::string ManifestName();
  void Prefetch();
  void StopPrefetch();
  void RefuseEntry(const std::string& name, const std::string& error);
  void EvictLocked();
  void FlushLocked(Captured* capture = nullptr);
  // The steps of a flush (lazy/batch.h says which file holds which).
  struct Program;
  static Program BuildProgram(const std::vector<std::shared_ptr<PendingOp>>& batch,
                              const Captured* capture);
  void LaunchProgram(const std::vector<std::shared_ptr<PendingOp>>& batch, Program& prog,
                     Captured* capture);
  static void FailAll(const std::vector<NodePtr>& results, const std::string& msg);
  static const char* CompileCause(const std::vector<std::shared_ptr<PendingOp>>& batch,
                                  const Program& prog);

  // Fused Eager cuts the op stream where it repeats (one layer, one step):
  // once the signatures of the last ops show a period, batches hold a whole
  // number of periods and start at the same phase, so each batch compiles
  // once and then hits the cache.
  bool ShouldCut(uint64_t signature);

  mutable std::recursive_mutex exec_mu_;  // recording and flushing
  std::vector<std::shared_ptr<PendingOp>> pending_;
  size_t max_pending_ = 2048;
  std::vector<uint64_t> history_;  // op signatures, most recent last
  size_t period_ = 0;              // detected period of the stream, 0 if none
  bool capturing_ = false, capture_broken_ = false;
  bool (*fused_hook_)() = nullptr;
  std::vector<std::pair<std::weak_ptr<BufferNode>, std::function<void(uint64_t*)>>> rng_nodes_;

  std::mutex mu_;  // the cache and stats
  std::unordered_map<std::string, std::shared_ptr<Entry>> cache_;
  uint64_t use_clock_ = 0;
  CacheStats stats_;
  DiskCache disk_;
  std::vector<std::string> first_used_;  // entry names, in order of first request

  std::mutex prefetch_mu_;  // the prefetch thread's start and stop
  std::unique_ptr<std::thread> prefetch_;
  int prefetch_pid_ = 0;  // the process that started it (a forked child has no such thread)
  std::atomic<bool> stop_prefetch_{false};
  std::string program_;
  bool prefetch_enabled_ = true;
  std::mutex scalar_mu_;
  std::unordered_map<std::string, NodePtr> scalars_;
};

}  // namespace tpu::lazy
