#include "lazy/executor.h"

#include <chrono>
#include <cstring>
#include <stdexcept>

#include "ir/ops.h"
#include "lazy/runtime.h"
#include "lazy/views.h"
#include "pjrt/pjrt.h"

namespace tpu::lazy {

namespace {

pjrt::ElementType ToPjrt(ir::DType t) {
  using E = pjrt::ElementType;
  switch (t) {
    case ir::DType::PRED: return E::PRED;
    case ir::DType::S8: return E::S8;
    case ir::DType::S16: return E::S16;
    case ir::DType::S32: return E::S32;
    case ir::DType::S64: return E::S64;
    case ir::DType::U8: return E::U8;
    case ir::DType::U16: return E::U16;
    case ir::DType::U32: return E::U32;
    case ir::DType::U64: return E::U64;
    case ir::DType::F16: return E::F16;
    case ir::DType::BF16: return E::BF16;
    case ir::DType::F32: return E::F32;
    case ir::DType::F64: return E::F64;
    case ir::DType::C64: return E::C64;
    case ir::DType::C128: return E::C128;
  }
  return E::INVALID;
}

size_t ItemSize(ir::DType t) { return t == ir::DType::PRED ? 1 : ir::BitWidth(t) / 8; }

// `dynamic`: the offset is a run-time operand, not part of the program.
void WriteView(KeyWriter& k, const ViewSpec& v, bool dynamic = false) {
  k.Ints(v.sizes);
  k.Ints(v.strides);
  k.Int(dynamic ? -1 : v.offset);
  k.Int(static_cast<int64_t>(v.dtype));
}

// How an output reaches its storage.
enum class Store : int64_t { kFresh = 0, kWhole = 1, kPartial = 2 };

Store StoreKind(const OutputTarget& o) {
  if (!o.slot) return Store::kFresh;
  const int64_t n = static_cast<int64_t>(o.slot->nbytes / ItemSize(o.view.dtype));
  if (CoversWhole(o.view, n)) return Store::kWhole;
  return Store::kPartial;
}

}  // namespace

NodePtr BufferNode::Failed(ir::TensorType type, std::string error) {
  return NodePtr(new BufferNode(std::move(type), std::move(error)));
}

const std::shared_ptr<pjrt::Buffer>& BufferNode::buffer() const {
  if (!error_.empty()) throw std::runtime_error(error_);
  return buffer_;
}

size_t BufferNode::nbytes() const { return type_.numel() * ItemSize(type_.dtype); }

struct Executor::Entry {
  std::once_flag once;
  std::unique_ptr<pjrt::Executable> exe;
  std::string error;
};

Executor& Executor::Get() {
  static Executor* e = new Executor();  // never destroyed: outlives static teardown
  return *e;
}

std::shared_ptr<Executor::Entry> Executor::Lookup(const std::string& key, bool* hit) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.requests;
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    ++stats_.hits;
    *hit = true;
    return it->second;
  }
  *hit = false;
  auto e = std::make_shared<Entry>();
  cache_.emplace(key, e);
  return e;
}

std::vector<NodePtr> Executor::Run(const Lowering& op, const Attrs& attrs,
                                   const std::vector<Operand>& inputs,
                                   const std::vector<OutputTarget>& outputs) {
  // Parameters: each distinct input node once, then the storages that
  // partial writes update.
  std::vector<const BufferNode*> params;
  std::vector<int> input_param(inputs.size());
  auto param_of = [&](const BufferNode* n) {
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i] == n) return static_cast<int>(i);
    params.push_back(n);
    return static_cast<int>(params.size()) - 1;
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].node->failed()) {
      // An input failed earlier: the results carry its error.
      std::vector<NodePtr> failed;
      for (const auto& o : outputs) {
        failed.push_back(BufferNode::Failed(o.type, inputs[i].node->error()));
        if (o.slot) o.slot->node = failed.back();
      }
      return failed;
    }
    input_param[i] = param_of(inputs[i].node.get());
  }
  std::vector<Store> stores(outputs.size());
  std::vector<int> base_param(outputs.size(), -1);
  for (size_t i = 0; i < outputs.size(); ++i) {
    stores[i] = StoreKind(outputs[i]);
    if (stores[i] == Store::kPartial && outputs[i].slot->node)
      base_param[i] = param_of(outputs[i].slot->node.get());
  }
  // Views at a changing offset get it as a trailing s64 parameter.
  std::vector<int64_t> offsets;  // values of the offset parameters, in order
  std::vector<int> in_offset(inputs.size(), -1), out_offset(outputs.size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (HasDynamicOffset(inputs[i].view, inputs[i].node->type())) {
      in_offset[i] = static_cast<int>(offsets.size());
      offsets.push_back(inputs[i].view.offset);
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (base_param[i] >= 0 && HasDynamicOffset(outputs[i].view, params[base_param[i]]->type())) {
      out_offset[i] = static_cast<int>(offsets.size());
      offsets.push_back(outputs[i].view.offset);
    }
  }

  // The key: everything that shapes the program.
  KeyWriter k;
  k.Str(op.name);
  k.Ints(attrs.ints);
  k.Int(static_cast<int64_t>(attrs.floats.size()));
  for (double f : attrs.floats) k.Double(f);
  k.Str(attrs.str);
  for (const BufferNode* p : params) k.Type(p->type());
  for (size_t i = 0; i < inputs.size(); ++i) {
    k.Int(input_param[i]);
    WriteView(k, inputs[i].view, in_offset[i] >= 0);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    k.Type(outputs[i].type);
    k.Int(static_cast<int64_t>(stores[i]));
    if (stores[i] != Store::kFresh) WriteView(k, outputs[i].view, out_offset[i] >= 0);
    if (stores[i] == Store::kPartial) {
      k.Int(base_param[i]);
      k.Int(static_cast<int64_t>(outputs[i].slot->nbytes));
    }
  }

  bool hit = false;
  std::shared_ptr<Entry> entry = Lookup(k.str(), &hit);
  std::call_once(entry->once, [&] {
    ir::Builder b;
    std::vector<ir::Value> pvals;
    for (const BufferNode* p : params) pvals.push_back(b.Param(p->type()));
    std::vector<ir::Value> offset_vals;
    for (size_t i = 0; i < offsets.size(); ++i)
      offset_vals.push_back(b.Param(ir::TensorType{ir::DType::S64, {}}));
    std::vector<ir::Value> ins;
    for (size_t i = 0; i < inputs.size(); ++i) {
      ins.push_back(in_offset[i] >= 0
                        ? ReadViewAt(b, pvals[input_param[i]], inputs[i].view,
                                     offset_vals[in_offset[i]])
                        : ReadView(b, pvals[input_param[i]], inputs[i].view));
    }
    std::vector<ir::TensorType> out_types;
    for (const auto& o : outputs) out_types.push_back(o.type);
    std::vector<ir::Value> outs = op.fn(b, ins, attrs, out_types);
    if (outs.size() != outputs.size())
      throw std::logic_error(std::string("lowering of ") + op.name + " returned a wrong count");
    std::vector<ir::Value> results;
    for (size_t i = 0; i < outputs.size(); ++i) {
      ir::Value v = outs[i];
      if (b.type(v) != outputs[i].type)
        throw std::logic_error(std::string("lowering of ") + op.name + " returned " +
                               ir::TypeText(b.type(v)) + ", expected " +
                               ir::TypeText(outputs[i].type));
      if (stores[i] != Store::kFresh) {
        v = ir::Reshape(b, ir::Convert(b, v, outputs[i].view.dtype), outputs[i].view.sizes);
      }
      if (stores[i] == Store::kPartial) {
        const int64_t n =
            static_cast<int64_t>(outputs[i].slot->nbytes / ItemSize(outputs[i].view.dtype));
        ir::Value base = base_param[i] >= 0
                             ? pvals[base_param[i]]
                             : ir::Full(b, ir::ConstantI(b, 0, outputs[i].view.dtype), {n});
        v = out_offset[i] >= 0
                ? WriteViewAt(b, base, outputs[i].view, v, offset_vals[out_offset[i]])
                : lazy::WriteView(b, base, outputs[i].view, v);
        // The storage keeps its node's dims, so the next op's key is the same.
        v = ir::Reshape(b, v, b.type(base).dims);
      }
      results.push_back(v);
    }
    const std::string text = b.Print(results);
    auto t0 = std::chrono::steady_clock::now();
    try {
      entry->exe = Runtime::Get().client().Compile(text);
    } catch (const std::exception& e) {
      entry->error = std::string("tpu: compiling ") + op.name + " failed: " + e.what() +
                     "\nProgram:\n" + text;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.compiles;
    stats_.compile_seconds += secs;
    stats_.entries.emplace_back(op.name, secs);
  });
  if (!entry->exe) throw std::runtime_error(entry->error);

  Runtime& rt = Runtime::Get();
  std::vector<PJRT_Buffer*> args;
  for (const BufferNode* p : params) args.push_back(p->buffer()->raw());
  std::vector<NodePtr> offset_nodes;  // keep the scalars alive over the call
  for (int64_t off : offsets) {
    offset_nodes.push_back(Scalar(&off, ir::DType::S64));
    args.push_back(offset_nodes.back()->buffer()->raw());
  }
  std::unique_ptr<pjrt::Event> done;
  auto bufs = entry->exe->Execute(args, {}, &done);
  if (done) rt.AddPending(std::move(done));
  std::vector<NodePtr> result;
  for (size_t i = 0; i < outputs.size(); ++i) {
    ir::TensorType t = outputs[i].type;
    if (stores[i] == Store::kWhole) t = {outputs[i].view.dtype, outputs[i].view.sizes};
    if (stores[i] == Store::kPartial) {
      t = base_param[i] >= 0 ? params[base_param[i]]->type()
                             : ir::TensorType{outputs[i].view.dtype,
                                              {static_cast<int64_t>(outputs[i].slot->nbytes /
                                                                    ItemSize(outputs[i].view.dtype))}};
    }
    result.push_back(std::make_shared<BufferNode>(t, rt.Track(std::move(bufs[i])), op.name));
    if (outputs[i].slot) outputs[i].slot->node = result.back();
  }
  return result;
}

NodePtr Executor::Upload(const void* data, ir::DType dtype, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& byte_strides) {
  Runtime& rt = Runtime::Get();
  auto buf = rt.client().BufferFromHost(data, ToPjrt(dtype), dims, byte_strides);
  return std::make_shared<BufferNode>(ir::TensorType{dtype, dims}, rt.Track(std::move(buf)),
                                      "host-to-device copy");
}

NodePtr Executor::Scalar(const void* bits, ir::DType dtype) {
  const size_t n = ItemSize(dtype);
  std::string key(reinterpret_cast<const char*>(bits), n);
  key += static_cast<char>(dtype);
  {
    std::lock_guard<std::mutex> lock(scalar_mu_);
    auto it = scalars_.find(key);
    if (it != scalars_.end()) return it->second;
  }
  NodePtr node = Upload(bits, dtype, {});
  std::lock_guard<std::mutex> lock(scalar_mu_);
  if (scalars_.size() > 4096) scalars_.clear();
  scalars_.emplace(key, node);
  return node;
}

void Executor::Download(const NodePtr& node, void* dst, size_t nbytes) {
  const auto& buf = node->buffer();
  try {
    buf->ToHost(dst, nbytes);
  } catch (const pjrt::Error& e) {
    throw std::runtime_error(std::string("tpu: ") + node->origin() + " failed: " + e.what());
  }
}

CacheStats Executor::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Executor::ClearCache() {
  std::lock_guard<std::mutex> lock(mu_);
  cache_.clear();
}

}  // namespace tpu::lazy
