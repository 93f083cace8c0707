#include "ir/ops.h"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace tpu::ir {

std::string I64List(const Dims& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

std::string I64Array(const Dims& v) {
  std::string s = "array<i64";
  for (size_t i = 0; i < v.size(); ++i) {
    s += i ? ", " : ": ";
    s += std::to_string(v[i]);
  }
  return s + ">";
}

namespace {

std::string Hex(uint64_t bits, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%0*llX", digits, static_cast<unsigned long long>(bits));
  return buf;
}

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Round-to-nearest-even f32 -> bf16 bits (NaN stays NaN).
uint16_t ToBF16Bits(float f) {
  uint32_t u = FloatBits(f);
  if (std::isnan(f)) return 0x7FC0;
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

// Round-to-nearest-even f32 -> IEEE half bits.
uint16_t ToF16Bits(float f) {
  uint32_t u = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  if (std::isnan(f)) return sign | 0x7E00;
  float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7C00;  // rounds to inf
  if (a < 6.103515625e-05f) {               // subnormal half
    int q = static_cast<int>(std::nearbyint(a / 5.960464477539063e-08f));
    return sign | static_cast<uint16_t>(q);
  }
  uint32_t au = FloatBits(a);
  int exp = static_cast<int>((au >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = au & 0x7FFFFF;
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return sign | static_cast<uint16_t>(h);
}

std::string FloatLiteral(double v, DType t) {
  switch (t) {
    case DType::F64: {
      uint64_t u;
      std::memcpy(&u, &v, 8);
      return Hex(u, 16);
    }
    case DType::F32: return Hex(FloatBits(static_cast<float>(v)), 8);
    case DType::BF16: return Hex(ToBF16Bits(static_cast<float>(v)), 4);
    case DType::F16: return Hex(ToF16Bits(static_cast<float>(v)), 4);
    default: throw std::logic_error("FloatLiteral: not a float type");
  }
}

Value ScalarConstant(Builder& b, const std::string& literal, DType t) {
  TensorType tt{t, {}};
  return b.Op1("stablehlo.constant", {}, tt,
               {{"value", "dense<" + literal + "> : " + TypeText(tt)}});
}

std::string CompareType(DType t) {
  if (IsFloat(t) || IsComplex(t)) return "FLOAT";
  if (IsSigned(t)) return "SIGNED";
  return "UNSIGNED";
}

const char* CmpName(Cmp c) {
  switch (c) {
    case Cmp::EQ: return "EQ";
    case Cmp::NE: return "NE";
    case Cmp::LT: return "LT";
    case Cmp::LE: return "LE";
    case Cmp::GT: return "GT";
    case Cmp::GE: return "GE";
  }
  return "EQ";
}

}  // namespace

Value ConstantF(Builder& b, double v, DType t) {
  if (t == DType::C32) return Convert(b, ConstantF(b, v, DType::C64), DType::C32);
  if (IsFloat8(t)) {
    // An f32 literal converted (round to nearest even, as XLA converts);
    // the types without infinities saturate it to their largest finite value.
    if (std::isinf(v) && t != DType::F8E5M2) {
      const double top = t == DType::F8E4M3FN ? 448.0 : t == DType::F8E4M3FNUZ ? 240.0 : 57344.0;
      v = v > 0 ? top : -top;
    }
    return b.Op1("stablehlo.convert", {ScalarConstant(b, FloatLiteral(v, DType::F32), DType::F32)},
                 TensorType{t, {}});
  }
  if (IsFloat(t)) return ScalarConstant(b, FloatLiteral(v, t), t);
  if (t == DType::PRED) return ScalarConstant(b, v != 0 ? "true" : "false", t);
  if (IsComplex(t)) {  // (real, imaginary)
    const DType part = t == DType::C64 ? DType::F32 : DType::F64;
    return ScalarConstant(b, "(" + FloatLiteral(v, part) + "," + FloatLiteral(0, part) + ")", t);
  }
  return ConstantI(b, static_cast<int64_t>(v), t);
}

Value ConstantI(Builder& b, int64_t v, DType t) {
  if (IsFloat(t) || IsComplex(t) || t == DType::C32) return ConstantF(b, static_cast<double>(v), t);
  if (t == DType::PRED) return ScalarConstant(b, v != 0 ? "true" : "false", t);
  if (IsUnsigned(t) && t == DType::U64)
    return ScalarConstant(b, std::to_string(static_cast<uint64_t>(v)), t);
  return ScalarConstant(b, std::to_string(v), t);
}

static int64_t IntLimit(DType t, bool max) {
  switch (t) {
    case DType::S8: return max ? INT8_MAX : INT8_MIN;
    case DType::S16: return max ? INT16_MAX : INT16_MIN;
    case DType::S32: return max ? INT32_MAX : INT32_MIN;
    case DType::S64: return max ? INT64_MAX : INT64_MIN;
    case DType::U8: return max ? UINT8_MAX : 0;
    case DType::U16: return max ? UINT16_MAX : 0;
    case DType::U32: return max ? UINT32_MAX : 0;
    case DType::U64: return max ? -1 : 0;  // printed as unsigned
    case DType::PRED: return max ? 1 : 0;
    default: throw std::logic_error("IntLimit: not an integer type");
  }
}

Value MinValue(Builder& b, DType t) {
  if (IsFloat(t)) return ConstantF(b, -std::numeric_limits<double>::infinity(), t);
  return ConstantI(b, IntLimit(t, false), t);
}

Value MaxValue(Builder& b, DType t) {
  if (IsFloat(t)) return ConstantF(b, std::numeric_limits<double>::infinity(), t);
  return ConstantI(b, IntLimit(t, true), t);
}

Value Full(Builder& b, Value scalar, const Dims& dims) {
  return BroadcastInDim(b, scalar, dims, {});
}

namespace {

// complex32 <-> complex64 (see DType::C32): the packed ui32 elements split
// into their two f16 halves, and back (each part rounded to f16 to nearest
// even, as c10::complex<c10::Half> converts).
Value UnpackC32(Builder& b, Value x) {
  const Dims dims = b.type(x).dims;
  Dims two = dims;
  two.push_back(2);
  Value halves = b.Op1("stablehlo.bitcast_convert", {x}, TensorType{DType::F16, two});
  auto part = [&](int64_t i) {
    Dims start(two.size(), 0), limit = two;
    start.back() = i;
    limit.back() = i + 1;
    Value p = Reshape(b, Slice(b, halves, start, limit, Dims(two.size(), 1)), dims);
    return Convert(b, p, DType::F32);
  };
  return b.Op1("stablehlo.complex", {part(0), part(1)}, TensorType{DType::C64, dims});
}

Value PackC32(Builder& b, Value c64) {
  const Dims dims = b.type(c64).dims;
  Dims one = dims;
  one.push_back(1);
  auto part = [&](const char* op) {
    Value p = b.Op1(op, {c64}, TensorType{DType::F32, dims});
    return Reshape(b, Convert(b, p, DType::F16), one);
  };
  Value halves = Concatenate(b, {part("stablehlo.real"), part("stablehlo.imag")},
                             static_cast<int64_t>(dims.size()));
  return b.Op1("stablehlo.bitcast_convert", {halves}, TensorType{DType::C32, dims});
}

}  // namespace

Value Convert(Builder& b, Value x, DType to) {
  const TensorType& t = b.type(x);
  if (t.dtype == to) return x;
  if (t.dtype == DType::C32) return Convert(b, UnpackC32(b, x), to);
  if (to == DType::C32) return PackC32(b, Convert(b, x, DType::C64));
  if (to == DType::PRED) {
    // x != 0, as PyTorch's bool conversion (and well-defined for NaN).
    Value zero = Full(b, ConstantI(b, 0, t.dtype), t.dims);
    return Compare(b, x, zero, Cmp::NE);
  }
  if (IsFloat(t.dtype) && IsInteger(to) && to != DType::U64) {
    // Floating to integer as PyTorch's CPU kernels convert on x86 (a C++
    // cast compiled to cvttss2si / cvttsd2si): through int32 (int64 for
    // 64-bit and uint32 targets), where NaN and values outside that range
    // become its lowest value, then narrowed by truncation (wrapping).
    // XLA's convert saturates, so -2.5 -> uint8 would be 0 rather than 254.
    const bool wide = to == DType::S64 || to == DType::U32;
    const DType mid = wide ? DType::S64 : DType::S32;
    const double lim = wide ? 9223372036854775808.0 : 2147483648.0;
    Value v = b.Op1("stablehlo.convert", {x}, TensorType{mid, t.dims});
    if (!IsFloat8(t.dtype)) {  // float8 values (and NaN there) all fit in int32
      Value in_range = Binary(
          b, "stablehlo.and",
          Compare(b, x, Full(b, ConstantF(b, -lim, t.dtype), t.dims), Cmp::GE),
          Compare(b, x, Full(b, ConstantF(b, lim, t.dtype), t.dims), Cmp::LT));
      Value lowest = Full(b, ConstantI(b, wide ? std::numeric_limits<int64_t>::min()
                                               : std::numeric_limits<int32_t>::min(), mid), t.dims);
      v = Select(b, in_range, v, lowest);
    }
    return to == mid ? v : b.Op1("stablehlo.convert", {v}, TensorType{to, t.dims});
  }
  return b.Op1("stablehlo.convert", {x}, TensorType{to, t.dims});
}

Value BroadcastInDim(Builder& b, Value x, const Dims& out_dims, const Dims& bcast_dims) {
  const TensorType& t = b.type(x);
  if (t.dims == out_dims && bcast_dims.size() == out_dims.size()) {
    bool identity = true;
    for (size_t i = 0; i < bcast_dims.size(); ++i) identity &= bcast_dims[i] == (int64_t)i;
    if (identity) return x;
  }
  return b.Op1("stablehlo.broadcast_in_dim", {x}, TensorType{t.dtype, out_dims},
               {{"broadcast_dimensions", I64Array(bcast_dims)}});
}

Value BroadcastTo(Builder& b, Value x, const Dims& out_dims) {
  const TensorType& t = b.type(x);
  if (t.dims == out_dims) return x;
  const size_t r = t.dims.size(), R = out_dims.size();
  if (r > R) throw std::logic_error("BroadcastTo: rank of input exceeds target");
  // Size-1 input dims that broadcast are dropped first by a reshape, so the
  // remaining dims map one-to-one.
  Dims keep_dims, bdims;
  bool drop = false;
  for (size_t i = 0; i < r; ++i) {
    const size_t o = R - r + i;
    if (t.dims[i] == out_dims[o]) {
      keep_dims.push_back(t.dims[i]);
      bdims.push_back(static_cast<int64_t>(o));
    } else if (t.dims[i] == 1) {
      drop = true;
    } else {
      throw std::logic_error("BroadcastTo: incompatible shapes");
    }
  }
  if (drop) x = Reshape(b, x, keep_dims);
  return BroadcastInDim(b, x, out_dims, bdims);
}

Value Reshape(Builder& b, Value x, const Dims& dims) {
  const TensorType& t = b.type(x);
  if (t.dims == dims) return x;
  return b.Op1("stablehlo.reshape", {x}, TensorType{t.dtype, dims});
}

Value Transpose(Builder& b, Value x, const Dims& perm) {
  const TensorType& t = b.type(x);
  bool identity = true;
  Dims out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    out[i] = t.dims[perm[i]];
    identity &= perm[i] == (int64_t)i;
  }
  if (identity) return x;
  return b.Op1("stablehlo.transpose", {x}, TensorType{t.dtype, out},
               {{"permutation", I64Array(perm)}});
}

Value Slice(Builder& b, Value x, const Dims& start, const Dims& limit, const Dims& strides) {
  const TensorType& t = b.type(x);
  Dims out(t.dims.size());
  bool identity = true;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = limit[i] <= start[i] ? 0 : (limit[i] - start[i] + strides[i] - 1) / strides[i];
    identity &= out[i] == t.dims[i] && start[i] == 0 && strides[i] == 1;
  }
  if (identity) return x;
  return b.Op1("stablehlo.slice", {x}, TensorType{t.dtype, out},
               {{"start_indices", I64Array(start)},
                {"limit_indices", I64Array(limit)},
                {"strides", I64Array(strides)}});
}

Value Concatenate(Builder& b, const std::vector<Value>& xs, int64_t dim) {
  if (xs.size() == 1) return xs[0];
  TensorType out = b.type(xs[0]);
  out.dims[dim] = 0;
  for (Value v : xs) out.dims[dim] += b.type(v).dims[dim];
  return b.Op1("stablehlo.concatenate", xs, out,
               {{"dimension", std::to_string(dim) + " : i64"}});
}

Value Pad(Builder& b, Value x, Value pad_value, const Dims& low, const Dims& high,
          const Dims& interior) {
  TensorType out = b.type(x);
  for (size_t i = 0; i < out.dims.size(); ++i) {
    int64_t d = out.dims[i];
    out.dims[i] = low[i] + high[i] + d + (d > 0 ? (d - 1) * interior[i] : 0);
  }
  return b.Op1("stablehlo.pad", {x, pad_value}, out,
               {{"edge_padding_low", I64Array(low)},
                {"edge_padding_high", I64Array(high)},
                {"interior_padding", I64Array(interior)}});
}

Value Iota(Builder& b, const Dims& dims, int64_t iota_dim, DType t) {
  return b.Op1("stablehlo.iota", {}, TensorType{t, dims},
               {{"iota_dimension", std::to_string(iota_dim) + " : i64"}});
}

Value Unary(Builder& b, const std::string& op, Value x) {
  return b.Op1(op, {x}, b.type(x));
}

Value Binary(Builder& b, const std::string& op, Value x, Value y) {
  return b.Op1(op, {x, y}, b.type(x));
}

static Value NanAware(Builder& b, const char* op, Value x, Value y) {
  Value r = Binary(b, op, x, y);
  if (!IsFloat(b.type(x).dtype)) return r;
  r = Select(b, Compare(b, y, y, Cmp::NE), y, r);
  return Select(b, Compare(b, x, x, Cmp::NE), x, r);
}
Value Max(Builder& b, Value x, Value y) { return NanAware(b, "stablehlo.maximum", x, y); }
Value Min(Builder& b, Value x, Value y) { return NanAware(b, "stablehlo.minimum", x, y); }

Value Compare(Builder& b, Value x, Value y, Cmp dir) {
  const TensorType& t = b.type(x);
  return b.Op1("stablehlo.compare", {x, y}, TensorType{DType::PRED, t.dims},
               {{"comparison_direction", std::string("#stablehlo<comparison_direction ") +
                                             CmpName(dir) + ">"},
                {"compare_type", "#stablehlo<comparison_type " + CompareType(t.dtype) + ">"}});
}

Value Select(Builder& b, Value pred, Value on_true, Value on_false) {
  return b.Op1("stablehlo.select", {pred, on_true, on_false}, b.type(on_true));
}

Value Reduce(Builder& b, Value x, Value init, const Dims& dims, const std::string& body_op) {
  const TensorType& t = b.type(x);
  if (dims.empty()) return x;
  Dims out;
  for (int64_t i = 0; i < t.rank(); ++i) {
    bool reduced = false;
    for (int64_t d : dims) reduced |= d == i;
    if (!reduced) out.push_back(t.dims[i]);
  }
  TensorType scalar{t.dtype, {}};
  Region body{{scalar, scalar}, [body_op](Builder& rb, const std::vector<Value>& a) {
                if (body_op == "stablehlo.maximum") return std::vector<Value>{Max(rb, a[0], a[1])};
                if (body_op == "stablehlo.minimum") return std::vector<Value>{Min(rb, a[0], a[1])};
                return std::vector<Value>{Binary(rb, body_op, a[0], a[1])};
              }};
  return b.Op1("stablehlo.reduce", {x, init}, TensorType{t.dtype, out},
               {{"dimensions", I64Array(dims)}}, {body});
}

std::pair<Value, Value> ArgReduce(Builder& b, Value x, int64_t dim, bool is_max) {
  const TensorType t = b.type(x);
  Value idx = Iota(b, t.dims, dim, DType::S64);
  Value init_v = is_max ? MinValue(b, t.dtype) : MaxValue(b, t.dtype);
  Value init_i = ConstantI(b, std::numeric_limits<int64_t>::max(), DType::S64);
  Dims out;
  for (int64_t i = 0; i < t.rank(); ++i)
    if (i != dim) out.push_back(t.dims[i]);
  TensorType sv{t.dtype, {}}, si{DType::S64, {}};
  const bool is_float = IsFloat(t.dtype);
  Region body{{sv, si, sv, si}, [is_max, is_float](Builder& rb, const std::vector<Value>& a) {
                Value av = a[0], ai = a[1], bv = a[2], bi = a[3];
                Value better = Compare(rb, av, bv, is_max ? Cmp::GT : Cmp::LT);
                Value eq = Compare(rb, av, bv, Cmp::EQ);
                Value idx_lt = Compare(rb, ai, bi, Cmp::LT);
                Value tie = Binary(rb, "stablehlo.and", eq, idx_lt);
                Value pick = Binary(rb, "stablehlo.or", better, tie);
                if (is_float) {
                  // NaN wins; between two NaNs, the first index.
                  Value a_nan = Compare(rb, av, av, Cmp::NE);
                  Value b_nan = Compare(rb, bv, bv, Cmp::NE);
                  Value not_b_nan = Unary(rb, "stablehlo.not", b_nan);
                  Value a_nan_wins =
                      Binary(rb, "stablehlo.and", a_nan,
                             Binary(rb, "stablehlo.or", not_b_nan, idx_lt));
                  pick = Binary(rb, "stablehlo.or", a_nan_wins,
                                Binary(rb, "stablehlo.and", not_b_nan, pick));
                }
                return std::vector<Value>{Select(rb, pick, av, bv), Select(rb, pick, ai, bi)};
              }};
  auto r = b.Op("stablehlo.reduce", {x, idx, init_v, init_i},
                {TensorType{t.dtype, out}, TensorType{DType::S64, out}},
                {{"dimensions", I64Array({dim})}}, {body});
  return {r[0], r[1]};
}

Value DotGeneral(Builder& b, Value lhs, Value rhs, const DotDims& dd, const TensorType& out,
                 const std::string& precision, const std::string& algorithm) {
  std::string dn = "#stablehlo.dot<";
  bool first = true;
  auto field = [&](const char* name, const Dims& v) {
    if (v.empty()) return;
    if (!first) dn += ", ";
    first = false;
    dn += name;
    dn += " = ";
    dn += I64List(v);
  };
  field("lhs_batching_dimensions", dd.lhs_batch);
  field("rhs_batching_dimensions", dd.rhs_batch);
  field("lhs_contracting_dimensions", dd.lhs_contract);
  field("rhs_contracting_dimensions", dd.rhs_contract);
  dn += ">";
  std::vector<Attr> attrs{{"dot_dimension_numbers", dn}};
  if (!precision.empty())
    attrs.push_back({"precision_config", "[#stablehlo<precision " + precision +
                                             ">, #stablehlo<precision " + precision + ">]"});
  if (!algorithm.empty()) attrs.push_back({"algorithm", algorithm});
  return b.Op1("stablehlo.dot_general", {lhs, rhs}, out, std::move(attrs));
}

Value RoundToBF16(Builder& b, Value x) {
  const TensorType t = b.type(x);
  const TensorType ut{DType::U32, t.dims};
  auto full = [&](int64_t v) { return Full(b, ConstantI(b, v, DType::U32), t.dims); };
  Value bits = b.Op1("stablehlo.bitcast_convert", {x}, ut);
  Value odd = Binary(b, "stablehlo.and", Binary(b, "stablehlo.shift_right_logical", bits, full(16)),
                     full(1));
  Value rounded = Binary(b, "stablehlo.add", bits, Binary(b, "stablehlo.add", full(0x7FFF), odd));
  rounded = Binary(b, "stablehlo.and", rounded, full(0xFFFF0000LL));
  Value r = b.Op1("stablehlo.bitcast_convert", {rounded}, t);
  return Select(b, Compare(b, x, x, Cmp::NE), x, r);  // NaN stays NaN
}

Value Take(Builder& b, Value flat, Value indices) {
  const TensorType& it = b.type(indices);
  const TensorType& ft = b.type(flat);
  const std::string dn = "#stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], "
                         "index_vector_dim = " + std::to_string(it.rank()) + ">";
  return b.Op1("stablehlo.gather", {flat, indices}, TensorType{ft.dtype, it.dims},
               {{"dimension_numbers", dn},
                {"slice_sizes", I64Array({1})},
                {"indices_are_sorted", "false"}});
}

Value Put(Builder& b, Value flat, Value indices, Value updates) {
  const TensorType& it = b.type(indices);
  const TensorType ft = b.type(flat);
  const std::string dn = "#stablehlo.scatter<inserted_window_dims = [0], "
                         "scatter_dims_to_operand_dims = [0], index_vector_dim = " +
                         std::to_string(it.rank()) + ">";
  TensorType scalar{ft.dtype, {}};
  Region body{{scalar, scalar},
              [](Builder&, const std::vector<Value>& a) { return std::vector<Value>{a[1]}; }};
  return b.Op1("stablehlo.scatter", {flat, indices, updates}, ft,
               {{"scatter_dimension_numbers", dn},
                {"indices_are_sorted", "false"},
                {"unique_indices", "false"}},
               {body});
}

}  // namespace tpu::ir

namespace tpu::ir {

Value Reverse(Builder& b, Value x, const Dims& dims) {
  if (dims.empty()) return x;
  return b.Op1("stablehlo.reverse", {x}, b.type(x), {{"dimensions", I64Array(dims)}});
}

std::vector<Value> Sort(Builder& b, const std::vector<Value>& xs, int64_t dim, bool stable,
                        const RegionFn& less) {
  std::vector<TensorType> types, args;
  for (Value v : xs) {
    types.push_back(b.type(v));
    TensorType s{b.type(v).dtype, {}};
    args.push_back(s);
    args.push_back(s);
  }
  return b.Op("stablehlo.sort", xs, types,
              {{"dimension", std::to_string(dim) + " : i64"},
               {"is_stable", stable ? "true" : "false"}},
              {Region{args, less}});
}

static Value Combine(Builder& b, const std::string& op, Value x, Value y) {
  if (op == "stablehlo.maximum") return Max(b, x, y);
  if (op == "stablehlo.minimum") return Min(b, x, y);
  return Binary(b, op, x, y);
}

Value CumReduce(Builder& b, Value x, Value init, int64_t dim, const std::string& body_op) {
  const TensorType t = b.type(x);
  const int64_t n = t.dims[dim];
  if (n <= 1) return x;
  Dims window(t.dims.size(), 1), strides(t.dims.size(), 1);
  window[dim] = n;
  std::string pad = "dense<[";
  for (size_t i = 0; i < t.dims.size(); ++i) {
    if (i) pad += ", ";
    pad += "[" + std::to_string(static_cast<int64_t>(i) == dim ? n - 1 : 0) + ", 0]";
  }
  pad += "]> : tensor<" + std::to_string(t.dims.size()) + "x2xi64>";
  TensorType scalar{t.dtype, {}};
  Region body{{scalar, scalar}, [body_op](Builder& rb, const std::vector<Value>& a) {
                return std::vector<Value>{Combine(rb, body_op, a[0], a[1])};
              }};
  return b.Op1("stablehlo.reduce_window", {x, init}, t,
               {{"window_dimensions", I64Array(window)},
                {"window_strides", I64Array(strides)},
                {"padding", pad}},
               {body});
}

static void DimsField(std::string& s, bool& first, const char* name, const Dims& v) {
  if (v.empty()) return;
  if (!first) s += ", ";
  first = false;
  s += name;
  s += " = ";
  s += I64List(v);
}

Value Gather(Builder& b, Value x, Value indices, const GatherDims& gd, const Dims& slice_sizes,
             const TensorType& out) {
  std::string dn = "#stablehlo.gather<";
  bool first = true;
  DimsField(dn, first, "offset_dims", gd.offset_dims);
  DimsField(dn, first, "collapsed_slice_dims", gd.collapsed_slice_dims);
  DimsField(dn, first, "start_index_map", gd.start_index_map);
  dn += (first ? "" : ", ") + std::string("index_vector_dim = ") +
        std::to_string(gd.index_vector_dim) + ">";
  return b.Op1("stablehlo.gather", {x, indices}, out,
               {{"dimension_numbers", dn},
                {"slice_sizes", I64Array(slice_sizes)},
                {"indices_are_sorted", "false"}});
}

Value Scatter(Builder& b, Value x, Value indices, Value updates, const ScatterDims& sd,
              const std::string& body_op) {
  const TensorType t = b.type(x);
  std::string dn = "#stablehlo.scatter<";
  bool first = true;
  DimsField(dn, first, "update_window_dims", sd.update_window_dims);
  DimsField(dn, first, "inserted_window_dims", sd.inserted_window_dims);
  DimsField(dn, first, "scatter_dims_to_operand_dims", sd.scatter_dims_to_operand_dims);
  dn += (first ? "" : ", ") + std::string("index_vector_dim = ") +
        std::to_string(sd.index_vector_dim) + ">";
  TensorType scalar{t.dtype, {}};
  Region body{{scalar, scalar}, [body_op](Builder& rb, const std::vector<Value>& a) {
                if (body_op.empty()) return std::vector<Value>{a[1]};
                return std::vector<Value>{Combine(rb, body_op, a[0], a[1])};
              }};
  return b.Op1("stablehlo.scatter", {x, indices, updates}, t,
               {{"scatter_dimension_numbers", dn},
                {"indices_are_sorted", "false"},
                {"unique_indices", "false"}},
               {body});
}

}  // namespace tpu::ir

namespace tpu::ir {

std::vector<Value> ReduceWindow(Builder& b, const std::vector<Value>& xs,
                                const std::vector<Value>& inits, const Window& w,
                                const RegionFn& body) {
  const TensorType t0 = b.type(xs[0]);
  const size_t r = t0.dims.size();
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t padded = t0.dims[i] + w.pad_lo[i] + w.pad_hi[i];
    const int64_t span = (w.dims[i] - 1) * w.dilations[i] + 1;
    out[i] = padded < span ? 0 : (padded - span) / w.strides[i] + 1;
  }
  std::string pad = "dense<[";
  for (size_t i = 0; i < r; ++i) {
    if (i) pad += ", ";
    pad += "[" + std::to_string(w.pad_lo[i]) + ", " + std::to_string(w.pad_hi[i]) + "]";
  }
  pad += "]> : tensor<" + std::to_string(r) + "x2xi64>";
  std::vector<TensorType> results, args;
  for (Value v : xs) results.push_back(TensorType{b.type(v).dtype, out});
  for (int k = 0; k < 2; ++k)
    for (Value v : xs) args.push_back(TensorType{b.type(v).dtype, {}});
  std::vector<Value> operands = xs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  return b.Op("stablehlo.reduce_window", operands, results,
              {{"window_dimensions", I64Array(w.dims)},
               {"window_strides", I64Array(w.strides)},
               {"window_dilations", I64Array(w.dilations)},
               {"padding", pad}},
              {Region{args, body}});
}

Value ConstantVectorI(Builder& b, const std::vector<int64_t>& v, DType t) {
  std::string s = "dense<[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  TensorType tt{t, {static_cast<int64_t>(v.size())}};
  return b.Op1("stablehlo.constant", {}, tt, {{"value", s + "]> : " + TypeText(tt)}});
}

Value ConstantVectorF(Builder& b, const std::vector<double>& v, DType t) {
  std::string s = "dense<[";
  char buf[64];
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    std::snprintf(buf, sizeof(buf), "%.17e", v[i]);
    s += buf;
  }
  TensorType tt{t, {static_cast<int64_t>(v.size())}};
  return b.Op1("stablehlo.constant", {}, tt, {{"value", s + "]> : " + TypeText(tt)}});
}

Value TakeAlong(Builder& b, Value x, int64_t dim, Value idx) {
  const TensorType t = b.type(x);
  const int64_t m = b.type(idx).dims[0];
  GatherDims gd;
  for (int64_t i = 0; i < t.rank(); ++i)
    if (i != dim) gd.offset_dims.push_back(i);
  gd.collapsed_slice_dims = {dim};
  gd.start_index_map = {dim};
  gd.index_vector_dim = 1;
  Dims slice = t.dims;
  slice[dim] = 1;
  TensorType out = t;
  out.dims[dim] = m;
  return Gather(b, x, Reshape(b, idx, {m, 1}), gd, slice, out);
}

Value CountOver(Builder& b, Value x, const Dims& dims) {
  const TensorType t = b.type(x);
  if (!b.dynamic()) {
    int64_t n = 1;
    for (int64_t d : dims) n *= t.dims[d];
    Dims kept;
    for (int64_t i = 0; i < t.rank(); ++i)
      if (std::find(dims.begin(), dims.end(), i) == dims.end()) kept.push_back(t.dims[i]);
    return Full(b, ConstantF(b, static_cast<double>(n), t.dtype), kept);
  }
  // Ones derived from x carry x's dynamic sizes; the padder masks the sum.
  Value ones = Convert(b, Compare(b, x, x, Cmp::EQ), t.dtype);
  return Reduce(b, ones, ConstantI(b, 0, t.dtype), dims, "stablehlo.add");
}

Value MakeStatic(Builder& b, Value x) {
  const TensorType t = b.type(x);
  for (int64_t d = 0; d < t.rank(); ++d)
    if (t.dims[d] > 1) x = TakeAlong(b, x, d, Iota(b, {t.dims[d]}, 0, DType::S32));
  return x;
}

Value ScatterAddAlong(Builder& b, Value g, int64_t dim, Value idx, int64_t size) {
  const TensorType t = b.type(g);
  const int64_t m = b.type(idx).dims[0];
  Dims zdims = t.dims;
  zdims[dim] = size;
  Value zeros = Full(b, ConstantI(b, 0, t.dtype), zdims);
  ScatterDims sd;
  for (int64_t i = 0; i < t.rank(); ++i)
    if (i != dim) sd.update_window_dims.push_back(i);
  sd.inserted_window_dims = {dim};
  sd.scatter_dims_to_operand_dims = {dim};
  sd.index_vector_dim = 1;
  return Scatter(b, zeros, Reshape(b, idx, {m, 1}), g, sd, "stablehlo.add");
}

}  // namespace tpu::ir
