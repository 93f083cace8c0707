// The lowering harness of tpu_dist's XLA engine: runs the engine's
// collective programs (EmitCollective) on one process, on a CPU client with
// several devices, so that tests can check every collective, reduce op,
// dtype and group layout against NumPy here, where no plugin can run
// collectives across processes.
#include <ATen/ops/empty.h>
#include <torch/csrc/utils/pybind.h>

#include <map>
#include <mutex>

#include "dist/collective_program.h"
#include "lazy/executor.h"
#include "lazy/runtime.h"
#include "aten/tensor_bridge.h"
#include "pjrt/pjrt.h"

namespace py = pybind11;

namespace tpu::dist {
namespace {

constexpr int kHarnessDevices = 8;

Collective ParseKind(const std::string& s) {
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                       Collective::kAllToAll, Collective::kBroadcast, Collective::kScatter,
                       Collective::kPermute}) {
    if (s == CollectiveName(c)) return c;
  }
  throw std::invalid_argument("unknown collective '" + s + "'");
}

Reduce ParseReduce(const std::string& s) {
  for (Reduce r : {Reduce::kSum, Reduce::kAvg, Reduce::kProduct, Reduce::kMin, Reduce::kMax,
                   Reduce::kPremulSum}) {
    if (s == ReduceName(r)) return r;
  }
  throw std::invalid_argument("unknown reduce op '" + s + "'");
}

struct Harness {
  std::mutex mu;
  std::shared_ptr<pjrt::Client> client;
  std::map<std::string, std::shared_ptr<pjrt::Executable>> programs;

  pjrt::Client& Client() {
    if (!client) {
      const std::string path = lazy::Runtime::Get().client().plugin_path();
      pjrt::ClientOptions opts;
      opts.cpu_device_count = kHarnessDevices;
      client = pjrt::Client::Create(path, opts);
    }
    return *client;
  }

  int IndexOf(int device_id) {
    for (int i = 0; i < client->device_count(); ++i) {
      if (client->device_id(i) == device_id) return i;
    }
    throw std::invalid_argument("no device with id " + std::to_string(device_id));
  }
};

Harness& TheHarness() {
  static Harness* h = new Harness();
  return *h;
}

// Runs one collective program: inputs[i] is replica i's input, placed on the
// device with id devices[i]. Returns each replica's result and the program.
std::pair<std::vector<at::Tensor>, std::string> RunHarness(
    const std::string& kind, const std::string& reduce, const std::vector<at::Tensor>& inputs,
    const std::vector<int>& devices, const std::vector<std::vector<int64_t>>& groups, int root,
    const std::vector<std::pair<int64_t, int64_t>>& pairs, std::optional<double> factor) {
  TORCH_CHECK(!inputs.empty() && inputs.size() == devices.size(),
              "harness: one input per replica and one device per replica");
  CollectiveSpec spec;
  spec.kind = ParseKind(kind);
  spec.reduce = ParseReduce(reduce);
  spec.input = ir::TensorType{ops::ToIr(inputs[0].scalar_type()), inputs[0].sizes().vec()};
  spec.groups = groups;
  spec.num_replicas = static_cast<int>(inputs.size());
  spec.root = root;
  spec.pairs = pairs;
  CollectiveProgram prog = EmitCollective(spec);
  TORCH_CHECK(prog.num_args == 1 || factor.has_value(), "harness: PREMUL_SUM needs a factor");

  Harness& h = TheHarness();
  std::lock_guard<std::mutex> lock(h.mu);
  pjrt::Client& client = h.Client();
  std::string key = prog.mlir + "|";
  for (int d : devices) key += std::to_string(d) + ",";
  auto& exe = h.programs[key];
  if (!exe) exe = client.CompileForDevices(prog.mlir, devices);

  const pjrt::ElementType et = lazy::ToPjrt(spec.input.dtype);
  std::vector<std::unique_ptr<pjrt::Buffer>> keep;
  std::vector<int> order = exe->addressable_device_ids();
  std::vector<std::vector<PJRT_Buffer*>> args;
  std::vector<size_t> replica_of;
  for (int id : order) {
    size_t r = 0;
    while (r < devices.size() && devices[r] != id) ++r;
    TORCH_CHECK(r < devices.size(), "harness: the program runs on device ", id, " which no replica names");
    replica_of.push_back(r);
    at::Tensor in = inputs[r].contiguous();
    TORCH_CHECK(in.sizes() == inputs[0].sizes() && in.scalar_type() == inputs[0].scalar_type(),
                "harness: every replica's input must have the same shape and dtype");
    const int index = h.IndexOf(id);
    keep.push_back(client.BufferFromHost(in.data_ptr(), et, spec.input.dims, {}, index));
    std::vector<PJRT_Buffer*> list{keep.back()->raw()};
    if (prog.num_args == 2) {
      at::Tensor f = at::empty({}, in.options()).fill_(*factor);
      keep.push_back(client.BufferFromHost(f.data_ptr(), et, {}, {}, index));
      list.push_back(keep.back()->raw());
    }
    args.push_back(std::move(list));
  }
  auto outs = exe->ExecuteOnDevices(args);
  std::vector<at::Tensor> results(inputs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    at::Tensor t = at::empty(prog.output.dims, inputs[0].options());
    outs[i][0]->ToHost(t.data_ptr(), t.nbytes());
    results[replica_of[i]] = t;
  }
  return {results, prog.mlir};
}

}  // namespace

void RegisterDistHarness(py::module& m) {
  m.def("_dist_harness", &RunHarness, py::arg("kind"), py::arg("reduce"), py::arg("inputs"),
        py::arg("devices"), py::arg("groups") = std::vector<std::vector<int64_t>>{},
        py::arg("root") = 0, py::arg("pairs") = std::vector<std::pair<int64_t, int64_t>>{},
        py::arg("factor") = std::nullopt, py::call_guard<py::gil_scoped_release>());
  m.attr("_dist_harness_devices") = kHarnessDevices;
}

}  // namespace tpu::dist
