// torch_tpu._C's functions for torch_tpu.metrics, torch_tpu._logging and
// torch.tpu.memory's history and snapshot.
#include <torch/csrc/utils/pybind.h>

#include "device/memory_history.h"
#include "profiler/trace.h"

namespace py = pybind11;

namespace tpu::profiler {

namespace {

py::object* g_log_fn = nullptr;  // the Python function that logs a compile

void LogCompile(const std::string& name, const char* tier, const char* cause, double seconds) {
  if (!Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  if (g_log_fn == nullptr) return;
  try {
    (*g_log_fn)(name, tier, cause ? py::object(py::str(cause)) : py::object(py::none()), seconds);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("torch_tpu compile log");
  }
}

py::list Pairs(const std::vector<std::pair<std::string, int64_t>>& v) {
  py::list out;
  for (const auto& [k, n] : v) out.append(py::make_tuple(k, n));
  return out;
}

}  // namespace

void RegisterProfiler(py::module& m) {
  m.def("_metrics", [] {
    Counters& c = counters();
    py::dict d;
    d["host_syncs"] = c.host_syncs.load();
    d["h2d_copies"] = c.h2d_copies.load();
    d["h2d_bytes"] = c.h2d_bytes.load();
    d["d2h_copies"] = c.d2h_copies.load();
    d["d2h_bytes"] = c.d2h_bytes.load();
    d["load_seconds"] = c.load_ns.load() * 1e-9;
    KeyedCounts k = keyed_counts();
    d["host_sync_sites"] = Pairs(k.host_syncs);
    d["cpu_fallbacks"] = Pairs(k.cpu_fallbacks);
    d["recompiles"] = Pairs(k.recompiles);
    py::list recent;
    for (const auto& [cause, name] : k.recent_recompiles) recent.append(py::make_tuple(cause, name));
    d["recent_recompiles"] = recent;
    return d;
  });
  m.def("_reset_metrics", &ResetCounters);
  m.def("_set_compile_log", [](py::object fn, double slow_seconds) {
    if (fn.is_none()) {
      SetCompileListener(nullptr, slow_seconds);
      return;
    }
    // Kept for the life of the process: a compile on another thread may be
    // calling the previous one.
    g_log_fn = new py::object(std::move(fn));
    SetCompileListener(&LogCompile, slow_seconds);
  });
  m.def("_record_memory_history", &device::SetMemoryHistory);
  m.def("_memory_snapshot", &device::MemorySnapshot);
  m.def("_profiler_recording", &Recording);
}

}  // namespace tpu::profiler
