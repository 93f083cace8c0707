#include "ir/ir.h"

#include <stdexcept>

namespace tpu::ir {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::PRED: return "i1";
    case DType::S8: return "i8";
    case DType::S16: return "i16";
    case DType::S32: return "i32";
    case DType::S64: return "i64";
    case DType::U8: return "ui8";
    case DType::U16: return "ui16";
    case DType::U32: return "ui32";
    case DType::U64: return "ui64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::C64: return "complex<f32>";
    case DType::C128: return "complex<f64>";
    case DType::F8E5M2: return "f8E5M2";
    case DType::F8E4M3FN: return "f8E4M3FN";
    case DType::F8E5M2FNUZ: return "f8E5M2FNUZ";
    case DType::F8E4M3FNUZ: return "f8E4M3FNUZ";
    case DType::C32: return "ui32";
  }
  return "?";
}

bool IsFloat8(DType t) {
  return t == DType::F8E5M2 || t == DType::F8E4M3FN || t == DType::F8E5M2FNUZ ||
         t == DType::F8E4M3FNUZ;
}
bool IsFloat(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64 || IsFloat8(t);
}
bool IsComplex(DType t) { return t == DType::C64 || t == DType::C128; }
bool IsSigned(DType t) {
  return t == DType::S8 || t == DType::S16 || t == DType::S32 || t == DType::S64;
}
bool IsUnsigned(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
bool IsInteger(DType t) { return IsSigned(t) || IsUnsigned(t); }

int BitWidth(DType t) {
  switch (t) {
    case DType::PRED: return 1;
    case DType::S8: case DType::U8: return 8;
    case DType::F8E5M2: case DType::F8E4M3FN: case DType::F8E5M2FNUZ: case DType::F8E4M3FNUZ:
      return 8;
    case DType::S16: case DType::U16: case DType::F16: case DType::BF16: return 16;
    case DType::S32: case DType::U32: case DType::F32: case DType::C32: return 32;
    case DType::S64: case DType::U64: case DType::F64: case DType::C64: return 64;
    case DType::C128: return 128;
  }
  return 0;
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string TypeText(const TensorType& t) {
  std::string s = "tensor<";
  for (int64_t d : t.dims) {
    s += std::to_string(d);
    s += 'x';
  }
  s += DTypeName(t.dtype);
  s += '>';
  return s;
}

Builder::Builder() : current_(&top_) {}

Value Builder::NewValue(const TensorType& t) {
  Value v{static_cast<int32_t>(types_.size())};
  types_.push_back(t);
  names_.push_back("%" + std::to_string(v.id));
  return v;
}

const TensorType& Builder::type(Value v) const {
  if (v.id < 0 || static_cast<size_t>(v.id) >= types_.size())
    throw std::logic_error("ir::Builder: invalid value");
  return types_[v.id];
}

Value Builder::Param(const TensorType& type, std::vector<Attr> attrs) {
  if (!ops_.empty()) throw std::logic_error("ir::Builder: parameters must precede ops");
  Value v = NewValue(type);
  names_[v.id] = "%arg" + std::to_string(params_.size());
  params_.push_back(v);
  param_attrs_.push_back(std::move(attrs));
  return v;
}

namespace {

// The ops that move complex32 values without computing on them: on its
// packed ui32 form they give the same bits a complex<f16> op would. Regions
// (a scatter's combiner, a sort's comparator) are checked op by op.
bool MovesC32(const std::string& name) {
  static const char* const kMoves[] = {
      "stablehlo.slice", "stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice",
      "stablehlo.concatenate", "stablehlo.reshape", "stablehlo.transpose",
      "stablehlo.broadcast_in_dim", "stablehlo.select", "stablehlo.pad", "stablehlo.gather",
      "stablehlo.scatter", "stablehlo.reverse", "stablehlo.bitcast_convert", "stablehlo.return",
      "stablehlo.sort", "stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.while",
      "stablehlo.case", "stablehlo.if", "stablehlo.tuple", "stablehlo.get_tuple_element",
      "stablehlo.optimization_barrier", "stablehlo.set_dimension_size",
      "stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.collective_permute",
      "stablehlo.all_reduce", "stablehlo.reduce_scatter",
  };
  for (const char* m : kMoves)
    if (name == m) return true;
  return false;
}

}  // namespace

std::vector<Value> Builder::Op(const std::string& name, const std::vector<Value>& operands,
                               const std::vector<TensorType>& results, std::vector<Attr> attrs,
                               std::vector<Region> regions) {
  bool c32 = false;
  for (Value v : operands) c32 = c32 || type(v).dtype == DType::C32;  // also validates ids
  for (const TensorType& t : results) c32 = c32 || t.dtype == DType::C32;
  if (c32 && !MovesC32(name))
    throw std::invalid_argument(
        "this op does not support complex32 (torch.chalf) on tpu yet (it would need " + name +
        " on complex<f16>); convert the tensor with .to(torch.complex64) first");
  OpRec rec;
  rec.name = name;
  rec.operands = operands;
  rec.attrs = std::move(attrs);
  // Region bodies are built first, into their own blocks.
  for (Region& r : regions) {
    Block block;
    for (const TensorType& t : r.arg_types) block.args.push_back(NewValue(t));
    Block* saved = current_;
    current_ = &block;
    std::vector<Value> rets = r.body(*this, block.args);
    std::vector<TensorType> ret_types;
    for (Value v : rets) ret_types.push_back(type(v));
    Op("stablehlo.return", rets, {});
    current_ = saved;
    rec.regions.push_back(std::move(block));
  }
  for (const TensorType& t : results) rec.results.push_back(NewValue(t));
  if (rec.results.size() > 1) {
    const std::string base = names_[rec.results[0].id];
    for (size_t i = 0; i < rec.results.size(); ++i)
      names_[rec.results[i].id] = base + "#" + std::to_string(i);
  }
  ops_.push_back(std::move(rec));
  current_->ops.push_back(static_cast<int>(ops_.size()) - 1);
  return ops_.back().results;
}

static void AppendTypeList(std::string& out, const std::vector<TensorType>& types) {
  out += '(';
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) out += ", ";
    out += TypeText(types[i]);
  }
  out += ')';
}

static void AppendAttrs(std::string& out, const std::vector<Attr>& attrs) {
  if (attrs.empty()) return;
  out += " {";
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (i) out += ", ";
    out += attrs[i].first;
    out += " = ";
    out += attrs[i].second;
  }
  out += '}';
}

void Builder::PrintOp(std::string& out, const OpRec& op, int indent) const {
  out.append(indent, ' ');
  if (!op.results.empty()) {
    const std::string& first = names_[op.results[0].id];
    if (op.results.size() == 1) {
      out += first;
    } else {
      out += first.substr(0, first.find('#'));
      out += ':';
      out += std::to_string(op.results.size());
    }
    out += " = ";
  }
  out += '"';
  out += op.name;
  out += "\"(";
  std::vector<TensorType> operand_types, result_types;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (i) out += ", ";
    out += names_[op.operands[i].id];
    operand_types.push_back(types_[op.operands[i].id]);
  }
  out += ')';
  if (!op.regions.empty()) {
    out += " (";
    for (size_t r = 0; r < op.regions.size(); ++r) {
      if (r) out += ", ";
      const Block& b = op.regions[r];
      out += "{\n";
      out.append(indent + 2, ' ');
      out += "^bb0(";
      for (size_t i = 0; i < b.args.size(); ++i) {
        if (i) out += ", ";
        out += names_[b.args[i].id];
        out += ": ";
        out += TypeText(types_[b.args[i].id]);
      }
      out += "):\n";
      for (int idx : b.ops) PrintOp(out, ops_[idx], indent + 4);
      out.append(indent, ' ');
      out += '}';
    }
    out += ')';
  }
  AppendAttrs(out, op.attrs);
  for (Value v : op.results) result_types.push_back(types_[v.id]);
  out += " : ";
  AppendTypeList(out, operand_types);
  out += " -> ";
  if (result_types.size() == 1) {
    out += TypeText(result_types[0]);
  } else {
    AppendTypeList(out, result_types);
  }
  out += '\n';
}

void Builder::AddFunction(const std::string& name, const std::string& text) {
  for (const auto& f : functions_)
    if (f.first == name) return;
  functions_.emplace_back(name, text);
}

std::string Builder::Print(const std::vector<Value>& results, int num_replicas,
                           int num_partitions) const {
  std::string out;
  out.reserve(256 + ops_.size() * 96);
  out += "module @main attributes {mhlo.num_partitions = ";
  out += std::to_string(num_partitions);
  out += " : i32, mhlo.num_replicas = ";
  out += std::to_string(num_replicas);
  out += " : i32} {\n  func.func public @main(";
  for (size_t i = 0; i < params_.size(); ++i) {
    if (i) out += ", ";
    out += names_[params_[i].id];
    out += ": ";
    out += TypeText(types_[params_[i].id]);
    AppendAttrs(out, param_attrs_[i]);
  }
  out += ") -> ";
  std::vector<TensorType> result_types;
  for (Value v : results) result_types.push_back(type(v));
  AppendTypeList(out, result_types);
  out += " {\n";
  for (int idx : top_.ops) PrintOp(out, ops_[idx], 4);
  out += "    \"func.return\"(";
  for (size_t i = 0; i < results.size(); ++i) {
    if (i) out += ", ";
    out += names_[results[i].id];
  }
  out += ") : ";
  AppendTypeList(out, result_types);
  out += " -> ()\n  }\n";
  for (const auto& f : functions_) {
    out += f.second;
    out += "\n";
  }
  out += "}\n";
  return out;
}

}  // namespace tpu::ir
