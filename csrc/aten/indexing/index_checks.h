// Out-of-range indices raise, as PyTorch's CPU kernels do; XLA would clamp
// a gather's index and drop a scatter's update, training on wrong data.
//
// An index tensor on the host is checked at once. One on the device is
// checked by a small recorded op that folds "some index is outside
// [lo, size)" and one offending value into a 3-element device record; the
// host reads the record where it reads a tpu value anyway (.item(), .cpu(),
// torch.tpu.synchronize()), like a CUDA device-side assert, and at once in
// Debug Eager. The error is the one CPU gives, with the op and the user's
// line that issued it. TORCH_TPU_INDEX_CHECKS=0 turns the device checks off.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lazy/node.h"

namespace tpu::ops {

struct IndexRule {
  const char* op;           // "aten::index_select"
  bool index_error;         // IndexError (TORCH_CHECK_INDEX) or RuntimeError
  bool allow_negative;      // valid range [-size, size) instead of [0, size)
  // The message around the offending value: before + value + after; with
  // show_value false, `before` alone.
  std::string before, after;
  bool show_value = true;
};

// Checks that every element of `index` is in range for a dimension of
// `size` (ignoring elements equal to `ignore`, as nll_loss's ignore_index).
void CheckIndexRange(const IndexRule& rule, const at::Tensor& index, int64_t size,
                     std::optional<int64_t> ignore = std::nullopt);

// "index 5 is out of bounds for dimension 0 with size 3" as a rule.
IndexRule OutOfBoundsRule(const char* op, bool index_error, bool allow_negative, int64_t dim,
                          int64_t size, const char* prefix = "");

// Raises the first recorded device-side index error, if any (reads the
// device record; a no-op when nothing was checked since the last read).
void RaisePendingIndexErrors();

// On unless TORCH_TPU_INDEX_CHECKS=0; torch_tpu.set_index_checks switches it.
bool IndexChecksEnabled();

// torch.compile (compile/graph_capture.cc): a captured graph's checks read and write
// the same device record as eager ops. A capture notes the record and the
// number of recorded checks when it starts; at each replay it passes the
// record's current node to the program, stores the program's new record and
// appends the checks it captured, in order.
struct IndexCheckMark {
  lazy::NodePtr record;  // the record's node when the capture started (null: none yet)
  size_t checks = 0;     // checks recorded before it
};
IndexCheckMark MarkIndexChecks();
// The checks recorded since `mark`, and the record's node now.
struct CapturedIndexChecks {
  std::vector<std::pair<IndexRule, const std::string*>> checks;
  lazy::NodePtr record;
};
CapturedIndexChecks IndexChecksSince(const IndexCheckMark& mark);
// The record's node to pass to a replay (creating the record if needed).
lazy::NodePtr IndexRecordForReplay();
// After a replay: the program's new record and the checks it ran.
void AfterReplay(lazy::NodePtr record,
                 const std::vector<std::pair<IndexRule, const std::string*>>& checks);
void SetIndexChecks(bool on);

}  // namespace tpu::ops
