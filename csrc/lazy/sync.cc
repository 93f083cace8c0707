// Waiting for results and delivering errors: a node's buffer (after its
// program ran, or the error it carries), Materialize (flush what a value
// waits for), Download (device to host), and FailAll (a failed program's
// error handed to every result it would have made).
#include <stdexcept>
#include <string>

#include "lazy/batch.h"
#include "lazy/runtime.h"
#include "lazy/where.h"
#include "pjrt/pjrt.h"
#include "profiler/trace.h"

namespace tpu::lazy {

NodePtr BufferNode::Failed(ir::TensorType type, std::string error) {
  return NodePtr(new BufferNode(std::move(type), std::move(error)));
}

const std::shared_ptr<pjrt::Buffer>& BufferNode::buffer() const {
  if (!error_.empty()) throw std::runtime_error(error_);
  if (producer_) throw std::logic_error("tpu: reading a deferred node before it ran");
  return buffer_;
}

size_t BufferNode::nbytes() const { return type_.numel() * ItemSize(type_.dtype); }

void Executor::Materialize(const NodePtr& node) {
  if (node->deferred()) Flush();
  if (node->failed()) throw std::runtime_error(node->error());
}

void Executor::Download(const NodePtr& node, void* dst, size_t nbytes) {
  // A host sync: the host waits for the value (and for whatever it depends
  // on); counted with the user's line (torch_tpu.metrics).
  profiler::NoteHostSync("copy to host", CurrentWhere());
  Materialize(node);
  const auto& buf = node->buffer();
  const int64_t t0 = profiler::Recording() ? profiler::NowNs() : 0;
  try {
    buf->ToHost(dst, nbytes);
  } catch (const pjrt::Error& e) {
    throw std::runtime_error(std::string("tpu: ") + node->origin() + " failed: " + e.what());
  }
  profiler::Counters& c = profiler::counters();
  c.d2h_copies.fetch_add(1, std::memory_order_relaxed);
  c.d2h_bytes.fetch_add(static_cast<int64_t>(nbytes), std::memory_order_relaxed);
  if (t0 != 0 && profiler::Recording()) profiler::OnCopy(false, nbytes, t0, profiler::NowNs());
}

void Executor::FailAll(const std::vector<NodePtr>& results, const std::string& msg) {
  for (const NodePtr& n : results) {
    n->error_ = msg;
    n->producer_.reset();
  }
}

}  // namespace tpu::lazy
