// Launching programs and handing their buffers to the results: a batch's
// program (LaunchProgram), a captured graph's (Launch), and the uploads of
// host data. Every launch is asynchronous: the runtime holds its inputs
// and outputs until the plugin is done with them.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lazy/batch.h"
#include "lazy/modes.h"
#include "lazy/runtime.h"
#include "pjrt/pjrt.h"
#include "profiler/trace.h"

namespace tpu::lazy {

namespace {
std::atomic<bool> g_donation{[] {
  const char* v = std::getenv("TORCH_TPU_DONATE");
  return v == nullptr || std::strcmp(v, "0") != 0;
}()};
}  // namespace

bool Donation() { return g_donation.load(std::memory_order_relaxed); }
void SetDonation(bool on) { g_donation.store(on); }

namespace {

// Uncounts the buffers of the donated nodes (Runtime::Donated); their bytes.
int64_t Uncount(Runtime& rt, const std::vector<NodePtr>& nodes, const std::vector<int>& donated) {
  int64_t bytes = 0;
  for (int i : donated) bytes += rt.Donated(nodes[i]->buffer());
  return bytes;
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

// Before a program allocates its outputs: the buffers of finished programs
// are released, and if the outputs would raise the memory high-water mark,
// the programs still running are waited for first, so that the buffers
// only they hold (a backward pass's activations, read by the program
// launched at its end; the inputs Strict Eager's host has dropped while
// the device catches up) are gone before the new ones come. The host is
// then not ahead of the device while memory grows; a steady loop, whose
// peak its first iteration set, does not wait. Measured on the GPT
// training step: device peak Strict 163 -> 131 MiB, Fused 289 -> 131,
// compiled 227 -> 135 (CPU eager 131); steps/s, per-op cost and Fused
// generation unchanged.
void ReleaseBeforeGrowing(Runtime& rt, const std::vector<NodePtr>& outputs,
                          const std::vector<NodePtr>& args, const std::vector<int>& donated) {
  rt.Reap();
  int64_t grow = 0;
  for (const NodePtr& n : outputs) grow += static_cast<int64_t>(n->nbytes());
  for (int d : donated) grow -= static_cast<int64_t>(args[d]->nbytes());
  if (grow > 0 && rt.live_bytes() + grow > rt.peak_bytes()) {
    rt.AwaitPending();
    rt.Reap();
  }
}

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

// The ops a program holds, for its kernel event: "aten::mm" for one op,
// "aten::mul.Tensor x4, aten::add.Tensor x2, ..." for a fused batch.
std::vector<profiler::Meta> KernelMeta(const std::vector<std::shared_ptr<PendingOp>>& batch) {
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& p : batch) {
    if (!counts.empty() && counts.back().first == p->op.name) {
      ++counts.back().second;
    } else {
      counts.emplace_back(p->op.name, 1);
    }
  }
  std::string ops;
  for (const auto& [name, n] : counts) ops += (ops.empty() ? "" : ", ") + name + (n > 1 ? " x" + std::to_string(n) : "");
  return {profiler::Meta{"ops", ops}, profiler::Meta{"op count", std::to_string(batch.size()), false}};
}

}  // namespace

// Why a batch compiles: compared with the last compile of the same op
// sequence, its parameters' dtypes, their shapes, the matmul precision, or
// other attributes changed (null: these ops never compiled before).
const char* Executor::CompileCause(const Batch& batch, const Program& prog) {
  std::string ops, types, shapes;
  for (const auto& p : batch) ops.append(p->op.name).push_back(';');
  auto add = [&](const ir::TensorType& t) {
    types += std::to_string(static_cast<int>(t.dtype)) + ",";
    for (int64_t d : t.dims) shapes += std::to_string(d) + "x";
    shapes += ",";
  };
  for (const BufferNode* p : prog.params) add(p->type());
  types += "->";  // then the results (a factory op has no parameters)
  for (const NodePtr& n : prog.live) add(n->type());
  return profiler::RecompileCause(ops, types, shapes, prog.key);
}

void Executor::LaunchProgram(const Batch& batch, Program& prog, Captured* capture) {
  const std::string& name = prog.name;
  auto& params = prog.params;
  auto& param_nodes = prog.param_nodes;
  auto& live = prog.live;
  auto& offsets = prog.offsets;
  const size_t num_sizes = prog.num_sizes;
  std::shared_ptr<pjrt::Executable> exe;
  try {
    exe = GetExecutable(prog.key, prog.name, [&] { return prog.Print(batch); }, prog.quick,
                        [&] { return CompileCause(batch, prog); }, prog.excess_precision);
  } catch (const std::exception& e) {
    const std::string msg = std::string(e.what()) + "\n(issued by: " + Issued(batch) + ")";
    FailAll(prog.live, msg);
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
  // An aliased parameter is donated when nothing outside the batch holds its
  // node: no tensor, view or pending op can read the old value again (the
  // runtime's holds of in-flight launches keep buffers, not nodes, and the
  // plugin orders a donation after the reads already enqueued). Not in a
  // capture's first run: its arguments become the replays' constants.
  std::vector<int64_t> keep;
  std::vector<int> donated;
  for (const auto& [param, out] : prog.aliases) {
    if (Donation() && !capture && param_nodes[param].use_count() == 1 + prog.param_refs[param])
      donated.push_back(param);
    else
      keep.push_back(param);
  }
  std::unique_ptr<pjrt::Event> done;
  std::vector<std::unique_ptr<pjrt::Buffer>> bufs;
  const bool tracing = profiler::Recording();
  const int64_t issued = tracing ? profiler::NowNs() : 0;
  ReleaseBeforeGrowing(rt, live, param_nodes, donated);
  try {
    bufs = exe->Execute(args, keep, &done);
  } catch (const std::exception& e) {
    const std::string msg = "tpu: running " + name + " (issued by: " + Issued(batch) + ") failed: " + e.what();
    FailAll(prog.live, msg);
    throw std::runtime_error(msg);
  }
  const int64_t donated_bytes = Uncount(rt, param_nodes, donated);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.launches;
    stats_.donated += static_cast<int64_t>(donated.size());
    stats_.donated_bytes += donated_bytes;
  }
  done = DoneWithBuffers(std::move(done), bufs);
  if (tracing) profiler::OnLaunch(name, issued, profiler::NowNs(), KernelMeta(batch), done.get());
  std::vector<std::shared_ptr<const void>> hold;
  hold.reserve(param_nodes.size() + offset_nodes.size() + live.size());
  for (const NodePtr& n : param_nodes) hold.push_back(n->buffer_);
  for (const NodePtr& n : offset_nodes) hold.push_back(n->buffer_);
  for (size_t i = 0; i < live.size(); ++i) {
    live[i]->buffer_ = rt.Track(std::move(bufs[i]));
    live[i]->producer_.reset();
    hold.push_back(live[i]->buffer_);
  }
  if (done) rt.AddPending(std::move(done), std::move(hold));
  if (capture) {
    capture->exe = exe;
    capture->name = name;
    capture->ops = KernelMeta(batch)[0].value;
    capture->op_count = static_cast<int>(batch.size());
    capture->args = std::move(param_nodes);
    capture->args.insert(capture->args.end(), offset_nodes.begin(), offset_nodes.end());
    capture->size_args = static_cast<int>(capture->args.size() - num_sizes);
    capture->aliases = prog.aliases;
    capture->results = std::move(live);
    capture->rng.clear();
    for (auto& [weak, refresh] : rng_nodes_) {
      NodePtr n = weak.lock();
      for (size_t i = 0; n && i < capture->args.size(); ++i)
        if (capture->args[i] == n) capture->rng.emplace_back(static_cast<int>(i), refresh);
    }
  }}

std::vector<NodePtr> Executor::Launch(const Captured& c, const std::vector<NodePtr>& args,
                                     const std::vector<long>& owners) {
  std::vector<NodePtr> results;
  if (!c.exe) return results;
  std::vector<PJRT_Buffer*> raw;
  raw.reserve(args.size());
  for (const NodePtr& a : args) {
    Materialize(a);
    raw.push_back(a->buffer()->raw());
  }
  Runtime& rt = Runtime::Get();
  std::vector<int64_t> keep;
  std::vector<int> donated;
  for (const auto& [arg, out] : c.aliases) {
    const long n = static_cast<size_t>(arg) < owners.size() ? owners[arg] : 0;
    if (Donation() && n > 0 && args[arg].use_count() == n)
      donated.push_back(arg);
    else
      keep.push_back(arg);
  }
  std::unique_ptr<pjrt::Event> done;
  std::vector<std::unique_ptr<pjrt::Buffer>> bufs;
  const bool tracing = profiler::Recording();
  const int64_t issued = tracing ? profiler::NowNs() : 0;
  ReleaseBeforeGrowing(rt, c.results, args, donated);
  try {
    bufs = c.exe->Execute(raw, keep, &done);
  } catch (const std::exception& e) {
    throw std::runtime_error("tpu: running " + c.name + " failed: " + e.what());
  }
  const int64_t donated_bytes = Uncount(rt, args, donated);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.launches;
    stats_.donated += static_cast<int64_t>(donated.size());
    stats_.donated_bytes += donated_bytes;
  }
  done = DoneWithBuffers(std::move(done), bufs);
  if (tracing)
    profiler::OnLaunch(c.name, issued, profiler::NowNs(),
                       {profiler::Meta{"ops", c.ops}, profiler::Meta{"op count", std::to_string(c.op_count), false}},
                       done.get());
  std::vector<std::shared_ptr<const void>> hold;
  hold.reserve(args.size() + bufs.size());
  for (const NodePtr& a : args) hold.push_back(a->buffer_);
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

NodePtr Executor::Upload(const void* data, ir::DType dtype, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& byte_strides) {
  Runtime& rt = Runtime::Get();
  const int64_t t0 = profiler::Recording() ? profiler::NowNs() : 0;
  auto buf = rt.client().BufferFromHost(data, ToPjrt(dtype), dims, byte_strides);
  const size_t bytes = ir::TensorType{dtype, dims}.numel() * ItemSize(dtype);
  profiler::Counters& c = profiler::counters();
  c.h2d_copies.fetch_add(1, std::memory_order_relaxed);
  c.h2d_bytes.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  if (t0 != 0 && profiler::Recording()) profiler::OnCopy(true, bytes, t0, profiler::NowNs());
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

}  // namespace tpu::lazy
