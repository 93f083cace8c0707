#include "dist/xla_engine.h"

#include <ATen/ops/scalar_tensor.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <stdexcept>

#include "lazy/executor.h"
#include "lazy/runtime.h"
#include "aten/tensor_bridge.h"
#include "pjrt/pjrt.h"

namespace tpu::dist {

namespace {
std::string DeviceKey(int rank) { return "tpu_dist/xla/device/" + std::to_string(rank); }
}  // namespace

XlaEngine::XlaEngine(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size)
    : rank_(rank), size_(size) {
  pjrt::Client& client = lazy::Runtime::Get().client();
  TORCH_CHECK(size == 1 || client.num_nodes() > 1,
              "tpu_dist: the XLA collective engine needs the multi-process device client, which "
              "torch_tpu creates under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and "
              "MASTER_PORT set) on an accelerator plugin; this process's client is a "
              "single-process one. Launch with torchrun, or set TORCH_TPU_DIST_ENGINE=host.");
  const std::string mine = std::to_string(client.device_id(0));
  store->set(DeviceKey(rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  for (int r = 0; r < size; ++r) {
    std::vector<uint8_t> v = store->get(DeviceKey(r));
    devices_.push_back(std::stoi(std::string(v.begin(), v.end())));
  }
}

at::Tensor XlaEngine::Run(CollectiveSpec spec, const std::vector<int>& devices, const at::Tensor& input,
                          std::optional<double> factor) {
  const char* name = CollectiveName(spec.kind);
  TORCH_CHECK(input.device().type() == c10::DeviceType::PrivateUse1, "tpu_dist ", name,
              ": expected a tpu tensor, got one on ", input.device());
  // Programs take the flat value of a whole storage; anything else (a view,
  // a non-contiguous or a multi-dimensional tensor) is copied into one first.
  at::Tensor flat = input.reshape(-1);
  lazy::Operand op = ops::OperandOf(flat);
  const auto whole = [&](const lazy::Operand& o) {
    const ir::TensorType& t = o.node->type();
    return o.view.offset == 0 && t.dtype == o.view.dtype && t.dims.size() == 1 &&
           t.dims[0] == flat.numel() && flat.is_contiguous();
  };
  if (!whole(op)) {
    flat = flat.clone(at::MemoryFormat::Contiguous);
    op = ops::OperandOf(flat);
  }
  spec.input = ir::TensorType{op.view.dtype, {flat.numel()}};
  spec.num_replicas = static_cast<int>(devices.size());
  CollectiveProgram prog;
  try {
    prog = EmitCollective(spec);
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }

  std::shared_ptr<pjrt::Executable> exe;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string key = prog.mlir + "|";
    for (int d : devices) key += std::to_string(d) + ",";
    auto& slot = programs_[key];
    if (!slot) slot = lazy::Runtime::Get().client().CompileForDevices(prog.mlir, devices);
    exe = slot;
  }

  lazy::Executor& ex = lazy::Executor::Get();
  ex.Materialize(op.node);
  std::vector<PJRT_Buffer*> args{op.node->buffer()->raw()};
  lazy::NodePtr factor_node;
  if (prog.num_args == 2) {
    TORCH_CHECK(factor.has_value(), "tpu_dist ", name, ": PREMUL_SUM without a factor");
    at::Tensor f = at::scalar_tensor(*factor, at::TensorOptions().dtype(flat.scalar_type()));
    factor_node = ex.Scalar(f.data_ptr(), spec.input.dtype);
    ex.Materialize(factor_node);
    args.push_back(factor_node->buffer()->raw());
  }
  auto outs = exe->ExecuteOnDevices({args});
  TORCH_CHECK(outs.size() == 1 && outs[0].size() == 1, "tpu_dist ", name,
              ": expected one result on this process's device");
  // The inputs stay alive until the program has run (see Runtime::AddPending).
  std::vector<std::shared_ptr<const void>> inputs{op.node};
  if (factor_node) inputs.push_back(factor_node);
  lazy::Runtime::Get().AddPending(outs[0][0]->ReadyEvent(), std::move(inputs));
  auto node = std::make_shared<lazy::BufferNode>(
      prog.output, lazy::Runtime::Get().Track(std::move(outs[0][0])), std::string("tpu_dist ") + name);
  at::Tensor out = ops::EmptyTpu(prog.output.dims, flat.scalar_type());
  ops::SlotOf(out)->node = std::move(node);
  return out;
}

namespace {
CollectiveSpec Spec(Collective kind, Reduce reduce = Reduce::kSum, int root = 0) {
  CollectiveSpec s;
  s.kind = kind;
  s.reduce = reduce;
  s.root = root;
  return s;
}
}  // namespace

at::Tensor XlaEngine::AllReduce(const at::Tensor& input, Reduce reduce, std::optional<double> factor) {
  return Run(Spec(Collective::kAllReduce, reduce), devices_, input, factor);
}

at::Tensor XlaEngine::AllGather(const at::Tensor& input) {
  return Run(Spec(Collective::kAllGather), devices_, input, {});
}

at::Tensor XlaEngine::ReduceScatter(const at::Tensor& input, Reduce reduce, std::optional<double> factor) {
  return Run(Spec(Collective::kReduceScatter, reduce), devices_, input, factor);
}

at::Tensor XlaEngine::AllToAll(const at::Tensor& input) {
  return Run(Spec(Collective::kAllToAll), devices_, input, {});
}

at::Tensor XlaEngine::Broadcast(const at::Tensor& input, int root) {
  return Run(Spec(Collective::kBroadcast, Reduce::kSum, root), devices_, input, {});
}

at::Tensor XlaEngine::Scatter(const at::Tensor& input, int root) {
  return Run(Spec(Collective::kScatter, Reduce::kSum, root), devices_, input, {});
}

at::Tensor XlaEngine::SendRecv(const at::Tensor& input, int src, int dst) {
  TORCH_CHECK(src != dst && src >= 0 && dst >= 0 && src < size_ && dst < size_,
              "tpu_dist send/recv: invalid peer (src ", src, ", dst ", dst, ", group size ", size_, ")");
  // A two-replica program: replica 0 on the sender's device, 1 on the receiver's.
  CollectiveSpec s = Spec(Collective::kPermute);
  s.pairs = {{0, 1}};
  return Run(s, {devices_[src], devices_[dst]}, input, {});
}

void RegisterDistClientOptions() {
  lazy::Runtime::SetOptionsProvider([](const pjrt::PluginChoice& choice) {
    pjrt::ClientOptions opts = pjrt::PlatformClientOptions(choice);
    const bool cpu = choice.platform == "cpu" ||
                     (choice.platform.empty() && choice.path.find("cpu") != std::string::npos);
    const char* engine = std::getenv("TORCH_TPU_DIST_ENGINE");
    if (cpu || (engine != nullptr && std::string(engine) == "host")) return opts;
    const char* rank = std::getenv("RANK");
    const char* world = std::getenv("WORLD_SIZE");
    const char* local = std::getenv("LOCAL_RANK");
    const char* addr = std::getenv("MASTER_ADDR");
    const char* port = std::getenv("MASTER_PORT");
    if (!rank || !world || !local || !addr || !port || std::atoi(world) <= 1) return opts;
    opts.node_id = std::atoi(rank);
    opts.num_nodes = std::atoi(world);
    opts.visible_devices = {std::atoi(local)};
    // torchrun's own store (the agent's TCPStore on MASTER_ADDR:MASTER_PORT),
    // under a prefix of our own.
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(std::atoi(port));
    so.isServer = false;
    so.waitWorkers = false;
    so.timeout = std::chrono::minutes(5);
    auto store = c10::make_intrusive<c10d::TCPStore>(addr, so);
    auto kv = std::make_shared<pjrt::KeyValueStore>();
    kv->get = [store](const std::string& key, int timeout_ms) {
      const std::string k = "torch_tpu/pjrt/" + key;
      store->wait({k}, std::chrono::milliseconds(timeout_ms));
      std::vector<uint8_t> v = store->get(k);
      return std::string(v.begin(), v.end());
    };
    kv->put = [store](const std::string& key, const std::string& value) {
      store->set("torch_tpu/pjrt/" + key, std::vector<uint8_t>(value.begin(), value.end()));
    };
    opts.kv_store = std::move(kv);
    return opts;
  });
}

}  // namespace tpu::dist
