#include "dist/collective_program.h"

#include <set>
#include <stdexcept>

#include "ir/ops.h"

namespace tpu::dist {

using ir::Builder;
using ir::DType;
using ir::TensorType;
using ir::Value;

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kScatter: return "scatter";
    case Collective::kPermute: return "permute";
  }
  return "?";
}

const char* ReduceName(Reduce r) {
  switch (r) {
    case Reduce::kSum: return "sum";
    case Reduce::kAvg: return "avg";
    case Reduce::kProduct: return "product";
    case Reduce::kMin: return "min";
    case Reduce::kMax: return "max";
    case Reduce::kPremulSum: return "premul_sum";
  }
  return "?";
}

namespace {

[[noreturn]] void Bad(const CollectiveSpec& s, const std::string& what) {
  throw std::invalid_argument(std::string("tpu_dist ") + CollectiveName(s.kind) + ": " + what);
}

// "dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>"
std::string DenseI64Matrix(const std::vector<std::vector<int64_t>>& rows) {
  std::string body = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) body += ", ";
    body += ir::I64List(rows[i]);
  }
  body += "]";
  const size_t cols = rows.empty() ? 0 : rows[0].size();
  return "dense<" + body + "> : tensor<" + std::to_string(rows.size()) + "x" + std::to_string(cols) +
         "xi64>";
}

ir::Attr ReplicaGroups(const std::vector<std::vector<int64_t>>& groups) {
  return {"replica_groups", DenseI64Matrix(groups)};
}

// The reduction region of all_reduce / reduce_scatter: one plain binary op,
// so that XLA recognizes the reduction kind on every backend.
ir::Region ReductionRegion(DType t, Reduce r) {
  std::string op;
  switch (r) {
    case Reduce::kSum: case Reduce::kAvg: case Reduce::kPremulSum: op = "stablehlo.add"; break;
    case Reduce::kProduct: op = "stablehlo.multiply"; break;
    case Reduce::kMin: op = "stablehlo.minimum"; break;
    case Reduce::kMax: op = "stablehlo.maximum"; break;
  }
  TensorType scalar{t, {}};
  return ir::Region{{scalar, scalar}, [op](Builder& rb, const std::vector<Value>& a) {
                      return std::vector<Value>{ir::Binary(rb, op, a[0], a[1])};
                    }};
}

// Booleans reduce as u8 (sum and max = or, product and min = and, which is
// what PyTorch's backends do with bool); the result converts back.
DType ReduceType(DType t) { return t == DType::PRED ? DType::U8 : t; }

DType BitsType(DType t) {
  switch (ir::BitWidth(t)) {
    case 8: return DType::U8;
    case 16: return DType::U16;
    case 32: return DType::U32;
    default: return DType::U64;
  }
}

Value Bitcast(Builder& b, Value x, DType to) {
  TensorType t = b.type(x);
  t.dtype = to;
  return b.Op1("stablehlo.bitcast_convert", {x}, t);
}

// True on the replicas listed in `ids` (a 0-d PRED).
Value ReplicaIn(Builder& b, const std::vector<int64_t>& ids) {
  Value me = b.Op1("stablehlo.replica_id", {}, TensorType{DType::U32, {}});
  Value any;
  for (int64_t id : ids) {
    Value hit = ir::Compare(b, me, ir::ConstantI(b, id, DType::U32), ir::Cmp::EQ);
    any = any.valid() ? ir::Binary(b, "stablehlo.or", any, hit) : hit;
  }
  return any;
}

// Cross-replica mode (no channel): replica_groups hold replica ids.
Value AllReduce(Builder& b, Value x, const CollectiveSpec& s, Reduce r) {
  const TensorType t = b.type(x);
  return b.Op1("stablehlo.all_reduce", {x}, t,
               {ReplicaGroups(s.groups)},
               {ReductionRegion(t.dtype, r)});
}

}  // namespace

CollectiveProgram EmitCollective(const CollectiveSpec& spec_in) {
  CollectiveSpec s = spec_in;
  if (s.num_replicas < 1) Bad(s, "num_replicas must be >= 1");
  if (ir::IsComplex(s.input.dtype)) Bad(s, "complex tensors are not supported");
  if (s.groups.empty()) {
    s.groups.emplace_back();
    for (int i = 0; i < s.num_replicas; ++i) s.groups[0].push_back(i);
  }
  const int64_t g = static_cast<int64_t>(s.groups[0].size());
  std::set<int64_t> seen;
  for (const auto& grp : s.groups) {
    if (static_cast<int64_t>(grp.size()) != g) Bad(s, "replica groups must all have the same size");
    for (int64_t id : grp) {
      if (id < 0 || id >= s.num_replicas || !seen.insert(id).second) {
        Bad(s, "replica groups must hold distinct replica ids in [0, num_replicas)");
      }
    }
  }
  const bool reduces = s.kind == Collective::kAllReduce || s.kind == Collective::kReduceScatter;
  if (reduces && s.input.dtype == DType::PRED && (s.reduce == Reduce::kAvg || s.reduce == Reduce::kPremulSum)) {
    Bad(s, std::string("reduce op ") + ReduceName(s.reduce) + " is not supported for bool tensors");
  }
  if (reduces && s.reduce == Reduce::kPremulSum && !ir::IsFloat(s.input.dtype)) {
    Bad(s, "PREMUL_SUM needs a floating-point tensor");
  }
  const bool splits_dim0 = s.kind == Collective::kReduceScatter || s.kind == Collective::kAllToAll ||
                           s.kind == Collective::kScatter;
  if (s.kind != Collective::kAllReduce && s.kind != Collective::kBroadcast && s.kind != Collective::kPermute &&
      s.input.rank() == 0) {
    Bad(s, "needs a tensor of at least one dimension");
  }
  if (splits_dim0 && s.input.dims[0] % g != 0) {
    Bad(s, "the first dimension (" + std::to_string(s.input.dims[0]) +
               ") must be divisible by the group size (" + std::to_string(g) + ")");
  }
  if ((s.kind == Collective::kBroadcast || s.kind == Collective::kScatter) && (s.root < 0 || s.root >= g)) {
    Bad(s, "root " + std::to_string(s.root) + " is not in the group");
  }

  Builder b;
  CollectiveProgram out;
  Value x = b.Param(s.input);
  Value result;
  const TensorType& t = s.input;
  switch (s.kind) {
    case Collective::kAllReduce:
    case Collective::kReduceScatter: {
      Value v = x;
      if (s.reduce == Reduce::kPremulSum) {
        Value factor = b.Param(TensorType{t.dtype, {}});
        out.num_args = 2;
        v = ir::Binary(b, "stablehlo.multiply", v, ir::BroadcastTo(b, factor, t.dims));
      }
      const DType rt = ReduceType(t.dtype);
      if (rt != t.dtype) v = ir::Convert(b, v, rt);
      if (s.kind == Collective::kAllReduce) {
        v = AllReduce(b, v, s, s.reduce);
      } else {
        TensorType ot{rt, t.dims};
        ot.dims[0] /= g;
        v = b.Op1("stablehlo.reduce_scatter", {v}, ot,
                  {{"scatter_dimension", "0 : i64"}, ReplicaGroups(s.groups)},
                  {ReductionRegion(rt, s.reduce)});
      }
      if (s.reduce == Reduce::kAvg) {
        const TensorType& vt = b.type(v);
        Value n = ir::IsFloat(rt) ? ir::ConstantF(b, static_cast<double>(g), rt) : ir::ConstantI(b, g, rt);
        v = ir::Binary(b, "stablehlo.divide", v, ir::BroadcastTo(b, n, vt.dims));
      }
      if (rt != t.dtype) v = ir::Convert(b, v, t.dtype);
      result = v;
      break;
    }
    case Collective::kAllGather: {
      TensorType ot = t;
      ot.dims[0] *= g;
      result = b.Op1("stablehlo.all_gather", {x}, ot,
                     {{"all_gather_dim", "0 : i64"}, ReplicaGroups(s.groups)});
      break;
    }
    case Collective::kAllToAll:
    case Collective::kScatter: {
      Value v = b.Op1("stablehlo.all_to_all", {x}, t,
                      {{"split_dimension", "0 : i64"}, {"concat_dimension", "0 : i64"},
                       {"split_count", std::to_string(g) + " : i64"}, ReplicaGroups(s.groups)});
      if (s.kind == Collective::kScatter) {
        // Rank r now holds chunk r of every member's input; keep the root's.
        const int64_t n = t.dims[0] / g;
        ir::Dims start(t.rank(), 0), limit = t.dims, strides(t.rank(), 1);
        start[0] = s.root * n;
        limit[0] = (s.root + 1) * n;
        v = ir::Slice(b, v, start, limit, strides);
      }
      result = v;
      break;
    }
    case Collective::kBroadcast: {
      // The root's bits, summed as unsigned integers with zeros from every
      // other member: exact for every dtype (NaN payloads and -0.0 too).
      std::vector<int64_t> roots;
      for (const auto& grp : s.groups) roots.push_back(grp[s.root]);
      const DType bits = t.dtype == DType::PRED ? DType::U8 : BitsType(t.dtype);
      Value v = t.dtype == DType::PRED ? ir::Convert(b, x, bits) : Bitcast(b, x, bits);
      Value zero = ir::Full(b, ir::ConstantI(b, 0, bits), t.dims);
      v = ir::Select(b, ir::BroadcastTo(b, ReplicaIn(b, roots), t.dims), v, zero);
      v = AllReduce(b, v, s, Reduce::kSum);
      result = t.dtype == DType::PRED ? ir::Convert(b, v, DType::PRED) : Bitcast(b, v, t.dtype);
      break;
    }
    case Collective::kPermute: {
      if (s.pairs.empty()) Bad(s, "no (source, target) pairs");
      std::set<int64_t> sources, targets;
      std::vector<std::vector<int64_t>> rows;
      for (const auto& [src, dst] : s.pairs) {
        if (src < 0 || src >= s.num_replicas || dst < 0 || dst >= s.num_replicas) Bad(s, "pair out of range");
        if (!sources.insert(src).second || !targets.insert(dst).second) {
          Bad(s, "each replica may send at most once and receive at most once");
        }
        rows.push_back({src, dst});
      }
      result = b.Op1("stablehlo.collective_permute", {x}, t,
                     {{"source_target_pairs", DenseI64Matrix(rows)}});
      break;
    }
  }
  out.output = b.type(result);
  out.mlir = b.Print({result}, s.num_replicas, 1);
  return out;
}

}  // namespace tpu::dist
