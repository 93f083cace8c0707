// Strict eager execution: an op becomes one program, looked up in the
// compile cache by a structural key (no MLIR text is printed on a hit) and
// launched asynchronously; the caller gets nodes whose values may still be
// pending inside PJRT.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/ir.h"
#include "lazy/lowering.h"
#include "lazy/node.h"

namespace tpu::lazy {

// Where an op's result goes.
struct OutputTarget {
  ir::TensorType type;          // the value the lowering returns
  StorageSlot* slot = nullptr;  // if set: written into this storage through `view`
  ViewSpec view;                // (the value is converted to view.dtype)
};

struct CacheStats {
  int64_t requests = 0, hits = 0, compiles = 0;
  double compile_seconds = 0;
  std::vector<std::pair<std::string, double>> entries;  // op name, compile seconds
};

class Executor {
 public:
  static Executor& Get();

  // Runs one op. Returns one node per output; outputs with a slot have
  // also been stored into it.
  std::vector<NodePtr> Run(const Lowering& op, const Attrs& attrs,
                           const std::vector<Operand>& inputs,
                           const std::vector<OutputTarget>& outputs);

  // A node holding a host array (copied during the call).
  NodePtr Upload(const void* data, ir::DType dtype, const std::vector<int64_t>& dims,
                 const std::vector<int64_t>& byte_strides = {});
  // A 0-d node holding a scalar, from a small cache of recent values.
  NodePtr Scalar(const void* bits, ir::DType dtype);
  // Copies a node's whole value to host memory (blocks; raises its error).
  void Download(const NodePtr& node, void* dst, size_t nbytes);

  CacheStats stats();
  void ClearCache();

 private:
  struct Entry;
  std::shared_ptr<Entry> Lookup(const std::string& key, bool* hit);
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> cache_;
  CacheStats stats_;
  std::mutex scalar_mu_;
  std::unordered_map<std::string, NodePtr> scalars_;
};

}  // namespace tpu::lazy
