#include "aten/indexing/index_checks.h"

#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "ir/ops.h"
#include "lazy/modes.h"
#include "lazy/where.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"

namespace tpu::ops {

namespace {

// ins = (record s64[3], index, [ignore s64]); ints = (lo, size,
// has_ignore). record = (bad, value, n): n counts the checks that passed
// since the record was last read, so at the first failure it is the failing
// check's position in the host's list; from then on the record keeps it.
VS LowerIndexCheck(Builder& b, const VS& in, const lazy::Attrs& a, const TT&) {
  const DType s64 = DType::S64;
  Value idx = ir::Convert(b, in[1], s64);
  const int64_t k = b.type(idx).numel();
  idx = ir::Reshape(b, idx, {k});
  auto full = [&](int64_t v, int64_t n) { return ir::Full(b, ir::ConstantI(b, v, s64), {n}); };
  Value oob = ir::Binary(b, "stablehlo.or", ir::Compare(b, idx, full(a.ints[0], k), ir::Cmp::LT),
                         ir::Compare(b, idx, full(a.ints[1], k), ir::Cmp::GE));
  if (a.ints[2]) {
    Value keep = ir::Compare(b, idx, ir::BroadcastTo(b, in[2], {k}), ir::Cmp::NE);
    oob = ir::Binary(b, "stablehlo.and", oob, keep);
  }
  Value any = ir::Reduce(b, oob, ir::ConstantI(b, 0, DType::PRED), {0}, "stablehlo.or");
  Value bad = ir::Select(b, oob, idx, ir::Full(b, ir::MinValue(b, s64), {k}));
  Value val = ir::Reshape(b, ir::Reduce(b, bad, ir::MinValue(b, s64), {0}, "stablehlo.maximum"), {1});
  Value rec = in[0];
  Value n = ir::Slice(b, rec, {2}, {3}, {1});
  Value failed = ir::Concatenate(b, {full(1, 1), val, n}, 0);
  Value passed = ir::Concatenate(b, {full(0, 1), full(0, 1), Add(b, n, full(1, 1))}, 0);
  Value rec_bad = ir::Compare(b, ir::Slice(b, rec, {0}, {1}, {1}), full(0, 1), ir::Cmp::NE);
  Value next = ir::Select(b, ir::BroadcastTo(b, ir::Reshape(b, any, {1}), {3}), failed, passed);
  return {ir::Select(b, ir::BroadcastTo(b, rec_bad, {3}), rec, next)};
}
constexpr lazy::Lowering kIndexCheck{"tpu::index_check", &LowerIndexCheck};

struct Pending {
  IndexRule rule;
  const std::string* where;
};

// Checks since the record was last read; a record's id indexes this list.
struct State {
  std::mutex mu;
  at::Tensor record;  // s64[3] on tpu
  std::vector<Pending> checks;
};
State& S() {
  static State* s = new State();  // never destroyed: tensors outlive exit order
  return *s;
}

// A record whose program failed (to compile or to run) carries that error,
// and every later check would inherit it: the failing op reported its error
// to the user already (at the op, or at the read of its result), and its
// checks are void. Start a fresh record.
void ResetIfFailedLocked(State& s) {
  if (!s.record.defined()) return;
  const lazy::NodePtr& node = SlotOf(s.record)->node;
  if (!node || !node->failed()) return;
  s.checks.clear();
  s.record = at::zeros({3}, s.record.options());
}

// Checks recorded before the record is read regardless (bounds the list
// in a loop that never reads a value).
constexpr size_t kMaxPending = 4096;

[[noreturn]] void Raise(const IndexRule& r, int64_t value, const std::string* where,
                        bool deferred) {
  std::string msg = r.before;
  if (r.show_value) msg += std::to_string(value) + r.after;
  std::string ctx = std::string(" (") + r.op + (where ? " at " + *where : "");
  if (deferred)
    ctx += "; checked on the device and raised at the next read of a tpu value, as CUDA's "
           "device-side asserts are: TORCH_TPU_LAUNCH_BLOCKING=1 raises it at the op";
  msg += ctx + ")";
  if (r.index_error) TORCH_CHECK_INDEX(false, msg);
  TORCH_CHECK(false, msg);
}

}  // namespace

namespace {
std::atomic<bool>& Enabled() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("TORCH_TPU_INDEX_CHECKS");
    return !(v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0));
  }()};
  return on;
}
}  // namespace

bool IndexChecksEnabled() { return Enabled().load(std::memory_order_relaxed); }
void SetIndexChecks(bool on) { Enabled().store(on); }

IndexRule OutOfBoundsRule(const char* op, bool index_error, bool allow_negative, int64_t dim,
                          int64_t size, const char* prefix) {
  return {op, index_error, allow_negative, std::string(prefix) + "index ",
          " is out of bounds for dimension " + std::to_string(dim) + " with size " +
              std::to_string(size)};
}

void CheckIndexRange(const IndexRule& rule, const at::Tensor& index, int64_t size,
                     std::optional<int64_t> ignore) {
  if (index.numel() == 0) return;
  const int64_t lo = rule.allow_negative ? -size : 0;
  if (index.device().is_cpu()) {
    at::Tensor i = index.to(at::kLong).reshape({-1});
    at::Tensor oob = i.lt(lo).logical_or(i.ge(size));
    if (ignore) oob = oob.logical_and(i.ne(*ignore));
    if (oob.any().item<bool>()) {
      Raise(rule, i.masked_select(oob)[0].item<int64_t>(), lazy::CurrentWhere(), false);
    }
    return;
  }
  if (!IndexChecksEnabled()) return;
  State& s = S();
  const std::string* where = lazy::CurrentWhere();  // takes the GIL: not under s.mu
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ResetIfFailedLocked(s);
    if (!s.record.defined()) s.record = at::zeros({3}, index.options().dtype(at::kLong));
    s.checks.push_back({rule, where});
    std::vector<lazy::Operand> in = Operands(OperandOf(s.record), OperandOf(index));
    if (ignore) in.push_back(ScalarOperand(*ignore, at::kLong));
    // Recorded without a launch of its own: it runs in the program of the
    // op that follows (the one whose indices these are).
    lazy::Executor& ex = lazy::Executor::Get();
    ex.BeginBatch();
    try {
      RunInto(kIndexCheck, {{lo, size, ignore.has_value()}, {}, {}}, std::move(in),
              {TypeOf({3}, at::kLong)}, {s.record});
    } catch (...) {
      ex.EndBatchDeferred();
      throw;
    }
    ex.EndBatchDeferred();
  }
  if (lazy::Executor::Get().capturing()) return;  // read after the graph runs
  if (lazy::CurrentMode() == lazy::EagerMode::kDeferNeverLaunchBlocking ||
      S().checks.size() >= kMaxPending)
    RaisePendingIndexErrors();
}

IndexCheckMark MarkIndexChecks() {
  // The record exists before the capture starts, so that a captured check
  // reads it as a program argument rather than a zeros op of its own.
  IndexRecordForReplay();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  return {OperandOf(s.record).node, s.checks.size()};
}

CapturedIndexChecks IndexChecksSince(const IndexCheckMark& mark) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  CapturedIndexChecks c;
  if (!s.record.defined()) return c;
  c.record = SlotOf(s.record)->node;
  for (size_t i = mark.checks; i < s.checks.size(); ++i)
    c.checks.emplace_back(s.checks[i].rule, s.checks[i].where);
  return c;
}

lazy::NodePtr IndexRecordForReplay() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.record.defined())
    s.record = at::zeros({3}, at::TensorOptions().dtype(at::kLong).device(c10::DeviceType::PrivateUse1));
  return OperandOf(s.record).node;
}

void AfterReplay(lazy::NodePtr record,
                 const std::vector<std::pair<IndexRule, const std::string*>>& checks) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    SlotOf(s.record)->node = std::move(record);
    for (const auto& [rule, where] : checks) s.checks.push_back({rule, where});
  }
  if (lazy::CurrentMode() == lazy::EagerMode::kDeferNeverLaunchBlocking ||
      S().checks.size() >= kMaxPending)
    RaisePendingIndexErrors();
}

void RaisePendingIndexErrors() {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mu);
  if (s.checks.empty()) return;
  lazy::NodePtr node = OperandOf(s.record).node;
  std::vector<Pending> checks;
  checks.swap(s.checks);
  // The next checks count from 0 again (a fresh record: no op of its own).
  s.record = at::zeros({3}, s.record.options());
  int64_t rec[3] = {0, 0, 0};
  try {
    lazy::Executor::Get().Download(node, rec, sizeof rec);
  } catch (const std::exception&) {
    // The program holding these checks failed; its op reports that error
    // (see ResetIfFailedLocked), and the checks are void.
    return;
  }
  if (rec[0] == 0) return;
  lock.unlock();
  const size_t id = static_cast<size_t>(rec[2]);
  const Pending& p = checks.at(id < checks.size() ? id : 0);
  Raise(p.rule, rec[1], p.where, true);
}

}  // namespace tpu::ops
