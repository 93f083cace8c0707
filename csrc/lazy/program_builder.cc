// Turns a batch of recorded ops into one program: its parameters (the
// buffers it reads, each once), its outputs (the results someone still
// holds), the run-time offsets of strided views, the structural cache key
// (everything that shapes the program, nothing of its data) and, on a
// cache miss only, the StableHLO text.
#include <algorithm>
#include <array>
#include <unordered_map>

#include "ir/ops.h"
#include "lazy/batch.h"
#include "lazy/views.h"

namespace tpu::lazy {

namespace {

// `dynamic`: the offset is a run-time operand, not part of the program.
void WriteView(KeyWriter& k, const ViewSpec& v, bool dynamic) {
  k.Ints(v.sizes);
  k.Ints(v.strides);
  k.Int(dynamic ? -1 : v.offset);
  k.Int(static_cast<int64_t>(v.dtype));
}

}  // namespace

Executor::Program Executor::BuildProgram(const Batch& batch, const Captured* capture) {
  Program prog;
  using Ref = Program::Ref;
  auto& params = prog.params;
  auto& param_nodes = prog.param_nodes;
  std::unordered_map<const BufferNode*, int> param_index;
  std::string& failure = prog.failure;
  auto ref_of = [&](const NodePtr& n) {
    Ref ref;
    if (n->deferred()) {
      ref.rec = n->producer_->index;
      if (ref.rec >= static_cast<int>(batch.size()) || batch[ref.rec] != n->producer_)
        throw std::logic_error("tpu: deferred node outside the batch");
      ref.out = n->producer_output_;
      ++n->flush_uses_;
      return ref;
    }
    if (n->failed() && failure.empty()) failure = n->error();
    // A short scan while there are few parameters, then a map.
    if (params.size() <= 16) {
      for (size_t i = 0; i < params.size(); ++i)
        if (params[i] == n.get()) {
          ref.param = static_cast<int>(i);
          return ref;
        }
      if (params.size() == 16)
        for (size_t i = 0; i < params.size(); ++i) param_index.emplace(params[i], static_cast<int>(i));
    } else {
      auto it = param_index.find(n.get());
      if (it != param_index.end()) {
        ref.param = it->second;
        return ref;
      }
    }
    if (params.size() >= 16) param_index.emplace(n.get(), static_cast<int>(params.size()));
    params.push_back(n.get());
    param_nodes.push_back(n);
    ref.param = static_cast<int>(params.size()) - 1;
    return ref;
  };
  // Internal references hold their node, so the lock always succeeds.
  auto type_of = [&](const Ref& r) -> const ir::TensorType& {
    if (r.param >= 0) return params[r.param]->type();
    return batch[r.rec]->outs[r.out].result.lock()->type();
  };
  auto& in_at = prog.in_at;
  auto& out_at = prog.out_at;
  in_at.assign(batch.size() + 1, 0);
  out_at.assign(batch.size() + 1, 0);
  for (size_t r = 0; r < batch.size(); ++r) {
    in_at[r + 1] = in_at[r] + batch[r]->inputs.size();
    out_at[r + 1] = out_at[r] + batch[r]->outs.size();
  }
  auto& in_refs = prog.in_refs;
  auto& base_refs = prog.base_refs;
  in_refs.resize(in_at.back());
  base_refs.resize(out_at.back());
  for (size_t r = 0; r < batch.size(); ++r) {
    for (size_t i = 0; i < batch[r]->inputs.size(); ++i)
      in_refs[in_at[r] + i] = ref_of(batch[r]->inputs[i].node);
    for (size_t o = 0; o < batch[r]->outs.size(); ++o)
      if (batch[r]->outs[o].base) base_refs[out_at[r] + o] = ref_of(batch[r]->outs[o].base);
  }
  prog.param_refs.assign(params.size(), 0);
  for (const Ref& ref : in_refs)
    if (ref.param >= 0) ++prog.param_refs[ref.param];
  for (const Ref& ref : base_refs)
    if (ref.param >= 0) ++prog.param_refs[ref.param];
  // Results that someone outside this batch still holds are the outputs.
  auto& live = prog.live;
  auto& live_at = prog.live_at;
  for (size_t r = 0; r < batch.size(); ++r) {
    for (size_t o = 0; o < batch[r]->outs.size(); ++o) {
      NodePtr n = batch[r]->outs[o].result.lock();
      if (!n) continue;
      const long internal = n->flush_uses_;
      n->flush_uses_ = 0;
      if (n.use_count() - 1 > internal) {
        live.push_back(n);
        live_at.emplace_back(static_cast<int>(r), static_cast<int>(o));
      }
    }
  }
  if (!failure.empty()) return prog;  // an input failed earlier: nothing is built

  // Donation candidates: an output that is a storage's new value, from
  // in-place updates (optimizer steps, `x[i] = v`, `add_`, a graph's copy_
  // into a parameter) of a parameter of the same type, the storage's value
  // when the batch began. `donor` follows a storage through the batch: a
  // write's donor is that of the value it replaces, when the batch reads
  // that value (a parameter) or made it.
  {
    std::vector<int> donor(out_at.back(), -1);
    for (size_t r = 0; r < batch.size(); ++r) {
      const PendingOp& p = *batch[r];
      for (size_t o = 0; o < p.outs.size(); ++o) {
        const PendingOp::Out& out = p.outs[o];
        Ref prev;
        if (out.store == Store::kPartial && out.base) {
          prev = base_refs[out_at[r] + o];
        } else if (out.store == Store::kWhole) {
          NodePtr n = out.prev.lock();
          if (!n) continue;
          if (n->deferred()) {
            const int rec = n->producer_->index;
            if (rec >= static_cast<int>(r) || batch[rec] != n->producer_) continue;
            prev.rec = rec;
            prev.out = n->producer_output_;
          } else {
            // As ref_of looks parameters up: a scan while there are few,
            // then its map (which holds them all past 16).
            if (params.size() <= 16) {
              for (size_t i = 0; i < params.size() && prev.param < 0; ++i)
                if (params[i] == n.get()) prev.param = static_cast<int>(i);
            } else if (auto it = param_index.find(n.get()); it != param_index.end()) {
              prev.param = it->second;
            }
            if (prev.param < 0) continue;
          }
        }
        donor[out_at[r] + o] = prev.param >= 0 ? prev.param
                               : prev.rec >= 0 ? donor[out_at[prev.rec] + prev.out] : -1;
      }
    }
    std::vector<char> aliased(params.size(), 0);
    for (size_t k = 0; k < live_at.size(); ++k) {
      const int param = donor[out_at[live_at[k].first] + live_at[k].second];
      if (param < 0 || aliased[param] || params[param]->type() != live[k]->type()) continue;
      aliased[param] = 1;
      prog.aliases.emplace_back(param, static_cast<int>(k));
    }
  }

  // Offsets of contiguous runs as run-time operands (see HasDynamicOffset).
  const bool blocks = !(capture && !capture->dynamic.empty());
  auto& offsets = prog.offsets;
  auto& in_offset = prog.in_offset;
  auto& out_offset = prog.out_offset;
  in_offset.assign(in_at.back(), -1);
  out_offset.assign(out_at.back(), -1);
  for (size_t r = 0; r < batch.size(); ++r) {
    for (size_t i = 0; i < batch[r]->inputs.size(); ++i) {
      const bool dyn =
          HasDynamicOffset(batch[r]->inputs[i].view, type_of(in_refs[in_at[r] + i]), blocks,
                           /*read=*/true);
      if (dyn) in_offset[in_at[r] + i] = static_cast<int>(offsets.size());
      if (dyn) offsets.push_back(batch[r]->inputs[i].view.offset);
    }
    for (size_t o = 0; o < batch[r]->outs.size(); ++o) {
      const auto& out = batch[r]->outs[o];
      const bool dyn = out.store == Store::kPartial && out.base &&
                       HasDynamicOffset(out.view, type_of(base_refs[out_at[r] + o]), blocks);
      if (dyn) out_offset[out_at[r] + o] = static_cast<int>(offsets.size());
      if (dyn) offsets.push_back(out.view.offset);
    }
  }

  // The key: everything that shapes the program.
  KeyWriter k;
  k.str().reserve(64 + 32 * params.size() + 160 * batch.size());
  k.Int(static_cast<int64_t>(batch.size()));
  for (const BufferNode* p : params) k.Type(p->type());
  auto key_ref = [&](const Ref& ref) {
    k.Int(ref.param);
    k.Int(ref.rec);
    k.Int(ref.out);
  };
  for (size_t r = 0; r < batch.size(); ++r) {
    const PendingOp& p = *batch[r];
    k.Str(p.op.name);
    k.Ints(p.attrs.ints);
    k.Int(static_cast<int64_t>(p.attrs.floats.size()));
    for (double f : p.attrs.floats) k.Double(f);
    k.Str(p.attrs.str);
    k.Int(static_cast<int64_t>(p.inputs.size()));
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      key_ref(in_refs[in_at[r] + i]);
      WriteView(k, p.inputs[i].view, in_offset[in_at[r] + i] >= 0);
    }
    k.Int(static_cast<int64_t>(p.outs.size()));
    for (size_t o = 0; o < p.outs.size(); ++o) {
      const auto& out = p.outs[o];
      k.Type(out.type);
      k.Int(static_cast<int64_t>(out.store));
      if (out.store != Store::kFresh) WriteView(k, out.view, out_offset[out_at[r] + o] >= 0);
      if (out.store == Store::kPartial) {
        key_ref(base_refs[out_at[r] + o]);
        k.Int(out.storage_numel);
      }
    }
  }
  for (const auto& [r, o] : live_at) {
    k.Int(r);
    k.Int(o);
  }
  k.Int(static_cast<int64_t>(prog.aliases.size()));
  for (const auto& [param, out] : prog.aliases) {
    k.Int(param);
    k.Int(out);
  }
  // The largest tensor that the program reads or that one of its ops makes.
  // A program that makes float8 values is never compiled the quick way:
  // XLA CPU's elemental emitters convert f32 to f8e4m3fn through f16, which
  // rounds twice (5.2507 gave 5.0 where CPU and the fusion emitters give 5.5).
  int64_t largest = 0;
  bool float8 = false;
  for (const BufferNode* p : params) largest = std::max(largest, p->type().numel());
  for (const auto& rec : batch)
    for (const auto& out : rec->outs) {
      largest = std::max(largest, out.type.numel());
      float8 = float8 || ir::IsFloat8(out.type.dtype) ||
               (out.store != Store::kFresh && ir::IsFloat8(out.view.dtype));
    }
  // Only a program of a few ops: the elemental emitters launch one kernel per
  // op, where the fusion emitters make one loop of a chain, so a Fused Eager
  // batch of a thousand small elementwise ops ran 4.6 ms compiled the quick
  // way against 0.1 ms fully optimized (benchmarks/dispatch.py).
  constexpr size_t kQuickCompileMaxOps = 8;
  prog.quick = !float8 && batch.size() <= kQuickCompileMaxOps && largest <= QuickCompileElements();
  prog.excess_precision = AllowExcessPrecision();
  k.Int(static_cast<int64_t>(prog.quick) | (static_cast<int64_t>(prog.excess_precision) << 1));
  // Bounded dynamism (capture only): (parameter, dim, size) triples.
  auto& dyn = prog.dyn;
  if (capture) {
    for (const auto& d : capture->dynamic)
      for (size_t i = 0; i < params.size(); ++i)
        if (params[i] == d.node.get()) dyn.push_back({static_cast<int>(i), d.dim, d.size});
    if (!capture->dynamic.empty()) {
      k.Str("dynamic");
      k.Int(static_cast<int64_t>(capture->sizes.size()));
      for (const auto& t : dyn)
        for (int v : t) k.Int(v);
    }
  }
  prog.num_sizes = capture && !capture->dynamic.empty() ? capture->sizes.size() : 0;
  std::string& name = prog.name;
  name = batch.size() == 1 ? std::string(batch[0]->op.name)
                           : "fused(" + std::to_string(batch.size()) + " ops, " +
                                 batch[0]->op.name + "...)";
  if (capture) {
    k.Str("graph");
    name = "graph(" + std::to_string(batch.size()) + " ops)";
  }
  prog.key = std::move(k.str());
  return prog;
}

std::string Executor::Program::Print(const Batch& batch) const {
  ir::Builder b;
  std::vector<ir::Value> pvals, offset_vals, size_vals;
  std::vector<int> alias_of(params.size(), -1);
  for (const auto& [param, out] : aliases) alias_of[param] = out;
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<ir::Attr> attrs;
    if (alias_of[i] >= 0) attrs.push_back({"tf.aliasing_output", std::to_string(alias_of[i]) + " : i32"});
    pvals.push_back(b.Param(params[i]->type(), std::move(attrs)));
  }
  for (size_t i = 0; i < offsets.size(); ++i)
    offset_vals.push_back(b.Param(ir::TensorType{ir::DType::S64, {}}));
  for (size_t i = 0; i < num_sizes; ++i)
    size_vals.push_back(b.Param(ir::TensorType{ir::DType::S32, {}}));
  b.set_dynamic(num_sizes > 0);
  for (const auto& [pi, dim, si] : dyn)
    pvals[pi] = b.Op1("stablehlo.set_dimension_size", {pvals[pi], size_vals[si]},
                      b.type(pvals[pi]), {{"dimension", std::to_string(dim) + " : i64"}});
  std::vector<std::vector<ir::Value>> vals(batch.size());
  auto value_of = [&](const Ref& ref) { return ref.param >= 0 ? pvals[ref.param] : vals[ref.rec][ref.out]; };
  for (size_t r = 0; r < batch.size(); ++r) {
    const PendingOp& p = *batch[r];
    std::vector<ir::Value> ins;
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      ir::Value base = value_of(in_refs[in_at[r] + i]);
      ins.push_back(in_offset[in_at[r] + i] >= 0
                        ? ReadViewAt(b, base, p.inputs[i].view, offset_vals[in_offset[in_at[r] + i]])
                        : ReadView(b, base, p.inputs[i].view));
    }
    std::vector<ir::TensorType> out_types;
    for (const auto& o : p.outs) out_types.push_back(o.type);
    std::vector<ir::Value> outs = p.op.fn(b, ins, p.attrs, out_types);
    if (outs.size() != p.outs.size())
      throw std::logic_error(std::string("lowering of ") + p.op.name + " returned a wrong count");
    for (size_t o = 0; o < p.outs.size(); ++o) {
      const auto& out = p.outs[o];
      ir::Value v = outs[o];
      if (b.type(v) != out.type)
        throw std::logic_error(std::string("lowering of ") + p.op.name + " returned " +
                               ir::TypeText(b.type(v)) + ", expected " +
                               ir::TypeText(out.type));
      if (out.store != Store::kFresh)
        v = ir::Reshape(b, ir::Convert(b, v, out.view.dtype), out.view.sizes);
      if (out.store == Store::kPartial) {
        ir::Value base = out.base ? value_of(base_refs[out_at[r] + o])
                                  : ir::Full(b, ir::ConstantI(b, 0, out.view.dtype),
                                             {out.storage_numel});
        v = out_offset[out_at[r] + o] >= 0
                ? WriteViewAt(b, base, out.view, v, offset_vals[out_offset[out_at[r] + o]])
                : lazy::WriteView(b, base, out.view, v);
        v = ir::Reshape(b, v, b.type(base).dims);
      }
      vals[r].push_back(v);
    }
  }
  std::vector<ir::Value> results;
  for (const auto& [r, o] : live_at)
    results.push_back(num_sizes ? ir::MakeStatic(b, vals[r][o]) : vals[r][o]);
  return b.Print(results);
}

}  // namespace tpu::lazy
