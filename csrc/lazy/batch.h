// The executor's internal types (not for kernels): a recorded op
// (PendingOp) and the program a batch of them becomes (Executor::Program).
//   executor.cc         records ops and decides when to flush;
//   program_builder.cc  turns a batch into a program: its parameters,
//                       outputs, cache key and StableHLO text;
//   executable_cache.cc finds or compiles the program's executable;
//   launch.cc           runs it and hands its buffers to the results;
//   sync.cc             waits for results and delivers errors.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lazy/executor.h"

namespace tpu::lazy {

inline size_t ItemSize(ir::DType t) { return t == ir::DType::PRED ? 1 : ir::BitWidth(t) / 8; }

// How an output reaches its storage.
enum class Store : int64_t { kFresh = 0, kWhole = 1, kPartial = 2 };

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
    // kWhole: the storage's previous value, for donation (see
    // Program::aliases); not held, so a value nobody reads dies at once.
    std::weak_ptr<BufferNode> prev;
    int64_t storage_numel = 0;
    std::weak_ptr<BufferNode> result;
  };
  std::vector<Out> outs;
  const std::string* where = nullptr;  // the user's line that issued the op (interned)
};

using Batch = std::vector<std::shared_ptr<PendingOp>>;

// The largest tensor a program may hold to be compiled the quick way
// (executable_cache.cc).
int64_t QuickCompileElements();
// torch.backends.tpu.allow_excess_precision (TORCH_TPU_ALLOW_EXCESS_PRECISION,
// off by default): whether XLA may keep a low-precision intermediate of a
// program (bf16, f16) at higher precision instead of rounding it where
// PyTorch's eager ops would (xla_allow_excess_precision). Part of every
// program's cache key.
bool AllowExcessPrecision();
void SetAllowExcessPrecision(bool allow);
// Whether launches donate the aliased parameters nothing else holds
// (Program::aliases; TORCH_TPU_DONATE, on by default).
bool Donation();
void SetDonation(bool on);

// One batch as a program: where every value comes from, which results
// leave it, and its cache key.
struct Executor::Program {
  // A reference to a value: a parameter, or output `out` of record `rec`.
  struct Ref {
    int param = -1, rec = -1, out = -1;
  };
  std::vector<const BufferNode*> params;  // the program's tensor parameters
  std::vector<NodePtr> param_nodes;       // (held until the launch)
  // References to each parameter from the batch's records (inputs and
  // partial writes' bases): LaunchProgram donates a parameter when nothing
  // outside the batch holds its node.
  std::vector<int> param_refs;
  // Donation: (parameter, output) pairs declared aliased in the program
  // (tf.aliasing_output): the parameter is a storage's previous value, the
  // output its new one, of the same type. Declared from the program's
  // structure (so the key decides it); at launch a parameter that someone
  // still holds is passed as non-donatable and XLA writes a fresh buffer.
  std::vector<std::pair<int, int>> aliases;
  // Per input and per output of every op, flat: op r's start at in_at[r]
  // and out_at[r].
  std::vector<size_t> in_at, out_at;
  std::vector<Ref> in_refs, base_refs;
  // Results that someone outside the batch still holds: the outputs.
  std::vector<NodePtr> live;
  std::vector<std::pair<int, int>> live_at;  // (record, output) of each
  // Offsets of views read or written at a run-time offset (extra s64
  // parameters), and which input / output uses each (-1: static).
  std::vector<int64_t> offsets;
  std::vector<int> in_offset, out_offset;
  // Bounded dynamism (capture only): (parameter, dim, size) triples, and
  // the number of s32 size parameters.
  std::vector<std::array<int, 3>> dyn;
  size_t num_sizes = 0;
  std::string key, name;
  bool quick = false;    // compiled with the cheap options of small programs
  bool excess_precision = false;  // compiled with xla_allow_excess_precision
  std::string failure;   // an input's error: the results carry it, nothing runs

  // The program's StableHLO text (printed only on a cache miss).
  std::string Print(const Batch& batch) const;
};

}  // namespace tpu::lazy
