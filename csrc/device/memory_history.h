// torch.tpu.memory._record_memory_history: while on, every tpu storage made
// or freed is recorded with the stack that made it, and _snapshot() returns
// the live storages and the event trace in the layout of
// torch.cuda.memory._snapshot(), which PyTorch's memory visualizer reads.
#pragma once

#include <cstddef>
#include <string>

namespace pybind11 {
class dict;
}

namespace tpu::device {

bool MemoryHistoryEnabled();
// `stacks`: "python" or "all" (with C++ frames); `max_entries`: events kept.
void SetMemoryHistory(bool enabled, const std::string& stacks, size_t max_entries);
void RecordMemoryEvent(void* addr, size_t nbytes, bool alloc);
pybind11::dict MemorySnapshot();

}  // namespace tpu::device
