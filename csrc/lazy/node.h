// Buffer nodes and the structures a kernel hands to the executor. No torch
// headers: the ATen layer (ops/) converts tensors into these.
//
// A tpu storage's data pointer refers to a StorageSlot; the slot refers to
// the BufferNode that currently holds the storage's value. Nodes are
// immutable; an in-place op makes a new node and swaps it into the slot, so
// every alias of the storage sees the write.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace tpu::pjrt {
class Buffer;
}

namespace tpu::lazy {

struct PendingOp;  // lazy/batch.h: a recorded op whose program has not run

// The value of a storage, in one of three states:
//   deferred - produced by a recorded op that has not been launched yet,
//   ready    - holds a PJRT buffer (whose value may still be computing),
//   error    - holds the message of the failure that produced it.
// The value never changes once ready; an in-place op makes a new node.
class BufferNode {
 public:
  BufferNode(ir::TensorType type, std::shared_ptr<pjrt::Buffer> buffer, std::string origin)
      : type_(std::move(type)), buffer_(std::move(buffer)), origin_(std::move(origin)) {}
  // A node made by a recorded op: `op` is the lowering's (static) name,
  // `where` the interned line that issued it, or null.
  BufferNode(ir::TensorType type, std::shared_ptr<pjrt::Buffer> buffer, const char* op,
             const std::string* where)
      : type_(std::move(type)), buffer_(std::move(buffer)), op_(op), where_(where) {}
  static std::shared_ptr<BufferNode> Failed(ir::TensorType type, std::string error);

  const ir::TensorType& type() const { return type_; }
  bool deferred() const { return producer_ != nullptr; }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  // The PJRT buffer of a ready node. Throws the node's error if it failed.
  // (Executor::Materialize makes a deferred node ready first.)
  const std::shared_ptr<pjrt::Buffer>& buffer() const;
  // The op that produced this node, and the user's line where known.
  std::string origin() const {
    if (op_ == nullptr) return origin_;
    return where_ ? std::string(op_) + " at " + *where_ : std::string(op_);
  }
  size_t nbytes() const;

 private:
  friend class Executor;
  BufferNode(ir::TensorType type, std::string error)
      : type_(std::move(type)), error_(std::move(error)) {}
  ir::TensorType type_;
  std::shared_ptr<pjrt::Buffer> buffer_;
  std::string origin_;
  const char* op_ = nullptr;
  const std::string* where_ = nullptr;
  std::string error_;
  std::shared_ptr<PendingOp> producer_;  // while deferred
  int producer_output_ = 0;
  int flush_uses_ = 0;  // Executor::FlushLocked: references from the batch
};
using NodePtr = std::shared_ptr<BufferNode>;

// What a tpu storage's DataPtr points at.
struct StorageSlot {
  explicit StorageSlot(size_t n) : nbytes(n) {}
  size_t nbytes;
  uintptr_t addr = 0;  // the storage's device address (device/allocator.cc)
  NodePtr node;  // null until first written
};

// How a tensor views its storage, in elements of `dtype`.
struct ViewSpec {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  ir::DType dtype = ir::DType::F32;
  int64_t numel() const;
  bool is_contiguous() const;
};

// A tensor argument: the node holding its storage and the view of it.
struct Operand {
  NodePtr node;
  ViewSpec view;
};

// Non-tensor arguments that change the result. Every one goes into the
// compile-cache key; a lowering sees nothing else (see Lowering).
struct Attrs {
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::string str;
};

// Appends the bytes of values to a key. Keys are compared whole, so two
// different programs can never share an entry.
class KeyWriter {
 public:
  void Int(int64_t v) { key_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void Ints(const std::vector<int64_t>& v) {
    Int(static_cast<int64_t>(v.size()));
    key_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
  }
  void Double(double v) { key_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void Str(const std::string& s) {
    Int(static_cast<int64_t>(s.size()));
    key_ += s;
  }
  void Type(const ir::TensorType& t) {
    Int(static_cast<int64_t>(t.dtype));
    Ints(t.dims);
  }
  std::string& str() { return key_; }

 private:
  std::string key_;
};

}  // namespace tpu::lazy
