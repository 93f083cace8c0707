// Graph capture for torch.compile(backend="tpu"). The first call of a graph
// runs its ATen ops through the ordinary kernels while the executor records
// without launching; the recorded batch becomes one program (through the
// same compile caches as eager). The capture also notes where each of the
// program's arguments came from (a graph input, a constant, an RNG state)
// and where each result goes (a graph output, the new value of a mutated
// input), so later calls with the same input signature launch the program
// directly, without running the graph's Python or the kernels again.
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <pybind11/stl.h>

#include <array>
#include <cstring>
#include <unordered_map>

#include "device/allocator.h"
#include "lazy/executor.h"
#include "aten/tensor_bridge.h"
#include "aten/indexing/index_checks.h"
#include "aten/precision.h"

namespace py = pybind11;

namespace tpu::ops {
namespace {

bool IsTpu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

// Everything about the arguments that the captured program depends on.
// Small CPU tensors (Dynamo's unspecialized scalars) count by value: their
// values are folded into the program when they are read. A larger CPU
// tensor cannot be captured (its data would be folded in too).
struct Signature {
  std::vector<int64_t> words;
  bool capturable = true;

  static Signature Of(const py::list& args) {
    Signature s;
    std::vector<const void*> slots;
    auto add_ints = [&](c10::IntArrayRef v) {
      s.words.push_back(static_cast<int64_t>(v.size()));
      s.words.insert(s.words.end(), v.begin(), v.end());
    };
    s.words.push_back(static_cast<int64_t>(CurrentPrecision()));
    for (size_t i = 0; i < args.size(); ++i) {
      py::handle h = args[i];
      if (THPVariable_Check(h.ptr())) {
        const at::Tensor& t = THPVariable_Unpack(h.ptr());
        if (!t.defined()) {
          s.words.push_back(7);
          continue;
        }
        s.words.push_back(IsTpu(t) ? 1 : 2);
        s.words.push_back(static_cast<int64_t>(t.scalar_type()));
        add_ints(t.sizes());
        add_ints(t.strides());
        if (IsTpu(t)) {
          s.words.push_back(t.storage_offset());
          lazy::StorageSlot* slot = SlotOf(t);
          s.words.push_back(slot ? static_cast<int64_t>(slot->nbytes) : -1);
          s.words.push_back(slot && slot->node ? 1 : 0);
          int64_t alias = -1;
          for (size_t j = 0; j < slots.size() && slot; ++j)
            if (slots[j] == slot) alias = static_cast<int64_t>(j);
          s.words.push_back(alias);
          slots.push_back(slot);
        } else {
          slots.push_back(nullptr);
          if (t.numel() > 16 || !t.is_contiguous()) {
            s.capturable = false;
            continue;
          }
          std::vector<int64_t> bits((t.nbytes() + 7) / 8, 0);
          std::memcpy(bits.data(), t.data_ptr(), t.nbytes());
          s.words.insert(s.words.end(), bits.begin(), bits.end());
        }
      } else {
        slots.push_back(nullptr);
        if (h.is_none()) {
          s.words.push_back(3);
        } else if (py::isinstance<py::bool_>(h)) {
          s.words.push_back(4);
          s.words.push_back(h.cast<bool>());
        } else if (py::isinstance<py::int_>(h)) {
          s.words.push_back(5);
          s.words.push_back(h.cast<int64_t>());
        } else if (py::isinstance<py::float_>(h)) {
          s.words.push_back(6);
          double d = h.cast<double>();
          int64_t bits;
          std::memcpy(&bits, &d, sizeof bits);
          s.words.push_back(bits);
        } else {
          s.capturable = false;  // SymInts, generators, ...
        }
      }
    }
    return s;
  }
};

// A tensor's view of its storage.
struct View {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  at::ScalarType dtype = at::kFloat;
  static View Of(const at::Tensor& t) {
    return {t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.scalar_type()};
  }
};

class CapturedGraph {
 public:
  // Starts recording: from here on the executor launches nothing.
  // `dynamic`: (input, dim, size index) triples of bounded dynamic sizes;
  // `sizes`: their values in this call (see lazy::Captured::dynamic).
  CapturedGraph(const py::list& args, const std::vector<std::array<int, 3>>& dynamic,
                const std::vector<int32_t>& sizes)
      : sig_(Signature::Of(args)) {
    for (size_t i = 0; i < args.size(); ++i) {
      lazy::StorageSlot* slot = nullptr;
      lazy::NodePtr node;
      if (THPVariable_Check(args[i].ptr())) {
        const at::Tensor& t = THPVariable_Unpack(args[i].ptr());
        if (t.defined() && IsTpu(t) && (slot = SlotOf(t))) node = slot->node;
      }
      in_slots_.push_back(slot);
      in_nodes_.push_back(node);
    }
    for (const auto& [i, dim, k] : dynamic) {
      TORCH_CHECK(i >= 0 && i < static_cast<int>(args.size()) && k >= 0 &&
                      k < static_cast<int>(sizes.size()),
                  "tpu: bad dynamic-size specification");
      const at::Tensor& t = THPVariable_Unpack(args[i].ptr());
      lazy::NodePtr& node = in_nodes_[i];
      // The dimension must be the parameter's own: the tensor must cover its
      // storage, contiguously.
      TORCH_CHECK(node && t.is_contiguous() && t.storage_offset() == 0 &&
                      static_cast<size_t>(t.nbytes()) == node->nbytes() && dim >= 0 &&
                      dim < t.dim(),
                  "tpu: input ", i, " of a graph with dynamic sizes must be a whole contiguous "
                  "tensor");
      const ir::TensorType type{ToIr(t.scalar_type()), t.sizes().vec()};
      if (node->type() != type) {
        // The same bytes as a node of the tensor's own shape.
        lazy::Executor::Get().Materialize(node);
        lazy::NodePtr same = std::make_shared<lazy::BufferNode>(type, node->buffer(), node->origin());
        for (size_t j = 0; j < in_slots_.size(); ++j)
          if (in_slots_[j] == in_slots_[i]) in_nodes_[j] = same;
        in_slots_[i]->node = same;
      }
      cap_.dynamic.push_back({node, dim, k});
    }
    cap_.sizes = sizes;
    index_mark_ = MarkIndexChecks();
    lazy::Executor::Get().BeginCapture();
    active_ = true;
  }
  ~CapturedGraph() { Abort(); }

  // Ends a capture whose graph raised: what was recorded still runs.
  void Abort() {
    if (!active_) return;
    active_ = false;
    lazy::Captured ignored;
    try {
      lazy::Executor::Get().EndCapture(&ignored);
    } catch (...) {
    }
  }

  // Ends the capture (launching the program for this call) and works out
  // the replay plan. False if this graph cannot be replayed; the call's
  // results are correct either way.
  bool Finish(const py::list& args, const py::object& outputs) {
    TORCH_CHECK(active_, "tpu: capture already finished");
    active_ = false;
    const bool ok = lazy::Executor::Get().EndCapture(&cap_);
    if (!ok || !sig_.capturable) return false;
    std::unordered_map<const lazy::BufferNode*, int> result_index, arg_index;
    for (size_t k = 0; k < cap_.results.size(); ++k) result_index[cap_.results[k].get()] = k;
    for (size_t j = 0; j < cap_.args.size(); ++j) arg_index[cap_.args[j].get()] = j;

    // Program arguments: graph inputs, RNG states or constants.
    arg_src_.assign(cap_.args.size(), -1);
    for (size_t j = 0; j < cap_.args.size(); ++j)
      for (size_t i = 0; i < in_nodes_.size(); ++i)
        if (in_nodes_[i] && in_nodes_[i] == cap_.args[j]) {
          arg_src_[j] = static_cast<int>(i);
          break;
        }
    for (const auto& [j, refresh] : cap_.rng) arg_src_[j] = -2;
    if (!cap_.dynamic.empty())
      for (size_t j = cap_.size_args; j < cap_.args.size(); ++j) arg_src_[j] = -3;

    // Index checks (aten/indexing/index_checks.h): the device record in and out.
    index_checks_ = IndexChecksSince(index_mark_);
    if (!index_checks_.checks.empty()) {
      auto a = arg_index.find(index_mark_.record.get());
      auto r = result_index.find(index_checks_.record.get());
      if (a == arg_index.end() || r == result_index.end()) return false;
      arg_src_[a->second] = -4;
      record_result_ = r->second;
    }

    // Inputs the graph wrote to (copy_ into a parameter, running stats).
    for (size_t i = 0; i < in_slots_.size(); ++i) {
      lazy::StorageSlot* slot = in_slots_[i];
      if (!slot || slot->node == in_nodes_[i]) continue;
      bool seen = false;
      for (size_t j = 0; j < i; ++j) seen |= in_slots_[j] == slot;
      if (seen) continue;
      auto it = result_index.find(slot->node.get());
      if (it == result_index.end()) return false;
      mutated_.emplace_back(static_cast<int>(i), it->second);
    }

    // Graph outputs.
    py::sequence outs = outputs.cast<py::sequence>();
    std::unordered_map<lazy::StorageSlot*, int> groups;
    for (size_t n = 0; n < outs.size(); ++n) {
      py::object o = outs[n];
      Out out;
      if (o.is_none()) {
        out.kind = Out::kNone;
      } else if (THPVariable_Check(o.ptr())) {
        const at::Tensor& t = THPVariable_Unpack(o.ptr());
        if (!t.defined() || !IsTpu(t)) return false;
        out.view = View::Of(t);
        lazy::StorageSlot* slot = SlotOf(t);
        if (!slot) return false;
        for (size_t i = 0; i < in_slots_.size() && out.kind == Out::kNone; ++i)
          if (in_slots_[i] == slot) {
            out.kind = Out::kInputView;
            out.index = static_cast<int>(i);
          }
        if (out.kind == Out::kNone) {
          out.kind = Out::kFresh;
          out.nbytes = slot->nbytes;
          auto g = groups.find(slot);
          if (g != groups.end()) {
            out.group = g->second;
          } else {
            out.group = static_cast<int>(groups.size());
            groups.emplace(slot, out.group);
          }
          if (!slot->node) {
            out.index = -1;
          } else if (auto r = result_index.find(slot->node.get()); r != result_index.end()) {
            out.index = r->second;
          } else if (auto a = arg_index.find(slot->node.get());
                     a != arg_index.end() && arg_src_[a->second] >= 0) {
            return false;  // shares an input's value without its storage
          } else {
            out.index = -1;
            out.constant = slot->node;  // a value the graph did not compute
          }
        }
      } else if (py::isinstance<py::int_>(o) || py::isinstance<py::float_>(o)) {
        out.kind = Out::kPython;
        out.value = o;
      } else {
        return false;
      }
      outs_.push_back(std::move(out));
    }
    num_groups_ = static_cast<int>(groups.size());
    // An argument read from an input that the graph overwrites is held, at
    // a replay, by that input's storage and the launch's arguments only:
    // the launch may donate it (lazy::Executor::Launch's `owners`).
    owners_.assign(cap_.args.size(), 0);
    for (size_t j = 0; j < cap_.args.size(); ++j)
      for (const auto& [i, k] : mutated_)
        if (arg_src_[j] == i) owners_[j] = 2;
    in_slots_.clear();  // only needed while capturing
    in_nodes_.clear();
    // The capture call's values: a replay reads only the constants among the
    // arguments and the types of the results. Holding the others would keep
    // that call's inputs and results alive as long as the graph (a training
    // step's parameters and optimizer state, once per variant).
    for (size_t j = 0; j < cap_.args.size(); ++j)
      if (arg_src_[j] != -1) cap_.args[j].reset();
    for (lazy::NodePtr& r : cap_.results)
      r = std::make_shared<lazy::BufferNode>(r->type(), nullptr, std::string("captured result"));
    for (auto& d : cap_.dynamic) d.node.reset();
    replayable_ = true;
    return true;
  }

  // Launches the program for `args`, or returns None if they do not match
  // the captured signature.
  py::object Run(const py::list& args, const std::vector<int32_t>& sizes) {
    TORCH_CHECK(replayable_, "tpu: this graph was not captured");
    TORCH_CHECK(sizes.size() == cap_.sizes.size(), "tpu: expected ", cap_.sizes.size(),
                " dynamic sizes, got ", sizes.size());
    Signature s = Signature::Of(args);
    if (!s.capturable || s.words != sig_.words) return py::none();
    std::vector<at::Tensor> tensors(args.size());
    for (size_t i = 0; i < args.size(); ++i)
      if (THPVariable_Check(args[i].ptr())) tensors[i] = THPVariable_Unpack(args[i].ptr());

    lazy::Executor& ex = lazy::Executor::Get();
    std::vector<lazy::NodePtr> prog_args(cap_.args.size());
    {
      py::gil_scoped_release no_gil;
      for (size_t j = 0; j < prog_args.size(); ++j) {
        const int src = arg_src_[j];
        if (src >= 0) {
          prog_args[j] = SlotOf(tensors[src])->node;
        } else if (src == -3) {
          prog_args[j] = ex.Scalar(&sizes[j - cap_.size_args], ir::DType::S32);
        } else if (src == -4) {
          prog_args[j] = IndexRecordForReplay();
        } else if (src == -2) {
          for (const auto& [idx, refresh] : cap_.rng)
            if (idx == static_cast<int>(j)) {
              uint64_t state[2];
              refresh(state);
              prog_args[j] = ex.Upload(state, ir::DType::U64, {2});
            }
        } else {
          prog_args[j] = cap_.args[j];
        }
      }
    }
    std::vector<lazy::NodePtr> results;
    {
      py::gil_scoped_release no_gil;
      results = ex.Launch(cap_, prog_args, owners_);
    }
    for (const auto& [i, k] : mutated_) SlotOf(tensors[i])->node = results[k];
    if (record_result_ >= 0) AfterReplay(results[record_result_], index_checks_.checks);

    std::vector<c10::Storage> storages(num_groups_);
    py::list out_list;
    for (const Out& o : outs_) {
      switch (o.kind) {
        case Out::kNone: out_list.append(py::none()); break;
        case Out::kPython: out_list.append(o.value); break;
        case Out::kInputView:
          out_list.append(py::cast(tensors[o.index].as_strided(o.view.sizes, o.view.strides,
                                                                o.view.offset)));
          break;
        case Out::kFresh: {
          c10::Storage& st = storages[o.group];
          if (!st) {
            st = c10::Storage(c10::Storage::use_byte_size_t(), o.nbytes,
                              c10::GetAllocator(c10::DeviceType::PrivateUse1), true);
            size_t at = 0;
            auto* slot = device::SlotAt(st.data_ptr(), &at);
            if (slot) slot->node = o.index >= 0 ? results[o.index] : o.constant;
          }
          at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
              c10::Storage(st), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
              c10::scalarTypeToTypeMeta(o.view.dtype));
          t.unsafeGetTensorImpl()->set_sizes_and_strides(o.view.sizes, o.view.strides,
                                                         o.view.offset);
          out_list.append(py::cast(std::move(t)));
          break;
        }
      }
    }
    return std::move(out_list);
  }

  std::string name() const { return cap_.name; }
  size_t num_args() const { return cap_.args.size(); }
  size_t num_results() const { return cap_.results.size(); }

 private:
  struct Out {
    enum Kind { kNone, kPython, kInputView, kFresh } kind = kNone;
    View view;
    int index = -1;  // kInputView: the input; kFresh: the program result (-1: constant)
    int group = 0;   // kFresh: outputs of one group share a storage
    size_t nbytes = 0;
    lazy::NodePtr constant;
    py::object value;
  };

  Signature sig_;
  bool active_ = false, replayable_ = false;
  std::vector<lazy::StorageSlot*> in_slots_;
  std::vector<lazy::NodePtr> in_nodes_;
  lazy::Captured cap_;
  // Per program argument: input index, -1 constant, -2 RNG state, -3 size,
  // -4 the index-check record.
  std::vector<int> arg_src_;
  std::vector<std::pair<int, int>> mutated_;  // (input, result)
  std::vector<long> owners_;                  // per argument (Run)
  std::vector<Out> outs_;
  int num_groups_ = 0;
  IndexCheckMark index_mark_;
  CapturedIndexChecks index_checks_;
  int record_result_ = -1;  // the program's result that is the new record
};

}  // namespace

void RegisterCompiled(py::module& m) {
  py::class_<CapturedGraph>(m, "_CapturedGraph")
      .def(py::init<const py::list&, const std::vector<std::array<int, 3>>&,
                    const std::vector<int32_t>&>(),
           py::arg("args"), py::arg("dynamic") = std::vector<std::array<int, 3>>{},
           py::arg("sizes") = std::vector<int32_t>{})
      .def("finish", &CapturedGraph::Finish)
      .def("abort", &CapturedGraph::Abort)
      .def("run", &CapturedGraph::Run, py::arg("args"), py::arg("sizes") = std::vector<int32_t>{})
      .def_property_readonly("name", &CapturedGraph::name)
      .def_property_readonly("num_args", &CapturedGraph::num_args)
      .def_property_readonly("num_results", &CapturedGraph::num_results);
}

}  // namespace tpu::ops
