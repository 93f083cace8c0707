// torch_tpu._C: the Python-facing functions of the runtime.
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/extension.h>
#include <torch/csrc/Exceptions.h>

#include "device/fallback.h"
#include "device/allocator.h"
#include "device/generator.h"
#include "lazy/cache_limits.h"
#include "lazy/batch.h"
#include "lazy/executor.h"
#include "lazy/modes.h"
#include "aten/tensor_bridge.h"
#include "aten/indexing/index_checks.h"
#include "lazy/runtime.h"
#include "lazy/where.h"

#include <frameobject.h>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include "aten/precision.h"

namespace py = pybind11;

namespace tpu::ops {
void RegisterCompiled(py::module& m);  // compile/graph_capture.cc
void RegisterKernels(py::module& m);   // aten/kernels/jax_call.cc
}
namespace tpu::profiler {
void RegisterProfiler(py::module& m);  // profiler/bindings.cc
}
namespace tpu::dist {
void RegisterDist(py::module& m);  // dist/backend.cc
void RegisterDistHarness(py::module& m);  // dist/harness.cc
}

namespace tpu::device {
namespace {

// Fused Eager: a backward pass is cut from what came before it and flushed
// at its end. Called before each deferred op; on the first tpu op of a
// backward graph task it queues a flush for the task's end and returns true
// (the executor then launches the ops recorded before it).
bool StartOfBackward() {
  static thread_local int last_task = -1;
  const int task = torch::autograd::get_current_graph_task_id();
  if (task == -1 || task == last_task) return false;
  last_task = task;
  torch::autograd::Engine::get_default_engine().queue_callback(
      [] { lazy::Executor::Get().Flush(); });
  return true;
}

// The innermost Python frame outside torch and torch_tpu, as an interned
// "file:line"; null on threads that run no Python (autograd's device
// threads). PyTorch releases the GIL around its ops, so it is taken back for
// the walk; the GIL also guards the cache. Each code object's file and
// whether it is internal, and the text of each (code object, instruction)
// position, are cached, so a line seen before costs two hash lookups and no
// allocation. Cached code objects are kept alive (their addresses are the
// keys); past kMaxCodes distinct ones, new lines are not recorded.
struct CodeInfo {
  bool internal;
  std::string file;
};
struct PositionHash {
  size_t operator()(const std::pair<PyCodeObject*, int>& p) const {
    return std::hash<const void*>()(p.first) * 31 + static_cast<size_t>(p.second);
  }
};
struct WhereCache {
  static constexpr size_t kMaxCodes = 1 << 16;
  std::unordered_map<PyCodeObject*, CodeInfo> codes;
  std::unordered_map<std::pair<PyCodeObject*, int>, const std::string*, PositionHash> positions;
  std::unordered_set<std::string> texts;  // node-based: element addresses are stable
};

const std::string* WhereIn(WhereCache& cache, PyFrameObject* frame) {
  for (int depth = 0; frame != nullptr && depth < 32; ++depth) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    auto it = cache.codes.find(code);
    if (it == cache.codes.end()) {
      if (cache.codes.size() >= WhereCache::kMaxCodes) {
        Py_DECREF(code);
        return nullptr;
      }
      const char* file = PyUnicode_AsUTF8(code->co_filename);
      const bool internal = file == nullptr || std::strstr(file, "/torch/") ||
                            std::strstr(file, "/torch_tpu/") || std::strstr(file, "/functorch/");
      it = cache.codes.emplace(code, CodeInfo{internal, file ? file : ""}).first;
      Py_INCREF(code);  // the cache's reference
    }
    Py_DECREF(code);
    if (!it->second.internal) {
#if PY_VERSION_HEX >= 0x030B0000
      const std::pair<PyCodeObject*, int> pos{code, PyFrame_GetLasti(frame)};
#else
      const std::pair<PyCodeObject*, int> pos{code, PyFrame_GetLineNumber(frame)};
#endif
      auto at = cache.positions.find(pos);
      if (at == cache.positions.end()) {
        std::string text = it->second.file + ":" + std::to_string(PyFrame_GetLineNumber(frame));
        at = cache.positions.emplace(pos, &*cache.texts.insert(std::move(text)).first).first;
      }
      return at->second;
    }
    frame = PyFrame_GetBack(frame);  // new reference
    Py_XDECREF(frame);  // still referenced by the frame we came from
  }
  return nullptr;
}

const std::string* PythonWhere() {
#if PY_VERSION_HEX >= 0x030D0000
  if (!Py_IsInitialized() || Py_IsFinalizing()) return nullptr;
#else
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return nullptr;
#endif
  if (PyGILState_GetThisThreadState() == nullptr) return nullptr;
  PyGILState_STATE gil = PyGILState_Ensure();
  static WhereCache* cache = new WhereCache;  // lives to the end of the process
  const std::string* out = WhereIn(*cache, PyEval_GetFrame());
  if (PyErr_Occurred()) PyErr_Clear();
  PyGILState_Release(gil);
  return out;
}

// A program that compiles on no plugin (a custom call to a target that does
// not exist): the tests use it to check how a failure that happens after the
// op returned names the op and the line that issued it.
std::vector<ir::Value> FailingLowering(ir::Builder& b, const std::vector<ir::Value>& in, const lazy::Attrs&,
                                       const std::vector<ir::TensorType>& out) {
  return {b.Op1("stablehlo.custom_call", {in[0]}, out[0],
                {{"call_target_name", "\"torch_tpu_test_no_such_target\""}})};
}

lazy::Runtime& Rt() {
  try {
    return lazy::Runtime::Get();
  } catch (const pjrt::Error& e) {
    throw std::runtime_error(e.what());
  }
}

py::dict MemoryStats() {
  lazy::Runtime& rt = Rt();
  rt.Reap();
  pjrt::MemoryStats m = rt.client().memory_stats(0);
  py::dict d;
  // torch.cuda.memory_stats' keys: PJRT owns the memory and nothing is
  // cached, so active, reserved and requested bytes are the allocated ones.
  for (const char* kind : {"allocated_bytes", "active_bytes", "reserved_bytes", "requested_bytes"}) {
    d[py::str(std::string(kind) + ".all.current")] = rt.live_bytes();
    d[py::str(std::string(kind) + ".all.peak")] = rt.peak_bytes();
  }
  d["allocation.all.current"] = device::LiveStorages().size();
  d["num_ooms"] = 0;
  d["device.bytes_in_use"] = m.bytes_in_use;
  if (m.peak_known) d["device.peak_bytes_in_use"] = m.peak_bytes_in_use;
  if (m.limit_known) d["device.bytes_limit"] = m.bytes_limit;
  return d;
}

py::dict CacheStats() {
  lazy::CacheStats s = lazy::Executor::Get().stats();
  py::dict d;
  d["requests"] = s.requests;
  d["hits"] = s.hits;
  d["disk_hits"] = s.disk_hits;
  d["prefetched"] = s.prefetched;
  d["disk_refused"] = s.disk_refused;
  d["evicted"] = s.evicted;
  d["cached"] = s.cached;
  d["compiles"] = s.compiles;
  d["launches"] = s.launches;
  d["donated"] = s.donated;
  d["donated_bytes"] = s.donated_bytes;
  d["compile_seconds"] = s.compile_seconds;
  d["tier_ups"] = s.tier_ups;
  py::list entries;
  for (auto& [name, secs] : s.entries) entries.append(py::make_tuple(name, secs));
  d["entries"] = entries;
  return d;
}

void WarnAsTorch(const std::string& message) { TORCH_WARN(message); }

// Flushes recorded ops, then waits for everything launched.
void SynchronizeAll() {
  py::gil_scoped_release no_gil;
  lazy::Executor::Get().Flush();
  Rt().Synchronize();
}

}  // namespace
}  // namespace tpu::device

PYBIND11_MODULE(_C, m) {
  using namespace tpu;
  m.def("_configure", [](std::string explicit_path, std::string platform,
                         std::vector<std::string> dirs) {
    lazy::Runtime::Configure({std::move(explicit_path), std::move(platform), std::move(dirs)});
  });
  m.def("_is_initialized", &lazy::Runtime::initialized);
  m.def("_host_malloc_tuned", &lazy::Runtime::host_malloc_tuned);
  m.def("_init", [] { device::Rt(); });
  m.def("_device_count", [] { return static_cast<int>(device::VisibleDevices()); });
  m.def("_process_device", [] { return static_cast<int>(device::ProcessDevice()); });
  m.def("_init_error", []() -> std::string {
    try {
      lazy::Runtime::Get();
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  });
  m.def("_device_name", [] { return device::Rt().device_name(); });
  m.def("_platform", [] { return device::Rt().platform(); });
  m.def("_probe_plugin", [](const std::string& path) {
    pjrt::PluginProbe p;
    {
      py::gil_scoped_release no_gil;
      p = pjrt::Probe(path);
    }
    py::dict d;
    d["api_version"] = py::make_tuple(p.major, p.minor);
    py::dict attrs;
    for (const auto& [k, v] : p.attributes) attrs[py::str(k)] = v;
    d["attributes"] = attrs;
    return d;
  });
  // What torch_tpu would pass to (and set in the environment for) the
  // plugin of `platform` at `path`, read from the current environment.
  m.def("_platform_client_options", [](const std::string& platform, const std::string& path) {
    const pjrt::ClientOptions o = pjrt::PlatformClientOptions({path, platform});
    py::dict d;
    for (const pjrt::NamedOption& v : o.platform_options) {
      switch (v.kind) {
        case pjrt::NamedOption::kInt64: d[py::str(v.name)] = v.i; break;
        case pjrt::NamedOption::kFloat: d[py::str(v.name)] = v.f; break;
        case pjrt::NamedOption::kBool: d[py::str(v.name)] = v.b; break;
        case pjrt::NamedOption::kString: d[py::str(v.name)] = v.s; break;
      }
    }
    if (!o.visible_devices.empty()) d["visible_devices"] = o.visible_devices;
    return d;
  }, py::arg("platform"), py::arg("path") = "");
  m.def("_tpu_topology_env", [](int local_rank, int local_world_size) {
    py::dict d;
    for (const auto& [k, v] : pjrt::TpuTopologyEnv(local_rank, local_world_size)) d[py::str(k)] = v;
    return d;
  });
  m.def("_plugin_info", [] {
    auto& c = device::Rt().client();
    py::dict d;
    d["path"] = c.plugin_path();
    d["platform"] = c.platform_name();
    d["platform_version"] = c.platform_version();
    d["api_version"] = py::make_tuple(c.api_version().first, c.api_version().second);
    py::dict attrs;
    for (const auto& [k, v] : c.attributes()) attrs[py::str(k)] = v;
    d["attributes"] = attrs;
    return d;
  });
  lazy::SetWarnHandler(&device::WarnAsTorch);
  m.def("_synchronize", [] {
    HANDLE_TH_ERRORS
    device::SynchronizeAll();
    py::gil_scoped_release no_gil;
    ops::RaisePendingIndexErrors();  // a device-side index error surfaces here
    END_HANDLE_TH_ERRORS_PYBIND
  });
  m.def("_flush", [] {
    py::gil_scoped_release no_gil;
    lazy::Executor::Get().Flush();
  });
  m.def("_pending_ops", [] { return lazy::Executor::Get().pending(); });
  m.def("_set_max_pending_ops", [](size_t n) { lazy::Executor::Get().set_max_pending(n); });
  m.def("_set_eager_mode", [](int mode) {
    lazy::Executor::Get().Flush();
    lazy::SetGlobalMode(static_cast<lazy::EagerMode>(mode));
  });
  m.def("_get_eager_mode", [] { return static_cast<int>(lazy::CurrentMode()); });
  m.def("_set_thread_eager_mode", [](int mode) {
    lazy::Executor::Get().Flush();
    lazy::SetThreadMode(mode);
  });
  m.def("_get_thread_eager_mode", &lazy::ThreadMode);
  m.def("_configure_cache", [](std::string dir) {
    py::gil_scoped_release no_gil;
    lazy::Executor::Get().ConfigureDiskCache(std::move(dir));
  });
  m.def("_cache_dir", [] { return lazy::Executor::Get().disk_cache_dir(); });
  m.def("_configure_cache_prefetch", [](std::string program, bool enabled) {
    lazy::Executor::Get().SetProgram(std::move(program), enabled);
    lazy::Runtime::SetStartHook([] { lazy::Executor::Get().StartPrefetch(); });
  });
  m.def("_cache_shutdown", [] {
    py::gil_scoped_release no_gil;
    lazy::Executor::Get().Shutdown();
  });
  m.def("_is_materialized", [](const at::Tensor& t) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
                "is_materialized expects a tpu tensor, got one on ", t.device());
    lazy::StorageSlot* slot = ops::SlotOf(t);
    return slot == nullptr || slot->node == nullptr || !slot->node->deferred();
  });
  m.def("_materialize", [](const std::vector<at::Tensor>& ts, bool wait) {
    py::gil_scoped_release no_gil;
    lazy::Executor::Get().Flush();
    if (!wait) return;
    for (const at::Tensor& t : ts) {
      lazy::StorageSlot* slot = ops::SlotOf(t);
      if (!slot || !slot->node) continue;
      lazy::Executor::Get().Materialize(slot->node);
      slot->node->buffer()->ReadyEvent()->Await();
    }
  });
  m.def("_memory_stats", &device::MemoryStats);
  m.def("_reset_peak_memory_stats", [] { device::Rt().reset_peak(); });
  m.def("_set_index_checks", &ops::SetIndexChecks);
  m.def("_raise_index_errors", [] {
    HANDLE_TH_ERRORS
    py::gil_scoped_release no_gil;
    ops::RaisePendingIndexErrors();
    END_HANDLE_TH_ERRORS_PYBIND
  });
  m.def("_index_checks_enabled", &ops::IndexChecksEnabled);
  m.def("_set_memory_fraction", [](double f) { device::Rt().set_memory_fraction(f); });
  m.def("_memory_fraction", [] { return device::Rt().memory_fraction(); });
  m.def("_total_memory", [] { return device::Rt().total_memory(); });
  m.def("_cache_stats", &device::CacheStats);
  m.def("_clear_cache", [] {
    py::gil_scoped_release no_gil;
    lazy::Executor::Get().ClearCache();
  });
  m.def("_set_map_budget_for_testing", &lazy::SetMapBudgetForTesting);
  m.def("_map_limit_for_testing", &lazy::MapLimitForTesting);
  m.def("_set_precision_override", &ops::SetPrecisionOverride);
  m.def("_get_precision_override", &ops::PrecisionOverride);
  m.def("_set_follow_torch_precision", &ops::SetFollowTorchPrecision);
  m.def("_set_allow_excess_precision", &lazy::SetAllowExcessPrecision);
  m.def("_allow_excess_precision", &lazy::AllowExcessPrecision);
  m.def("_set_donation", &lazy::SetDonation);
  m.def("_donation", &lazy::Donation);
  m.def("_follow_torch_precision", &ops::FollowTorchPrecision);
  m.def("_current_precision", [] { return static_cast<int64_t>(ops::CurrentPrecision()); });
  m.def("_set_cpu_fallback", &device::SetCpuFallback);
  m.def("_cpu_fallback_enabled", &device::CpuFallbackEnabled);
  ops::RegisterCompiled(m);
  ops::RegisterKernels(m);
  profiler::RegisterProfiler(m);
  dist::RegisterDist(m);
  dist::RegisterDistHarness(m);
  {
    // TORCH_TPU_OP_LINES=0: Fused Eager does not record the issuing line.
    const char* lines = std::getenv("TORCH_TPU_OP_LINES");
    lazy::SetWhereHook(lines != nullptr && std::string(lines) == "0" ? nullptr : &device::PythonWhere);
  }
  m.def("_debug_failing_op", [](const at::Tensor& t) {
    static const lazy::Lowering op{"torch_tpu::_debug_failing_op", &device::FailingLowering};
    return ops::Run1(op, {}, {ops::OperandOf(t)}, ops::TypeOf(t.sizes(), t.scalar_type()));
  });
  lazy::Executor::Get().set_fused_hook(&device::StartOfBackward);
  m.def("_default_generator", [] { return device::DefaultGenerator(); });
}
