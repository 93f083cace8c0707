// tpu_dist: the c10d::Backend for tpu tensors (one process per device),
// with two engines behind it.
//
// The XLA engine (xla_engine.h) runs each collective as a StableHLO program
// on the plugin; its Work completes when the result's buffer is ready.
//
// The host engine is used with plugins that cannot run
// collectives across processes (XLA's CPU plugin): each collective brings
// its tpu tensors to the host, runs the collective with PyTorch's Gloo
// backend (built by the Python side on the same store), and writes the
// results back into the tpu tensors. PREMUL_SUM is applied before a SUM;
// every other reduce op, and every dtype, is Gloo's own.
//
// Each call completes before it returns (the copies back to tpu are
// themselves asynchronous device work), and returns a finished Work whose
// future holds the output tensors, so DDP's and FSDP's future chains work.
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include <ATen/core/ivalue.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <thread>

#include "dist/xla_engine.h"
#include "lazy/node.h"
#include "aten/tensor_bridge.h"
#include "pjrt/pjrt.h"

namespace py = pybind11;

namespace tpu::dist {
namespace {

using at::Tensor;
using TensorList = std::vector<Tensor>;

class DoneWork : public c10d::Work {
 public:
  DoneWork(c10d::OpType type, TensorList result)
      : c10d::Work(-1, type), result_(std::move(result)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
    future_->markCompleted(c10::IValue(result_));
  }
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
  TensorList result() override { return result_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  TensorList result_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// XLA engine: the collective's program has been launched; the work is
// complete when its results are ready on the device. Later device work on
// the outputs is ordered after it by PJRT, as CUDA streams order NCCL's, so
// the future completes at once with the outputs.
class XlaWork : public c10d::Work {
 public:
  XlaWork(c10d::OpType type, TensorList outputs, TensorList results, std::chrono::milliseconds timeout)
      : c10d::Work(-1, type), outputs_(std::move(outputs)), results_(std::move(results)), timeout_(timeout),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
    future_->markCompleted(c10::IValue(outputs_));
  }
  bool isCompleted() override {
    for (const Tensor& t : results_) {
      if (!Buffer(t)->ReadyEvent()->IsReady()) return false;
    }
    return true;
  }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds timeout) override {
    if (timeout == kNoTimeout) timeout = timeout_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!isCompleted()) {
      TORCH_CHECK(std::chrono::steady_clock::now() < deadline, "tpu_dist ", c10d::opTypeToString(retrieveOpType()),
                  ": timed out after ", timeout.count(), " ms waiting for the collective's result "
                  "(another rank may have died or be running different collectives)");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (const Tensor& t : results_) Buffer(t)->ReadyEvent()->Await();  // raises a failed program's error
    return true;
  }
  TensorList result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  static const std::shared_ptr<tpu::pjrt::Buffer>& Buffer(const Tensor& t) {
    return ops::SlotOf(t)->node->buffer();
  }
  TensorList outputs_, results_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

bool OnTpu(const Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

Tensor Host(const Tensor& t) { return OnTpu(t) ? t.cpu() : t; }
TensorList Host(const TensorList& ts) {
  TensorList r;
  r.reserve(ts.size());
  for (const Tensor& t : ts) r.push_back(Host(t));
  return r;
}
// An uninitialized host buffer for an output.
Tensor HostOut(const Tensor& t) { return OnTpu(t) ? at::empty(t.sizes(), t.options().device(at::kCPU)) : t; }
TensorList HostOut(const TensorList& ts) {
  TensorList r;
  for (const Tensor& t : ts) r.push_back(HostOut(t));
  return r;
}
void Back(const Tensor& dst, const Tensor& host) {
  if (dst.unsafeGetTensorImpl() != host.unsafeGetTensorImpl()) const_cast<Tensor&>(dst).copy_(host);
}
void Back(const TensorList& dst, const TensorList& host) {
  for (size_t i = 0; i < dst.size(); ++i) Back(dst[i], host[i]);
}

// PREMUL_SUM: scale the host inputs, then SUM.
c10d::ReduceOp Prepare(const c10d::ReduceOp& op, TensorList& host_inputs) {
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return op;
  auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(s, "tpu_dist: PREMUL_SUM without a factor");
  for (Tensor& t : host_inputs) {
    t = s->tensor_factor.defined() ? t * s->tensor_factor.to(t.device()) : t * s->double_factor;
  }
  return c10d::ReduceOp(c10d::ReduceOp::SUM);
}

void Check(const char* op, const TensorList& ts) {
  for (const Tensor& t : ts)
    TORCH_CHECK(OnTpu(t) || t.device().is_cpu(), "tpu_dist ", op, ": expected tpu tensors, got ",
                t.device());
}

class TpuDistBackend : public c10d::Backend {
 public:
  // Host engine. `check`: a store for the fingerprint exchange, or null;
  // `timeout_s`: the process group's (the fingerprint exchange waits that
  // long, whatever the store's own timeout).
  TpuDistBackend(c10::intrusive_ptr<c10d::Backend> host, int rank, int size, double timeout_s,
                 c10::intrusive_ptr<c10d::Store> check)
      : c10d::Backend(rank, size), host_(std::move(host)), check_(std::move(check)),
        timeout_(static_cast<int64_t>(timeout_s * 1000)) {}
  // XLA engine.
  TpuDistBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeout_s,
                 c10::intrusive_ptr<c10d::Store> check)
      : c10d::Backend(rank, size), xla_(std::make_shared<XlaEngine>(store, rank, size)),
        check_(std::move(check)), timeout_(static_cast<int64_t>(timeout_s * 1000)) {}

  const std::string getBackendName() const override { return "tpu_dist"; }
  std::string engine() const { return xla_ ? "xla" : "host"; }

  // Sequence numbers (used by TORCH_DISTRIBUTED_DEBUG=DETAIL's collective
  // fingerprint checks): the host group's, or counted here.
  void setSequenceNumberForGroup() override {
    if (host_) host_->setSequenceNumberForGroup();
  }
  uint64_t getSequenceNumberForGroup() override {
    return host_ ? host_->getSequenceNumberForGroup() : seq_;
  }

  c10::intrusive_ptr<c10d::Work> broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) override {
    Agree("broadcast " + Describe(tensors) + " root " + std::to_string(opts.rootRank));
    if (xla_) return XBroadcast(tensors, opts);
    Check("broadcast", tensors);
    TensorList h = Host(tensors);
    host_->broadcast(h, opts)->wait();
    Back(tensors, h);
    return Done(c10d::OpType::BROADCAST, tensors);
  }

  c10::intrusive_ptr<c10d::Work> allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) override {
    Agree("allreduce " + Describe(tensors) + " op " + std::to_string(static_cast<int>(opts.reduceOp.op_)));
    if (xla_) return XAllreduce(tensors, opts.reduceOp, c10d::OpType::ALLREDUCE);
    Check("allreduce", tensors);
    TensorList h = Host(tensors);
    c10d::AllreduceOptions o = opts;
    o.reduceOp = Prepare(opts.reduceOp, h);
    host_->allreduce(h, o)->wait();
    Back(tensors, h);
    return Done(c10d::OpType::ALLREDUCE, tensors);
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(TensorList& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    for (Tensor& t : tensors) {
      TensorList one{t};
      allreduce(one, opts);
    }
    return Done(c10d::OpType::ALLREDUCE_COALESCED, tensors);
  }

  c10::intrusive_ptr<c10d::Work> reduce(TensorList& tensors, const c10d::ReduceOptions& opts) override {
    Agree("reduce " + Describe(tensors) + " op " + std::to_string(static_cast<int>(opts.reduceOp.op_)) + " root " + std::to_string(opts.rootRank));
    if (xla_) return XReduce(tensors, opts);
    Check("reduce", tensors);
    TensorList h = Host(tensors);
    c10d::ReduceOptions o = opts;
    o.reduceOp = Prepare(opts.reduceOp, h);
    host_->reduce(h, o)->wait();
    if (getRank() == opts.rootRank) Back(tensors, h);
    return Done(c10d::OpType::REDUCE, tensors);
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<TensorList>& outputs, TensorList& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    Agree("allgather " + Describe(inputs));
    if (xla_) return XAllgather(outputs, inputs);
    Check("allgather", inputs);
    TensorList h = Host(inputs);
    std::vector<TensorList> ho;
    for (const auto& l : outputs) ho.push_back(HostOut(l));
    host_->allgather(ho, h, opts)->wait();
    TensorList flat;
    for (size_t i = 0; i < outputs.size(); ++i) {
      Back(outputs[i], ho[i]);
      flat.insert(flat.end(), outputs[i].begin(), outputs[i].end());
    }
    return Done(c10d::OpType::ALLGATHER, flat);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(Tensor& output, Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    Agree("allgather_into_tensor " + Describe({input}));
    if (xla_) return XAllgatherBase(output, input);
    Tensor ho = HostOut(output), hi = Host(input);
    host_->_allgather_base(ho, hi, opts)->wait();
    Back(output, ho);
    return Done(c10d::OpType::_ALLGATHER_BASE, {output});
  }

  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                 const c10d::AllgatherOptions& opts) override {
    for (size_t i = 0; i < outputs.size(); ++i) _allgather_base(outputs[i], inputs[i], opts);
    return Done(c10d::OpType::COALESCED, outputs);
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<TensorList>& outputs, TensorList& inputs,
                                                     const c10d::AllgatherOptions& opts) override {
    TensorList flat;
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::vector<TensorList> out{outputs[i]};
      TensorList in{inputs[i]};
      allgather(out, in, opts);
      flat.insert(flat.end(), outputs[i].begin(), outputs[i].end());
    }
    return Done(c10d::OpType::ALLGATHER_COALESCED, flat);
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<TensorList>& outputs, TensorList& inputs,
                                        const c10d::GatherOptions& opts) override {
    Agree("gather " + Describe(inputs) + " root " + std::to_string(opts.rootRank));
    if (xla_) return XGather(outputs, inputs, opts);
    TensorList h = Host(inputs);
    std::vector<TensorList> ho;
    for (const auto& l : outputs) ho.push_back(HostOut(l));
    host_->gather(ho, h, opts)->wait();
    TensorList flat;
    for (size_t i = 0; i < outputs.size(); ++i) {
      Back(outputs[i], ho[i]);
      flat.insert(flat.end(), outputs[i].begin(), outputs[i].end());
    }
    return Done(c10d::OpType::GATHER, flat);
  }

  c10::intrusive_ptr<c10d::Work> scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    Agree("scatter " + Describe(outputs) + " root " + std::to_string(opts.rootRank));
    if (xla_) return XScatter(outputs, inputs, opts);
    TensorList ho = HostOut(outputs);
    std::vector<TensorList> hi;
    for (const auto& l : inputs) hi.push_back(Host(l));
    host_->scatter(ho, hi, opts)->wait();
    Back(outputs, ho);
    return Done(c10d::OpType::SCATTER, outputs);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    Agree("reduce_scatter " + Describe(outputs) + " op " + std::to_string(static_cast<int>(opts.reduceOp.op_)));
    if (xla_) return XReduceScatter(outputs, inputs, opts);
    TensorList ho = HostOut(outputs);
    std::vector<TensorList> hi;
    c10d::ReduceScatterOptions o = opts;
    for (const auto& l : inputs) {
      hi.push_back(Host(l));
      o.reduceOp = Prepare(opts.reduceOp, hi.back());
    }
    host_->reduce_scatter(ho, hi, o)->wait();
    Back(outputs, ho);
    return Done(c10d::OpType::REDUCE_SCATTER, outputs);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(Tensor& output, Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    Agree("reduce_scatter_tensor " + Describe({output}) + " op " + std::to_string(static_cast<int>(opts.reduceOp.op_)));
    if (xla_) return XReduceScatterBase(output, input, opts.reduceOp);
    Tensor ho = HostOut(output);
    TensorList hi{Host(input)};
    c10d::ReduceScatterOptions o = opts;
    o.reduceOp = Prepare(opts.reduceOp, hi);
    host_->_reduce_scatter_base(ho, hi[0], o)->wait();
    Back(output, ho);
    return Done(c10d::OpType::_REDUCE_SCATTER_BASE, {output});
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(TensorList& outputs, TensorList& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    for (size_t i = 0; i < outputs.size(); ++i) _reduce_scatter_base(outputs[i], inputs[i], opts);
    return Done(c10d::OpType::COALESCED, outputs);
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(Tensor& output, Tensor& input, std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits,
                                               const c10d::AllToAllOptions& opts) override {
    Agree(std::string("alltoall_base ") + c10::toString(input.scalar_type()));
    if (xla_) return XAlltoallBase(output, input, out_splits, in_splits);
    Tensor ho = HostOut(output), hi = Host(input);
    host_->alltoall_base(ho, hi, out_splits, in_splits, opts)->wait();
    Back(output, ho);
    return Done(c10d::OpType::ALLTOALL_BASE, {output});
  }

  c10::intrusive_ptr<c10d::Work> alltoall(TensorList& outputs, TensorList& inputs,
                                          const c10d::AllToAllOptions& opts) override {
    // As one alltoall_base over the flattened tensors, so that the pieces
    // may differ in size (Gloo's list form needs equal sizes).
    TORCH_CHECK(inputs.size() == outputs.size() && !inputs.empty(),
                "tpu_dist alltoall: expected one input and one output tensor per rank");
    Agree(std::string("alltoall ") + c10::toString(inputs[0].scalar_type()));
    if (xla_) return XAlltoall(outputs, inputs);
    TensorList flat_in;
    std::vector<int64_t> in_splits, out_splits;
    for (const Tensor& t : inputs) {
      TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(), "tpu_dist alltoall: mixed dtypes");
      flat_in.push_back(Host(t).reshape(-1));
      in_splits.push_back(t.numel());
    }
    int64_t total = 0;
    for (const Tensor& t : outputs) {
      out_splits.push_back(t.numel());
      total += t.numel();
    }
    Tensor hi = at::cat(flat_in);
    Tensor ho = at::empty({total}, hi.options());
    {
      // Gloo may move from the split vectors: give it copies.
      std::vector<int64_t> out_copy = out_splits, in_copy = in_splits;
      host_->alltoall_base(ho, hi, out_copy, in_copy, opts)->wait();
    }
    int64_t offset = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      Back(outputs[i], ho.narrow(0, offset, out_splits[i]).view(outputs[i].sizes()));
      offset += out_splits[i];
    }
    return Done(c10d::OpType::ALLTOALL, outputs);
  }

  c10::intrusive_ptr<c10d::Work> send(TensorList& tensors, int dst, int tag) override {
    if (xla_) return XSendRecv(tensors, getRank(), dst, c10d::OpType::SEND);
    TensorList h = Host(tensors);
    host_->send(h, dst, tag)->wait();
    return Done(c10d::OpType::SEND, tensors);
  }

  c10::intrusive_ptr<c10d::Work> recv(TensorList& tensors, int src, int tag) override {
    if (xla_) return XSendRecv(tensors, src, getRank(), c10d::OpType::RECV);
    TensorList h = HostOut(tensors);
    host_->recv(h, src, tag)->wait();
    Back(tensors, h);
    return Done(c10d::OpType::RECV, tensors);
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    Agree("barrier");
    if (xla_) return XBarrier();
    host_->barrier(opts)->wait();
    return Done(c10d::OpType::BARRIER, {});
  }

  // --- fingerprint check ------------------------------------------------------
  //
  // Before each collective every rank publishes what it is about to run
  // (op, dtypes, shapes, reduce op, root) under the collective's number and
  // reads everyone's; if they differ, every rank raises the same error
  // instead of entering mismatched programs and hanging. A rank that died
  // never publishes: the others raise when the store's wait times out.
  static std::string Describe(const TensorList& ts) {
    std::string out;
    for (const Tensor& t : ts) {
      out += std::string(c10::toString(t.scalar_type())) + "[";
      for (int64_t i = 0; i < t.dim(); ++i) out += (i ? "," : "") + std::to_string(t.size(i));
      out += "]";
    }
    return out;
  }
  void Agree(const std::string& what) {
    if (!check_) return;
    const uint64_t n = ++checked_;
    const std::string prefix = std::to_string(n) + "/";
    check_->set(prefix + std::to_string(getRank()), std::vector<uint8_t>(what.begin(), what.end()));
    std::vector<std::string> keys;
    for (int r = 0; r < getSize(); ++r) keys.push_back(prefix + std::to_string(r));
    std::vector<std::vector<uint8_t>> all;
    try {
      check_->wait(keys, timeout_);
      all = check_->multiGet(keys);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "tpu_dist: collective #", n, " (", what, "): not every rank reached it within the "
                  "process group's timeout of ", timeout_.count() / 1000.0,
                  " s (a rank may have died or be stuck): ", e.what());
    }
    bool same = true;
    for (const auto& v : all) same &= std::string(v.begin(), v.end()) == what;
    if (n > 2) check_->deleteKey(std::to_string(n - 2) + "/" + std::to_string(getRank()));
    if (same) return;
    // Every rank has read the fingerprints once all have acknowledged; only
    // then may one raise (and perhaps exit, taking the store's server with
    // it when it is rank 0).
    try {
      const std::string ack = "ack/" + std::to_string(n) + "/";
      check_->set(ack + std::to_string(getRank()), std::vector<uint8_t>{1});
      std::vector<std::string> acks;
      for (int r = 0; r < getSize(); ++r) acks.push_back(ack + std::to_string(r));
      check_->wait(acks, std::chrono::seconds(30));
    } catch (const std::exception&) {
      // The mismatch is known either way.
    }
    std::string msg;
    for (int r = 0; r < getSize(); ++r) {
      msg += "\n  rank " + std::to_string(r) + ": " + std::string(all[r].begin(), all[r].end());
    }
    TORCH_CHECK(false, "tpu_dist: the ranks are running different collectives (collective #", n,
                "); every rank raises this error instead of hanging:", msg);
  }

  // --- XLA engine -----------------------------------------------------------

  struct XReduceArgs {
    Reduce reduce;
    std::optional<double> factor;
    Tensor input;
  };
  static XReduceArgs XReduceOf(const c10d::ReduceOp& op, const Tensor& t) {
    switch (op.op_) {
      case c10d::ReduceOp::SUM: return {Reduce::kSum, {}, t};
      case c10d::ReduceOp::AVG: return {Reduce::kAvg, {}, t};
      case c10d::ReduceOp::PRODUCT: return {Reduce::kProduct, {}, t};
      case c10d::ReduceOp::MIN: return {Reduce::kMin, {}, t};
      case c10d::ReduceOp::MAX: return {Reduce::kMax, {}, t};
      case c10d::ReduceOp::PREMUL_SUM: {
        auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
        TORCH_CHECK(s, "tpu_dist: PREMUL_SUM without a factor");
        if (s->tensor_factor.defined()) return {Reduce::kSum, {}, t * s->tensor_factor.to(t.device())};
        return {Reduce::kPremulSum, s->double_factor, t};
      }
      default:
        TORCH_CHECK(false, "tpu_dist: reduce op ", static_cast<int>(op.op_), " is not supported by the XLA "
                    "engine (SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM are)");
    }
  }
  static void Into(const Tensor& dst, const Tensor& flat) {
    const_cast<Tensor&>(dst).copy_(flat.view(dst.sizes()));
  }
  static Tensor Flat(const TensorList& ts) {
    TensorList flat;
    for (const Tensor& t : ts) flat.push_back(t.reshape(-1));
    return flat.size() == 1 ? flat[0] : at::cat(flat);
  }
  c10::intrusive_ptr<c10d::Work> XDone(c10d::OpType type, TensorList outputs, TensorList results) {
    ++seq_;
    return c10::make_intrusive<XlaWork>(type, std::move(outputs), std::move(results), timeout_);
  }

  c10::intrusive_ptr<c10d::Work> XAllreduce(TensorList& tensors, const c10d::ReduceOp& op, c10d::OpType type) {
    TensorList results;
    for (Tensor& t : tensors) {
      XReduceArgs a = XReduceOf(op, t);
      results.push_back(xla_->AllReduce(a.input, a.reduce, a.factor));
      Into(t, results.back());
    }
    return XDone(type, tensors, results);
  }

  c10::intrusive_ptr<c10d::Work> XReduce(TensorList& tensors, const c10d::ReduceOptions& opts) {
    TensorList results;
    for (Tensor& t : tensors) {
      XReduceArgs a = XReduceOf(opts.reduceOp, t);
      results.push_back(xla_->AllReduce(a.input, a.reduce, a.factor));
      if (getRank() == opts.rootRank) Into(t, results.back());
    }
    return XDone(c10d::OpType::REDUCE, tensors, results);
  }

  c10::intrusive_ptr<c10d::Work> XBroadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) {
    TensorList results;
    for (Tensor& t : tensors) {
      results.push_back(xla_->Broadcast(t, static_cast<int>(opts.rootRank)));
      if (getRank() != opts.rootRank) Into(t, results.back());
    }
    return XDone(c10d::OpType::BROADCAST, tensors, results);
  }

  c10::intrusive_ptr<c10d::Work> XAllgather(std::vector<TensorList>& outputs, TensorList& inputs) {
    TORCH_CHECK(outputs.size() == inputs.size(), "tpu_dist allgather: one output list per input");
    TensorList results, flat;
    for (size_t i = 0; i < inputs.size(); ++i) {
      TORCH_CHECK(static_cast<int>(outputs[i].size()) == getSize(),
                  "tpu_dist allgather: expected ", getSize(), " output tensors, got ", outputs[i].size());
      results.push_back(xla_->AllGather(inputs[i]));
      const int64_t n = inputs[i].numel();
      for (int r = 0; r < getSize(); ++r) Into(outputs[i][r], results.back().narrow(0, r * n, n));
      flat.insert(flat.end(), outputs[i].begin(), outputs[i].end());
    }
    return XDone(c10d::OpType::ALLGATHER, flat, results);
  }

  c10::intrusive_ptr<c10d::Work> XAllgatherBase(Tensor& output, Tensor& input) {
    TORCH_CHECK(output.numel() == input.numel() * getSize(), "tpu_dist _allgather_base: the output must "
                "hold group size (", getSize(), ") times the input's elements");
    Tensor r = xla_->AllGather(input);
    Into(output, r);
    return XDone(c10d::OpType::_ALLGATHER_BASE, {output}, {r});
  }

  c10::intrusive_ptr<c10d::Work> XGather(std::vector<TensorList>& outputs, TensorList& inputs,
                                         const c10d::GatherOptions& opts) {
    TORCH_CHECK(inputs.size() == 1, "tpu_dist gather: expected one input tensor");
    Tensor r = xla_->AllGather(inputs[0]);
    TensorList flat;
    if (getRank() == opts.rootRank) {
      TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                  "tpu_dist gather: the root needs one output tensor per rank");
      const int64_t n = inputs[0].numel();
      for (int k = 0; k < getSize(); ++k) Into(outputs[0][k], r.narrow(0, k * n, n));
      flat = outputs[0];
    }
    return XDone(c10d::OpType::GATHER, flat, {r});
  }

  c10::intrusive_ptr<c10d::Work> XScatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                          const c10d::ScatterOptions& opts) {
    TORCH_CHECK(outputs.size() == 1, "tpu_dist scatter: expected one output tensor");
    Tensor in;
    if (getRank() == opts.rootRank) {
      TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                  "tpu_dist scatter: the root needs one input tensor per rank");
      in = Flat(inputs[0]);
    } else {
      in = at::zeros({outputs[0].numel() * getSize()}, outputs[0].options());
    }
    Tensor r = xla_->Scatter(in, static_cast<int>(opts.rootRank));
    Into(outputs[0], r);
    return XDone(c10d::OpType::SCATTER, outputs, {r});
  }

  c10::intrusive_ptr<c10d::Work> XReduceScatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                const c10d::ReduceScatterOptions& opts) {
    TORCH_CHECK(outputs.size() == inputs.size(), "tpu_dist reduce_scatter: one input list per output");
    TensorList results;
    for (size_t i = 0; i < outputs.size(); ++i) {
      TORCH_CHECK(static_cast<int>(inputs[i].size()) == getSize(), "tpu_dist reduce_scatter: expected ",
                  getSize(), " input tensors, got ", inputs[i].size());
      XReduceArgs a = XReduceOf(opts.reduceOp, Flat(inputs[i]));
      results.push_back(xla_->ReduceScatter(a.input, a.reduce, a.factor));
      Into(outputs[i], results.back());
    }
    return XDone(c10d::OpType::REDUCE_SCATTER, outputs, results);
  }

  c10::intrusive_ptr<c10d::Work> XReduceScatterBase(Tensor& output, Tensor& input, const c10d::ReduceOp& op) {
    TORCH_CHECK(input.numel() == output.numel() * getSize(), "tpu_dist _reduce_scatter_base: the input "
                "must hold group size (", getSize(), ") times the output's elements");
    XReduceArgs a = XReduceOf(op, input);
    Tensor r = xla_->ReduceScatter(a.input, a.reduce, a.factor);
    Into(output, r);
    return XDone(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, {r});
  }

  // Uneven splits (rows of dim 0) go through one all_to_all of pieces padded
  // to the largest piece of any rank (found with a MAX all_reduce).
  c10::intrusive_ptr<c10d::Work> XAlltoallBase(Tensor& output, Tensor& input, const std::vector<int64_t>& out_splits,
                                               const std::vector<int64_t>& in_splits) {
    const int g = getSize();
    if (out_splits.empty() && in_splits.empty()) {
      TORCH_CHECK(input.numel() == output.numel() && input.dim() > 0 && input.size(0) % g == 0,
                  "tpu_dist alltoall_base: the first dimension must be divisible by the group size");
      Tensor r = xla_->AllToAll(input);
      Into(output, r);
      return XDone(c10d::OpType::ALLTOALL_BASE, {output}, {r});
    }
    TORCH_CHECK(static_cast<int>(out_splits.size()) == g && static_cast<int>(in_splits.size()) == g,
                "tpu_dist alltoall_base: expected ", g, " input and output splits");
    const int64_t inner = input.dim() > 0 && input.size(0) > 0 ? input.numel() / input.size(0) : 1;
    int64_t local = 0;
    for (int64_t v : in_splits) local = std::max(local, v);
    for (int64_t v : out_splits) local = std::max(local, v);
    Tensor m = at::full({1}, local, input.options().dtype(at::kLong));
    const int64_t rows = xla_->AllReduce(m, Reduce::kMax).cpu().item<int64_t>();
    Tensor flat = input.reshape(-1);
    TensorList padded;
    int64_t off = 0;
    for (int j = 0; j < g; ++j) {
      Tensor piece = flat.narrow(0, off * inner, in_splits[j] * inner);
      padded.push_back(at::constant_pad_nd(piece, {0, (rows - in_splits[j]) * inner}));
      off += in_splits[j];
    }
    Tensor r = xla_->AllToAll(at::cat(padded));
    TensorList pieces;
    for (int j = 0; j < g; ++j) pieces.push_back(r.narrow(0, j * rows * inner, out_splits[j] * inner));
    Into(output, at::cat(pieces));
    return XDone(c10d::OpType::ALLTOALL_BASE, {output}, {r});
  }

  c10::intrusive_ptr<c10d::Work> XAlltoall(TensorList& outputs, TensorList& inputs) {
    std::vector<int64_t> in_splits, out_splits;
    int64_t total = 0;
    for (const Tensor& t : inputs) in_splits.push_back(t.numel());
    for (const Tensor& t : outputs) {
      out_splits.push_back(t.numel());
      total += t.numel();
    }
    Tensor in = Flat(inputs);
    Tensor out = at::empty({total}, in.options());
    auto work = XAlltoallBase(out, in, out_splits, in_splits);
    int64_t off = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      Into(outputs[i], out.narrow(0, off, out_splits[i]));
      off += out_splits[i];
    }
    return work;
  }

  c10::intrusive_ptr<c10d::Work> XSendRecv(TensorList& tensors, int src, int dst, c10d::OpType type) {
    TensorList results;
    for (Tensor& t : tensors) {
      results.push_back(xla_->SendRecv(t, src, dst));
      if (type == c10d::OpType::RECV) Into(t, results.back());
    }
    return XDone(type, tensors, results);
  }

  c10::intrusive_ptr<c10d::Work> XBarrier() {
    Tensor one = at::zeros({1}, at::TensorOptions().device(c10::DeviceType::PrivateUse1).dtype(at::kFloat));
    xla_->AllReduce(one, Reduce::kSum).cpu();  // returns once every rank has joined
    ++seq_;
    return Done(c10d::OpType::BARRIER, {});
  }

 private:
  static c10::intrusive_ptr<c10d::Work> Done(c10d::OpType type, const TensorList& result) {
    return c10::make_intrusive<DoneWork>(type, result);
  }
  c10::intrusive_ptr<c10d::Backend> host_;
  std::shared_ptr<XlaEngine> xla_;
  c10::intrusive_ptr<c10d::Store> check_;
  uint64_t checked_ = 0;
  std::chrono::milliseconds timeout_{std::chrono::minutes(30)};
  uint64_t seq_ = 0;
};

}  // namespace

void RegisterDist(py::module& m) {
  py::class_<TpuDistBackend, c10d::Backend, c10::intrusive_ptr<TpuDistBackend>>(m, "_TpuDistBackend")
      .def(py::init<c10::intrusive_ptr<c10d::Backend>, int, int, double, c10::intrusive_ptr<c10d::Store>>(),
           py::arg("host"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"), py::arg("check"))
      .def(py::init<const c10::intrusive_ptr<c10d::Store>&, int, int, double, c10::intrusive_ptr<c10d::Store>>(),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"), py::arg("check"))
      .def_property_readonly("engine", &TpuDistBackend::engine);
  RegisterDistClientOptions();
}

}  // namespace tpu::dist
