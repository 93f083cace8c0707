// tpu_dist: the c10d::Backend for tpu tensors (one process per device).
//
// This file holds the host engine, used with plugins that cannot run
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
  TpuDistBackend(c10::intrusive_ptr<c10d::Backend> host, int rank, int size)
      : c10d::Backend(rank, size), host_(std::move(host)) {}

  const std::string getBackendName() const override { return "tpu_dist"; }

  // Sequence numbers (used by TORCH_DISTRIBUTED_DEBUG=DETAIL's collective
  // fingerprint checks) are the host group's.
  void setSequenceNumberForGroup() override { host_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return host_->getSequenceNumberForGroup(); }

  c10::intrusive_ptr<c10d::Work> broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) override {
    Check("broadcast", tensors);
    TensorList h = Host(tensors);
    host_->broadcast(h, opts)->wait();
    Back(tensors, h);
    return Done(c10d::OpType::BROADCAST, tensors);
  }

  c10::intrusive_ptr<c10d::Work> allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) override {
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
    TensorList ho = HostOut(outputs);
    std::vector<TensorList> hi;
    for (const auto& l : inputs) hi.push_back(Host(l));
    host_->scatter(ho, hi, opts)->wait();
    Back(outputs, ho);
    return Done(c10d::OpType::SCATTER, outputs);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
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
    TensorList h = Host(tensors);
    host_->send(h, dst, tag)->wait();
    return Done(c10d::OpType::SEND, tensors);
  }

  c10::intrusive_ptr<c10d::Work> recv(TensorList& tensors, int src, int tag) override {
    TensorList h = HostOut(tensors);
    host_->recv(h, src, tag)->wait();
    Back(tensors, h);
    return Done(c10d::OpType::RECV, tensors);
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    host_->barrier(opts)->wait();
    return Done(c10d::OpType::BARRIER, {});
  }

 private:
  static c10::intrusive_ptr<c10d::Work> Done(c10d::OpType type, const TensorList& result) {
    return c10::make_intrusive<DoneWork>(type, result);
  }
  c10::intrusive_ptr<c10d::Backend> host_;
};

}  // namespace

void RegisterDist(py::module& m) {
  py::class_<TpuDistBackend, c10d::Backend, c10::intrusive_ptr<TpuDistBackend>>(m, "_TpuDistBackend")
      .def(py::init<c10::intrusive_ptr<c10d::Backend>, int, int>(), py::arg("host"), py::arg("rank"),
           py::arg("size"));
}

}  // namespace tpu::dist
