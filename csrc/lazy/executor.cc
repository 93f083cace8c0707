// Recording ops and deciding when they run: Run records a PendingOp per
// op; Strict and Debug Eager flush at once, Fused Eager where the op
// stream repeats (ShouldCut), at a batch's end or when a value is needed;
// a capture (torch.compile) records one whole graph. FlushLocked hands the
// batch to BuildProgram (program_builder.cc) and LaunchProgram (launch.cc).
#include "lazy/executor.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <unordered_map>

#include "ir/ops.h"
#include "lazy/batch.h"
#include "lazy/modes.h"
#include "lazy/runtime.h"
#include "lazy/views.h"
#include "lazy/where.h"
#include "pjrt/pjrt.h"

namespace tpu::lazy {

namespace {

// FNV-1a steps: the structure hashes of the op stream (Run, ShapeVaryingRuns).
constexpr uint64_t kFnvPrime = 1099511628211ULL;

inline void Mix(uint64_t& h, int64_t v) { h = (h ^ static_cast<uint64_t>(v)) * kFnvPrime; }

}  // namespace

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
    case ir::DType::C32: return E::U32;  // packed (see ir::DType::C32)
    case ir::DType::F8E5M2: return E::F8E5M2;
    case ir::DType::F8E4M3FN: return E::F8E4M3FN;
    case ir::DType::F8E5M2FNUZ: return E::F8E5M2FNUZ;
    case ir::DType::F8E4M3FNUZ: return E::F8E4M3FNUZ;
  }
  return E::INVALID;
}

namespace {
WhereFn g_where = nullptr;
}  // namespace

void SetWhereHook(WhereFn fn) { g_where = fn; }
const std::string* CurrentWhere() { return g_where ? g_where() : nullptr; }

Executor& Executor::Get() {
  static Executor* e = new Executor();  // never destroyed: outlives static teardown
  return *e;
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
        out.prev = o.slot->node;
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
    sig = reinterpret_cast<uintptr_t>(op.name) * kFnvPrime;
    for (int64_t v : rec->attrs.ints) Mix(sig, v);
    for (const Operand& in : rec->inputs) {
      for (int64_t d : in.view.sizes) Mix(sig, d);
      Mix(sig, static_cast<int64_t>(in.view.dtype));
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

namespace {

// Fused Eager batches whose ops repeat with a few shapes changing every time
// (autoregressive decoding: the attention mask grows by one column per
// token while everything else keeps its shape) would compile a whole new
// program per step. Per op sequence (names and attributes, not shapes)
// this remembers the last shapes; once a sequence has come back with other
// shapes twice, and at most one op in 8 changed, the batch runs as runs of
// consecutive ops that kept or changed their shapes: the unchanged runs
// reuse their programs, the changing ones are small (and compile the quick
// way). Guarded by the executor's lock.
struct ShapeHistory {
  std::vector<uint64_t> shapes;  // per op, of the last batch
  int changes = 0;
};

// Split points of `batch` (starts of its runs after the first), or none.
std::vector<size_t> ShapeVaryingRuns(const Batch& batch) {
  static std::unordered_map<uint64_t, ShapeHistory> history;
  uint64_t structure = 14695981039346656037ULL;
  std::vector<uint64_t> shapes(batch.size());
  for (size_t r = 0; r < batch.size(); ++r) {
    const PendingOp& p = *batch[r];
    Mix(structure, static_cast<int64_t>(reinterpret_cast<uintptr_t>(p.op.name)));
    for (int64_t v : p.attrs.ints) Mix(structure, v);
    Mix(structure, static_cast<int64_t>(p.inputs.size()));
    Mix(structure, static_cast<int64_t>(p.outs.size()));
    uint64_t h = 14695981039346656037ULL;
    for (const Operand& in : p.inputs) {
      // The view and what it views (a slice of a growing tensor keeps its
      // shape, but the program's parameter does not).
      Mix(h, static_cast<int64_t>(in.view.dtype));
      for (int64_t d : in.view.sizes) Mix(h, d);
      for (int64_t d : in.view.strides) Mix(h, d);
      Mix(h, in.view.offset);
      if (in.node)
        for (int64_t d : in.node->type().dims) Mix(h, d);
      Mix(h, -1);
    }
    for (const auto& out : p.outs) {
      Mix(h, static_cast<int64_t>(out.type.dtype));
      for (int64_t d : out.type.dims) Mix(h, d);
      Mix(h, -2);
    }
    shapes[r] = h;
  }
  if (history.size() > 4096) history.clear();
  auto [it, fresh] = history.try_emplace(structure);
  ShapeHistory& past = it->second;
  std::vector<size_t> cuts;
  if (!fresh && past.shapes.size() == shapes.size() && past.shapes != shapes) {
    ++past.changes;
    size_t changed = 0;
    for (size_t r = 0; r < shapes.size(); ++r) changed += shapes[r] != past.shapes[r];
    if (past.changes >= 2 && 8 * changed <= shapes.size()) {
      for (size_t r = 1; r < shapes.size(); ++r)
        if ((shapes[r] != past.shapes[r]) != (shapes[r - 1] != past.shapes[r - 1])) cuts.push_back(r);
    }
  }
  past.shapes = std::move(shapes);
  return cuts;
}

}  // namespace

void Executor::FlushLocked(Captured* capture) {
  if (capturing_ && !capture && !pending_.empty()) capture_broken_ = true;
  if (pending_.empty()) return;
  Batch batch;
  batch.swap(pending_);
  pending_.reserve(std::min(batch.size(), max_pending_));  // the next batch is likely as long
  auto run = [&](const Batch& part) {
    Program prog = BuildProgram(part, capture);
    if (!prog.failure.empty()) {  // an input failed earlier: the results carry its error
      FailAll(prog.live, prog.failure);
      if (capture) {
        capture_broken_ = true;
        return;
      }
      if (CurrentMode() != EagerMode::kDeferAndFuse) throw std::runtime_error(prog.failure);
      return;
    }
    LaunchProgram(part, prog, capture);
  };
  std::vector<size_t> cuts;
  if (!capture && batch.size() > 1 && CurrentMode() == EagerMode::kDeferAndFuse)
    cuts = ShapeVaryingRuns(batch);
  if (cuts.empty()) return run(batch);
  cuts.push_back(batch.size());
  size_t begin = 0;
  for (size_t end : cuts) {
    Batch part(batch.begin() + begin, batch.begin() + end);
    for (size_t r = 0; r < part.size(); ++r) part[r]->index = static_cast<int>(r);
    begin = end;
    run(part);
  }
}

}  // namespace tpu::lazy
