#include "device/memory_history.h"

#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "device/allocator.h"

// From torch/csrc/profiler/python/combined_traceback.h (libtorch_python),
// whose header needs nlohmann/json, which the wheel does not ship.
namespace torch {
std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
void installCapturedTracebackPython();
}  // namespace torch

namespace tpu::device {

namespace {

struct Event {
  bool alloc;
  uintptr_t addr;
  size_t size;
  int64_t time_us;
  std::shared_ptr<torch::CapturedTraceback> stack;
};

struct History {
  std::atomic<bool> enabled{false};
  std::mutex mu;
  bool cpp = false;
  size_t max_entries = 0;
  std::deque<Event> trace;
  // Live storages made while recording: their stacks.
  std::map<uintptr_t, std::shared_ptr<torch::CapturedTraceback>> live;
};

History& history() {
  static History* h = new History();  // storages outlive static teardown
  return *h;
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool MemoryHistoryEnabled() { return history().enabled.load(std::memory_order_relaxed); }

void SetMemoryHistory(bool enabled, const std::string& stacks, size_t max_entries) {
  TORCH_CHECK(stacks == "python" || stacks == "all",
              "_record_memory_history: stacks must be 'python' or 'all', not '", stacks, "'");
  static std::once_flag unwinder;
  std::call_once(unwinder, [] { torch::installCapturedTracebackPython(); });
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  h.cpp = stacks == "all";
  h.max_entries = max_entries;
  if (!enabled) {
    h.trace.clear();
    h.live.clear();
  }
  h.enabled.store(enabled);
}

void RecordMemoryEvent(void* addr, size_t nbytes, bool alloc) {
  History& h = history();
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::shared_ptr<torch::CapturedTraceback> stack;
  if (alloc) stack = torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, h.cpp);
  std::lock_guard<std::mutex> lock(h.mu);
  if (!h.enabled.load()) return;
  if (alloc) {
    h.live[a] = stack;
  } else {
    auto it = h.live.find(a);
    if (it != h.live.end()) {
      stack = it->second;  // a free shows the stack of the allocation
      h.live.erase(it);
    }
  }
  if (h.max_entries == 0) return;
  if (h.trace.size() >= h.max_entries) h.trace.pop_front();
  h.trace.push_back(Event{alloc, a, nbytes, NowUs(), std::move(stack)});
}

pybind11::dict MemorySnapshot() {
  namespace py = pybind11;
  History& h = history();
  std::vector<std::pair<uintptr_t, size_t>> storages = LiveStorages();
  std::vector<std::shared_ptr<torch::CapturedTraceback>> seg_stacks;
  std::vector<Event> trace;
  {
    std::lock_guard<std::mutex> lock(h.mu);
    for (const auto& [addr, size] : storages) {
      auto it = h.live.find(addr);
      seg_stacks.push_back(it == h.live.end() ? nullptr : it->second);
    }
    trace.assign(h.trace.begin(), h.trace.end());
  }
  // Symbolized in one batch (shared frames are resolved once).
  std::vector<torch::CapturedTraceback*> to_symbolize;
  for (const auto& s : seg_stacks)
    if (s) to_symbolize.push_back(s.get());
  for (const Event& e : trace)
    if (e.stack) to_symbolize.push_back(e.stack.get());
  std::vector<py::object> frames = torch::py_symbolize(to_symbolize);
  size_t next = 0;
  auto frames_of = [&](const std::shared_ptr<torch::CapturedTraceback>& s) -> py::object {
    return s ? frames.at(next++) : py::list();
  };
  const int device = static_cast<int>(ProcessDevice());
  py::list segments;
  for (size_t i = 0; i < storages.size(); ++i) {
    const auto [addr, size] = storages[i];
    py::object f = frames_of(seg_stacks[i]);
    py::dict block;
    block["address"] = addr;
    block["size"] = size;
    block["requested_size"] = size;
    block["state"] = "active_allocated";
    block["frames"] = f;
    py::dict seg;
    seg["device"] = device;
    seg["address"] = addr;
    seg["total_size"] = size;
    seg["allocated_size"] = size;
    seg["active_size"] = size;
    seg["requested_size"] = size;
    seg["stream"] = 0;
    seg["segment_type"] = size > (size_t{1} << 20) ? "large" : "small";
    seg["segment_pool_id"] = py::make_tuple(0, 0);
    seg["is_expandable"] = false;
    seg["frames"] = f;
    seg["blocks"] = py::list();
    seg["blocks"].cast<py::list>().append(block);
    segments.append(seg);
  }
  // An allocation is a segment of its own (PJRT owns the memory and caches
  // nothing), so each event comes as a segment event and a block event.
  py::list device_trace;
  for (const Event& e : trace) {
    py::object f = frames_of(e.stack);
    static const std::vector<const char*> kAlloc{"segment_alloc", "alloc"};
    static const std::vector<const char*> kFree{"free_requested", "free_completed", "segment_free"};
    for (const char* action : e.alloc ? kAlloc : kFree) {
      py::dict ev;
      ev["action"] = action;
      ev["addr"] = e.addr;
      ev["size"] = e.size;
      ev["stream"] = 0;
      ev["time_us"] = e.time_us;
      ev["frames"] = f;
      device_trace.append(ev);
    }
  }
  py::list device_traces;
  for (int d = 0; d < device; ++d) device_traces.append(py::list());
  device_traces.append(device_trace);
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = device_traces;
  py::dict settings;
  settings["PYTORCH_TPU_ALLOC_CONF"] = "";
  out["allocator_settings"] = settings;
  return out;
}

}  // namespace tpu::device
