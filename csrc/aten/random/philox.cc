// Device random numbers (Philox via rng_bit_generator, seeded from the tpu
// generator's (seed, offset)): uniform, normal, random_, bernoulli, dropout,
// multinomial, randperm, rrelu.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/where.h>

#include "device/generator.h"
#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"

namespace tpu::ops {

namespace {

// `count` random words of `bits_t` (u32 or u64) from a Philox state.
Value RandomBits(Builder& b, Value state, int64_t count, DType bits_t) {
  auto r = b.Op("stablehlo.rng_bit_generator", {state},
                {b.type(state), ir::TensorType{bits_t, {count}}},
                {{"rng_algorithm", "#stablehlo<rng_algorithm PHILOX>"}});
  return r[1];
}

// `count` uniform floats in [0, 1) of `t` (f32 or f64) from a Philox state.
Value Uniform01(Builder& b, Value state, int64_t count, DType t) {
  const bool f64 = t == DType::F64;
  const DType bits_t = f64 ? DType::U64 : DType::U32;
  Value bits = RandomBits(b, state, count, bits_t);
  // Keep the top mantissa bits and set the exponent of 1.0: a float in [1, 2).
  Value shift = ir::Full(b, ir::ConstantI(b, f64 ? 12 : 9, bits_t), {count});
  Value one_bits = ir::Full(
      b, ir::ConstantI(b, f64 ? 0x3FF0000000000000LL : 0x3F800000LL, bits_t), {count});
  Value m = ir::Binary(b, "stablehlo.or", ir::Binary(b, "stablehlo.shift_right_logical", bits, shift),
                       one_bits);
  const DType ft = f64 ? DType::F64 : DType::F32;
  Value f = b.Op1("stablehlo.bitcast_convert", {m}, ir::TensorType{ft, {count}});
  return ir::Binary(b, "stablehlo.subtract", f, ir::Full(b, ir::ConstantF(b, 1.0, ft), {count}));
}

Value Bcast(Builder& b, Value s, DType t, const ir::Dims& dims) {
  return ir::Full(b, ir::Convert(b, s, t), dims);
}

// ins = (state u64[2], a, b); ints = (normal?). uniform: a + u * (b - a);
// normal: a + b * z with z from Box-Muller.
VS LowerRandom(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const ir::TensorType& o = out[0];
  const int64_t n = o.numel();
  const DType ft = o.dtype == DType::F64 ? DType::F64 : DType::F32;
  Value r;
  if (at.ints[0]) {
    Value u = Uniform01(b, in[0], 2 * n, ft);
    Value one = ir::Full(b, ir::ConstantF(b, 1.0, ft), {n});
    Value u1 = ir::Binary(b, "stablehlo.subtract", one, ir::Slice(b, u, {0}, {n}, {1}));  // (0, 1]
    Value u2 = ir::Slice(b, u, {n}, {2 * n}, {1});
    Value radius = ir::Unary(b, "stablehlo.sqrt",
                             ir::Binary(b, "stablehlo.multiply", ir::Full(b, ir::ConstantF(b, -2.0, ft), {n}),
                                        ir::Unary(b, "stablehlo.log", u1)));
    Value theta = ir::Binary(b, "stablehlo.multiply", ir::Full(b, ir::ConstantF(b, 2 * M_PI, ft), {n}), u2);
    Value z = ir::Binary(b, "stablehlo.multiply", radius, ir::Unary(b, "stablehlo.cosine", theta));
    r = ir::Binary(b, "stablehlo.add", Bcast(b, in[1], ft, {n}),
                   ir::Binary(b, "stablehlo.multiply", Bcast(b, in[2], ft, {n}), z));
  } else {
    Value u = Uniform01(b, in[0], n, ft);
    Value lo = Bcast(b, in[1], ft, {n});
    Value width = ir::Binary(b, "stablehlo.subtract", Bcast(b, in[2], ft, {n}), lo);
    r = ir::Binary(b, "stablehlo.add", lo, ir::Binary(b, "stablehlo.multiply", u, width));
  }
  return {ir::Reshape(b, ir::Convert(b, r, o.dtype), o.dims)};
}
constexpr lazy::Lowering kRandom{"aten::random", &LowerRandom};

lazy::Operand StateOperand(const std::optional<at::Generator>& gen, uint64_t words) {
  device::TpuGeneratorImpl* g = device::GeneratorOrDefault(gen);
  auto [seed, offset] = g->Reserve(words);
  uint64_t state[2] = {seed, offset};
  lazy::Operand o;
  lazy::Executor& ex = lazy::Executor::Get();
  o.node = ex.Upload(state, DType::U64, {2});
  o.view = lazy::ViewSpec{{2}, {1}, 0, DType::U64};
  if (ex.capturing()) {
    // A captured graph draws fresh numbers at every run.
    std::optional<at::Generator> keep = gen;
    ex.NoteRngState(o.node, [keep, words](uint64_t* st) {
      auto [s, off] = device::GeneratorOrDefault(keep)->Reserve(words);
      st[0] = s;
      st[1] = off;
    });
  }
  return o;
}

Tensor& Random(Tensor& self, bool normal, double a, double b,
               const std::optional<at::Generator>& gen) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), (normal ? "normal_" : "uniform_"),
              " expects a floating point tensor, got ", self.scalar_type());
  if (self.numel() == 0) return self;
  const uint64_t words = static_cast<uint64_t>(self.numel()) * (normal ? 2 : 1) *
                         (self.scalar_type() == at::kDouble ? 2 : 1);
  const auto acc = self.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  RunInto(kRandom, {{normal ? 1 : 0}, {}, {}},
          {StateOperand(gen, words), ScalarOperand(a, acc), ScalarOperand(b, acc)},
          {TypeOf(self.sizes(), self.scalar_type())}, {self});
  return self;
}

// random_: integers uniform in [from, from + range), as CPU draws them:
// from + (r mod range) in 64-bit unsigned arithmetic with r a 64-bit
// random word (range 0 stands for 2^64: every int64), then converted to the
// tensor's dtype (rounding to nearest for floating types). ins = (state,
// from as s64, range as the bits of a u64 in an s64).
VS LowerRandomInt(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType& o = out[0];
  const int64_t n = o.numel();
  Value bits = RandomBits(b, in[0], n, DType::U64);
  auto as_u64 = [&](Value v) {
    return b.Op1("stablehlo.bitcast_convert", {v}, ir::TensorType{DType::U64, {}});
  };
  Value range = ir::Full(b, as_u64(in[2]), {n});
  Value zero = ir::Full(b, ir::ConstantI(b, 0, DType::U64), {n});
  Value full = ir::Compare(b, range, zero, ir::Cmp::EQ);
  // The divisor of the unused branch is 1, never 0.
  Value safe = ir::Select(b, full, ir::Full(b, ir::ConstantI(b, 1, DType::U64), {n}), range);
  Value off = ir::Select(b, full, bits, ir::Binary(b, "stablehlo.remainder", bits, safe));
  Value v = ir::Binary(b, "stablehlo.add", ir::Full(b, as_u64(in[1]), {n}), off);
  Value s64 = b.Op1("stablehlo.bitcast_convert", {v}, ir::TensorType{DType::S64, {n}});
  return {ir::Reshape(b, ir::Convert(b, s64, o.dtype), o.dims)};
}
constexpr lazy::Lowering kRandomInt{"aten::random_", &LowerRandomInt};

// The integer bounds of a dtype for random_'s range checks ([lowest, max],
// as int64; floating types: their finite range, clipped to int64).
std::pair<double, double> RandomBounds(at::ScalarType t) {
  switch (t) {
    case at::kBool: return {0, 1};
    case at::kByte: return {0, 255};
    case at::kChar: return {-128, 127};
    case at::kShort: return {-32768, 32767};
    case at::kInt: return {-2147483648.0, 2147483647.0};
    case at::kLong: return {-9223372036854775808.0, 9223372036854775807.0};
    case at::kUInt16: return {0, 65535};
    case at::kUInt32: return {0, 4294967295.0};
    case at::kUInt64: return {0, 9223372036854775807.0};
    case at::kHalf: return {-65504.0, 65504.0};
    case at::kBFloat16: return {-static_cast<double>(std::numeric_limits<c10::BFloat16>::max()),
                                static_cast<double>(std::numeric_limits<c10::BFloat16>::max())};
    case at::kFloat: return {-static_cast<double>(std::numeric_limits<float>::max()),
                             static_cast<double>(std::numeric_limits<float>::max())};
    case at::kDouble: return {std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max()};
    default:
      TORCH_CHECK(false, "random_ handles only integral, floating-point and boolean types, got ", t);
  }
}
// The largest value of an integral dtype (bool: 1; uint64: int64's, as CPU).
int64_t IntMax(at::ScalarType t) {
  switch (t) {
    case at::kBool: return 1;
    case at::kByte: return std::numeric_limits<uint8_t>::max();
    case at::kChar: return std::numeric_limits<int8_t>::max();
    case at::kShort: return std::numeric_limits<int16_t>::max();
    case at::kInt: return std::numeric_limits<int32_t>::max();
    case at::kUInt16: return std::numeric_limits<uint16_t>::max();
    case at::kUInt32: return std::numeric_limits<uint32_t>::max();
    default: return std::numeric_limits<int64_t>::max();
  }
}
int Digits(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return std::numeric_limits<c10::Half>::digits;
    case at::kBFloat16: return std::numeric_limits<c10::BFloat16>::digits;
    case at::kFloat: return std::numeric_limits<float>::digits;
    default: return std::numeric_limits<double>::digits;
  }
}

// `v` as `t` and back to int64 (the value a floating tensor would hold).
template <typename F>
int64_t RoundTrip(int64_t v, F to) {
  const double d = static_cast<double>(to(v));
  if (d >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (d <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}
int64_t AsFloatType(int64_t v, at::ScalarType t) {
  switch (t) {
    case at::kHalf: return RoundTrip(v, [](int64_t x) { return static_cast<float>(c10::Half(static_cast<float>(x))); });
    case at::kBFloat16: return RoundTrip(v, [](int64_t x) { return static_cast<float>(c10::BFloat16(static_cast<float>(x))); });
    case at::kFloat: return RoundTrip(v, [](int64_t x) { return static_cast<float>(x); });
    default: return RoundTrip(v, [](int64_t x) { return static_cast<double>(x); });
  }
}
// CPU's update_from / update_to: a bound that the dtype would round past
// is moved to the nearest representable value inside the range.
int64_t UpdateFrom(int64_t from, at::ScalarType t) {
  const int64_t from_plus_1 = AsFloatType(from + 1, t);
  if (from_plus_1 < from) {
    int64_t a = std::abs(from + 1);
    int n = 0;
    while (a >>= 1) ++n;
    from = from_plus_1 + (int64_t{1} << (n - Digits(t) + 1));
  }
  return from;
}
int64_t UpdateTo(int64_t to, at::ScalarType t) {
  const int64_t to_minus_1 = AsFloatType(to - 1, t);
  if (to_minus_1 >= to) {
    int64_t a = std::abs(to - 1);
    int n = 0;
    while (a >>= 1) ++n;
    to = to_minus_1 - (int64_t{1} << (n - Digits(t) + 1));
  }
  return to;
}

void CheckFromToInRange(int64_t from, int64_t to_inc, const Tensor& self) {
  const auto t = self.scalar_type();
  const auto [lo, hi] = RandomBounds(t);
  const auto name = self.dtype().name();
  TORCH_CHECK(static_cast<double>(from) >= lo && static_cast<double>(from) <= hi,
              "from is out of bounds for ", name);
  TORCH_CHECK(static_cast<double>(to_inc) >= lo && static_cast<double>(to_inc) <= hi,
              "to - 1 is out of bounds for ", name);
  if (at::isFloatingType(t)) {
    const int d = Digits(t);
    const int64_t lim = int64_t{1} << d;
    auto warn = [&](int64_t v, const char* what) {
      if (v < -lim || v > lim) {
        TORCH_WARN(what, " is out of bounds [-(2^", d, "), 2^", d, "]. ",
                   "Due to precision limitations ", name,
                   " can support discrete uniform distribution only within this range. ",
                   "This warning will become an error in version 1.7 release, please fix the code in advance");
      }
    };
    warn(from, "from");
    warn(to_inc, "to - 1");
  }
}

// Fills `self` with from + (r mod range); range 0 = 2^64.
Tensor& RandomRange(Tensor& self, int64_t from, uint64_t range,
                    const std::optional<at::Generator>& gen) {
  if (self.numel() == 0) return self;
  TORCH_CHECK(!self.is_complex(), "random_ is not implemented for complex tensors (", self.scalar_type(), ")");
  RunInto(kRandomInt, {},
          {StateOperand(gen, static_cast<uint64_t>(self.numel()) * 2),
           ScalarOperand(from, at::kLong),
           ScalarOperand(static_cast<int64_t>(range), at::kLong)},
          {TypeOf(self.sizes(), self.scalar_type())}, {self});
  return self;
}

Tensor& random_from(Tensor& self, int64_t from, std::optional<int64_t> to_opt,
                    std::optional<at::Generator> gen) {
  CheckTpu("random_", self, "self");
  const auto t = self.scalar_type();
  const bool fp = at::isFloatingType(t);
  if (to_opt.has_value()) {
    int64_t to = *to_opt;
    TORCH_CHECK(from < to, "random_ expects 'from' to be less than 'to', but got from=", from,
                " >= to=", to);
    if (fp) {
      from = UpdateFrom(from, t);
      to = UpdateTo(to, t);
      TORCH_CHECK(from < to,
                  "random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, but got from=",
                  from, " >= to=", to);
    }
    CheckFromToInRange(from, to - 1, self);
    return RandomRange(self, from, static_cast<uint64_t>(to) - static_cast<uint64_t>(from), gen);
  }
  if (from == std::numeric_limits<int64_t>::lowest()) return RandomRange(self, from, 0, gen);
  // [from, the dtype's largest value] (floating types: 2^digits).
  int64_t to_inc;
  if (fp) {
    to_inc = Digits(t) >= 63 ? std::numeric_limits<int64_t>::max() : int64_t{1} << Digits(t);
    from = UpdateFrom(from, t);
    TORCH_CHECK(from < to_inc,
                "random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted to dtype, but got from=",
                from, " > to_inc=", to_inc);
  } else {
    TORCH_CHECK(at::isIntegralType(t, /*includeBool=*/true),
                "random_from_to_impl handles only integral, floating-point and boolean types");
    to_inc = IntMax(t);
  }
  CheckFromToInRange(from, to_inc, self);
  return RandomRange(self, from, static_cast<uint64_t>(to_inc) - static_cast<uint64_t>(from) + 1, gen);
}
Tensor& random_to(Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from(self, 0, to, gen);
}
// random_(): [0, 2^digits] for floating types, [0, max] for integers.
Tensor& random_default(Tensor& self, std::optional<at::Generator> gen) {
  CheckTpu("random_", self, "self");
  const auto t = self.scalar_type();
  if (at::isFloatingType(t)) return RandomRange(self, 0, (uint64_t{1} << Digits(t)) + 1, gen);
  TORCH_CHECK(at::isIntegralType(t, /*includeBool=*/true),
              "random_ handles only integral, floating-point and boolean types, got ", t);
  return RandomRange(self, 0, static_cast<uint64_t>(IntMax(t)) + 1, gen);
}

// A complex tensor is filled through its real view, as PyTorch does: each
// part uniform in [from, to), or normal with std / sqrt(2) (so that |z|
// has variance std^2).
Tensor& uniform_(Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  // CPU's checks, in its order.
  const auto real_t = c10::toRealValueType(self.scalar_type());
  const bool fp = at::isFloatingType(real_t);
  const auto [lo, hi] = fp ? RandomBounds(real_t) : std::pair<double, double>{0, 0};
  if (fp) {
    TORCH_CHECK(from >= lo && from <= hi, "from is out of bounds for ", self.dtype().name());
    TORCH_CHECK(to >= lo && to <= hi, "to is out of bounds for ", self.dtype().name());
  }
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  TORCH_CHECK(!fp || to - from <= hi, "uniform_ expects to-from <= std::numeric_limits<",
              c10::toString(self.scalar_type()), ">::max(), but found to=", to, " and from=", from,
              " which result in to-from to exceed the limit");
  if (self.is_complex()) {
    Tensor parts = at::view_as_real(self);
    Random(parts, false, from, to, gen);
    return self;
  }
  return Random(self, false, from, to, gen);
}
Tensor& normal_(Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.is_complex()) {
    Tensor parts = at::view_as_real(self);
    Random(parts, true, mean, std / std::sqrt(2.0), gen);
    return self;
  }
  return Random(self, true, mean, std, gen);
}

// ---- bernoulli and dropout ----

// ins = (state, p) with p 0-d or shaped like the output; out = (u < p) in
// the output's dtype. ints = (uniform dtype).
VS LowerBernoulli(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const ir::TensorType& o = out[0];
  const int64_t n = o.numel();
  const auto ft = static_cast<DType>(at.ints[0]);
  Value u = ir::Reshape(b, Uniform01(b, in[0], n, ft), o.dims);
  Value p = ir::Convert(b, in[1], ft);
  p = b.type(p).dims.empty() ? ir::Full(b, p, o.dims) : ir::BroadcastTo(b, p, o.dims);
  return {ir::Convert(b, ir::Compare(b, u, p, ir::Cmp::LT), o.dtype)};
}
constexpr lazy::Lowering kBernoulli{"aten::bernoulli_", &LowerBernoulli};

Tensor& Bernoulli(Tensor& self, lazy::Operand p, const std::optional<at::Generator>& gen) {
  if (self.numel() == 0) return self;
  const bool f64 = self.scalar_type() == at::kDouble;
  const uint64_t words = static_cast<uint64_t>(self.numel()) * (f64 ? 2 : 1);
  RunInto(kBernoulli, {{static_cast<int64_t>(f64 ? DType::F64 : DType::F32)}, {}, {}},
          {StateOperand(gen, words), std::move(p)}, {TypeOf(self.sizes(), self.scalar_type())},
          {self});
  return self;
}

Tensor& bernoulli_float(Tensor& self, double p, std::optional<at::Generator> gen) {
  CheckTpu("bernoulli_", self, "self");
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  return Bernoulli(self, ScalarOperand(p, at::kDouble), gen);
}

Tensor& bernoulli_tensor(Tensor& self, const Tensor& p, std::optional<at::Generator> gen) {
  CheckTpu("bernoulli_", self, "self");
  CheckTpu("bernoulli_", p, "p");
  TORCH_CHECK(at::isFloatingType(p.scalar_type()),
              "expected probabilities tensor to have floating type, got ", p.scalar_type());
  TORCH_CHECK(at::is_expandable_to(p.sizes(), self.sizes()), "bernoulli_: p of shape ",
              p.sizes(), " cannot be broadcast to self of shape ", self.sizes());
  return Bernoulli(self, OperandOf(p), gen);
}

// torch.bernoulli(p, out=t): t of p's shape, each element 1 with its probability.
Tensor& bernoulli_out(const Tensor& self, std::optional<at::Generator> gen, Tensor& out) {
  CheckTpu("bernoulli", out, "out");
  at::native::resize_output(out, self.sizes());
  return bernoulli_tensor(out, self, gen);
}

Tensor bernoulli_p(const Tensor& self, double p, std::optional<at::Generator> gen) {
  Tensor r = EmptyTpu(self.sizes(), self.scalar_type());
  return bernoulli_float(r, p, gen);
}

// ins = (state, x, keep probability 0-d f32); out = (x * mask / keep, mask),
// the scale being 0 when keep is 0.
VS LowerDropout(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType& o = out[0];
  const DType ct = (o.dtype == DType::F64) ? DType::F64 : DType::F32;
  Value u = ir::Reshape(b, Uniform01(b, in[0], o.numel(), ct), o.dims);
  Value keep = ir::Convert(b, in[2], ct);
  Value mask = ir::Compare(b, u, ir::Full(b, keep, o.dims), ir::Cmp::LT);
  Value zero = ir::ConstantF(b, 0.0, ct);
  Value scale = ir::Select(b, ir::Compare(b, keep, zero, ir::Cmp::EQ), zero,
                           ir::Binary(b, "stablehlo.divide", ir::ConstantF(b, 1.0, ct), keep));
  Value x = ir::Convert(b, in[1], ct);
  Value kept = ir::Select(b, mask, x, ir::Full(b, zero, o.dims));
  Value r = ir::Binary(b, "stablehlo.multiply", kept, ir::Full(b, scale, o.dims));
  return {ir::Convert(b, r, o.dtype), mask};
}
constexpr lazy::Lowering kDropout{"aten::native_dropout", &LowerDropout};

std::tuple<Tensor, Tensor> native_dropout(const Tensor& input, double p,
                                          std::optional<bool> train) {
  CheckTpu("native_dropout", input, "input");
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (input.numel() == 0) return {input, EmptyTpu(input.sizes(), at::kBool)};
  if (train.has_value() && !*train) {
    Tensor mask = EmptyTpu(input.sizes(), at::kBool);
    mask.fill_(true);
    return {input.clone(), mask};
  }
  TORCH_CHECK(at::isFloatingType(input.scalar_type()),
              "native_dropout: expected a floating point input, got ", input.scalar_type());
  const bool f64 = input.scalar_type() == at::kDouble;
  const uint64_t words = static_cast<uint64_t>(input.numel()) * (f64 ? 2 : 1);
  auto r = Run(kDropout, {},
               {StateOperand(std::nullopt, words), OperandOf(input),
                ScalarOperand(1.0 - p, f64 ? at::kDouble : at::kFloat)},
               {TypeOf(input.sizes(), input.scalar_type()), TypeOf(input.sizes(), at::kBool)});
  return {r[0], r[1]};
}

// ins = (grad, mask, scale 0-d); out = grad * mask * scale.
VS LowerDropoutGrad(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType& o = out[0];
  const DType ct = (o.dtype == DType::F64) ? DType::F64 : DType::F32;
  Value g = ir::Convert(b, in[0], ct);
  Value mask = ir::Convert(b, ir::BroadcastTo(b, in[1], o.dims), DType::PRED);
  Value kept = ir::Select(b, mask, g, ir::Full(b, ir::ConstantF(b, 0.0, ct), o.dims));
  Value r = ir::Binary(b, "stablehlo.multiply", kept, ir::Full(b, ir::Convert(b, in[2], ct), o.dims));
  return {ir::Convert(b, r, o.dtype)};
}
constexpr lazy::Lowering kDropoutGrad{"aten::native_dropout_backward", &LowerDropoutGrad};

Tensor native_dropout_backward(const Tensor& grad, const Tensor& mask, double scale) {
  CheckTpu("native_dropout_backward", grad, "grad_output");
  CheckTpu("native_dropout_backward", mask, "mask");
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "Mask should be Bool Scalar Type", mask.scalar_type());
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), grad.sizes()),
              "native_dropout_backward: mask of shape ", mask.sizes(),
              " does not match grad_output of shape ", grad.sizes());
  if (grad.numel() == 0) return EmptyTpu(grad.sizes(), grad.scalar_type());
  const bool f64 = grad.scalar_type() == at::kDouble;
  return Run1(kDropoutGrad, {},
              {OperandOf(grad), OperandOf(mask), ScalarOperand(scale, f64 ? at::kDouble : at::kFloat)},
              TypeOf(grad.sizes(), grad.scalar_type()));
}

// ---- multinomial and randperm ----

// ins = (state, probs [B, C]); ints = (num_samples, replacement); out = [B, S] s64.
// With replacement: inverse CDF (the number of categories whose running sum
// is below u * total; a u past the last sum, from rounding, picks the last
// category with nonzero weight). Without: the S largest p / q with q ~ Exp(1),
// as CPU does.
VS LowerMultinomial(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const ir::Dims pd = b.type(in[1]).dims;
  const int64_t bs = pd[0], c = pd[1], s = at.ints[0];
  const DType ft = b.type(in[1]).dtype == DType::F64 ? DType::F64 : DType::F32;
  Value p = ir::Convert(b, in[1], ft);
  auto full = [&](double v, const ir::Dims& d) { return ir::Full(b, ir::ConstantF(b, v, ft), d); };
  if (at.ints[1]) {
    Value cdf = ir::CumReduce(b, p, ir::ConstantF(b, 0.0, ft), 1, "stablehlo.add");  // [B, C]
    Value total = ir::Slice(b, cdf, {0, c - 1}, {bs, c}, {1, 1});                   // [B, 1]
    Value u = ir::Reshape(b, Uniform01(b, in[0], bs * s, ft), {bs, s});
    u = ir::Binary(b, "stablehlo.multiply", u, ir::BroadcastInDim(b, ir::Reshape(b, total, {bs}),
                                                                   {bs, s}, {0}));
    const ir::Dims d3{bs, s, c};
    Value below = ir::Compare(b, ir::BroadcastInDim(b, cdf, d3, {0, 2}),
                              ir::BroadcastInDim(b, u, d3, {0, 1}), ir::Cmp::LE);
    Value idx = ir::Reduce(b, ir::Convert(b, below, DType::S64), ir::ConstantI(b, 0, DType::S64),
                           {2}, "stablehlo.add");  // [B, S]
    Value iota = ir::Iota(b, {bs, c}, 1, DType::S64);
    Value nz = ir::Compare(b, p, full(0, {bs, c}), ir::Cmp::GT);
    Value last = ir::Reduce(b, ir::Select(b, nz, iota, ir::Full(b, ir::ConstantI(b, 0, DType::S64), {bs, c})),
                            ir::ConstantI(b, 0, DType::S64), {1}, "stablehlo.maximum");  // [B]
    Value lastb = ir::BroadcastInDim(b, last, {bs, s}, {0});
    return {ir::Select(b, ir::Compare(b, idx, lastb, ir::Cmp::GT), lastb, idx)};
  }
  Value u = ir::Reshape(b, Uniform01(b, in[0], bs * c, ft), {bs, c});
  Value q = ir::Unary(b, "stablehlo.negate",
                      ir::Unary(b, "stablehlo.log_plus_one", ir::Unary(b, "stablehlo.negate", u)));
  Value keys = ir::Binary(b, "stablehlo.divide", p, q);
  Value iota = ir::Iota(b, {bs, c}, 1, DType::S64);
  auto sorted = ir::Sort(b, {keys, iota}, 1, true, [](Builder& rb, const std::vector<Value>& a) {
    return std::vector<Value>{ir::Compare(rb, a[0], a[1], ir::Cmp::GT)};
  });
  return {ir::Slice(b, sorted[1], {0, 0}, {bs, s}, {1, 1})};
}
constexpr lazy::Lowering kMultinomial{"aten::multinomial", &LowerMultinomial};

Tensor multinomial_tpu(const Tensor& self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> gen) {
  CheckTpu("multinomial", self, "self");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t n_dist = self.dim();
  TORCH_CHECK(n_dist == 1 || n_dist == 2, "prob_dist must be 1 or 2 dim");
  const int64_t n_categories = self.size(-1);
  TORCH_CHECK(replacement || (n_sample <= n_categories),
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(n_categories <= (int64_t{1} << 24),
              "number of categories cannot exceed 2^24");
  TORCH_CHECK(n_categories > 0, "multinomial: input must have at least one category");
  Tensor p = n_dist == 1 ? self.unsqueeze(0) : self;
  const int64_t bs = p.size(0);
  std::vector<int64_t> os = n_dist == 1 ? std::vector<int64_t>{n_sample}
                                        : std::vector<int64_t>{bs, n_sample};
  if (bs == 0) return EmptyTpu(os, at::kLong);
  const bool f64 = self.scalar_type() == at::kDouble;
  const uint64_t words =
      static_cast<uint64_t>(bs) * (replacement ? n_sample : n_categories) * (f64 ? 2 : 1);
  Tensor r = Run1(kMultinomial, {{n_sample, replacement ? 1 : 0}, {}, {}},
                  {StateOperand(gen, words), OperandOf(p)}, TypeOf({bs, n_sample}, at::kLong));
  return r.reshape(os);
}
Tensor& multinomial_out(const Tensor& self, int64_t n, bool replacement,
                        std::optional<at::Generator> gen, Tensor& out) {
  Tensor r = multinomial_tpu(self, n, replacement, gen);
  PrepareOut("multinomial", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

// ins = (state); out = [n]: the positions sorted by random 64-bit keys.
VS LowerRandperm(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const int64_t n = out[0].dims[0];
  auto r = b.Op("stablehlo.rng_bit_generator", {in[0]},
                {b.type(in[0]), ir::TensorType{DType::U64, {n}}},
                {{"rng_algorithm", "#stablehlo<rng_algorithm PHILOX>"}});
  auto sorted = ir::Sort(b, {r[1], ir::Iota(b, {n}, 0, DType::S64)}, 0, true,
                         [](Builder& rb, const std::vector<Value>& a) {
                           return std::vector<Value>{ir::Compare(rb, a[0], a[1], ir::Cmp::LT)};
                         });
  return {ir::Convert(b, sorted[1], out[0].dtype)};
}
constexpr lazy::Lowering kRandperm{"aten::randperm", &LowerRandperm};

Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  CheckTpu("randperm", out, "out");
  const auto dt = out.scalar_type();
  // As CPU: every value must be exact in the result's dtype.
  if (dt == at::kHalf) TORCH_CHECK(n <= (int64_t{1} << 11) + 1, "n cannot be greater than 2049 for Half type.");
  if (dt == at::kFloat) TORCH_CHECK(n <= (int64_t{1} << 24) + 1, "n cannot be greater than 2^24+1 for Float type.");
  if (dt == at::kDouble) TORCH_CHECK(n <= (int64_t{1} << 53) + 1, "n cannot be greater than 2^53+1 for Double type.");
  if (dt == at::kBFloat16) TORCH_CHECK(n <= (int64_t{1} << 8) + 1, "n cannot be greater than 2^8+1 for BFloat16 type.");
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  TORCH_CHECK(dt != at::kBool && (at::isFloatingType(dt) || at::isIntegralType(dt, false)),
              "randperm is not implemented for ", dt);
  if (at::isIntegralType(dt, false) && dt != at::kLong) {
    int64_t max = 0;
    AT_DISPATCH_INTEGRAL_TYPES(dt, "randperm", [&] {
      max = static_cast<int64_t>(std::numeric_limits<scalar_t>::max());
    });
    TORCH_CHECK(n - 1 <= max, "n is too large for result tensor type: '", out.toString(), "'");
  }
  RunInto(kRandperm, {}, {StateOperand(gen, static_cast<uint64_t>(n) * 2)},
          {TypeOf({n}, dt)}, {out});
  return out;
}
Tensor& randperm_out_nogen(int64_t n, Tensor& out) { return randperm_out(n, std::nullopt, out); }

// ---- rrelu_with_noise: random negative slopes in training ----

Tensor RreluInto(const Tensor& self, Tensor& noise, const c10::Scalar& lower,
                 const c10::Scalar& upper, bool training, std::optional<at::Generator> gen,
                 const Tensor* dst) {
  CheckTpu("rrelu_with_noise", self, "self");
  CheckTpu("rrelu_with_noise", noise, "noise");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "rrelu_with_noise: expected a floating "
              "point input, got ", self.scalar_type());
  const double lo = lower.toDouble(), hi = upper.toDouble();
  TORCH_CHECK(lo <= hi, "Lower bound should be less than or equal to the upper bound");
  Tensor out;
  if (training) {
    Tensor slopes = EmptyTpu(self.sizes(), self.scalar_type());
    Random(slopes, false, lo, hi, gen);
    Tensor neg = at::lt(self, 0);
    noise.copy_(at::where(neg, slopes, at::ones_like(slopes)));
    out = at::mul(self, noise);
  } else {
    out = at::leaky_relu(self, (lo + hi) / 2);
  }
  if (dst) {
    PrepareOut("rrelu_with_noise", *dst, out.sizes(), out.scalar_type());
    const_cast<Tensor&>(*dst).copy_(out);
    return *dst;
  }
  return out;
}
Tensor rrelu_with_noise_tpu(const Tensor& self, Tensor& noise, const c10::Scalar& lower,
                            const c10::Scalar& upper, bool training,
                            std::optional<at::Generator> gen) {
  return RreluInto(self, noise, lower, upper, training, gen, nullptr);
}
Tensor& rrelu_with_noise__tpu(Tensor& self, Tensor& noise, const c10::Scalar& lower,
                              const c10::Scalar& upper, bool training,
                              std::optional<at::Generator> gen) {
  RreluInto(self, noise, lower, upper, training, gen, &self);
  return self;
}
Tensor& rrelu_with_noise_out_tpu(const Tensor& self, Tensor& noise, const c10::Scalar& lower,
                                 const c10::Scalar& upper, bool training,
                                 std::optional<at::Generator> gen, Tensor& out) {
  RreluInto(self, noise, lower, upper, training, gen, &out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("random_.from", TORCH_FN(random_from));
  m.impl("random_.to", TORCH_FN(random_to));
  m.impl("random_", TORCH_FN(random_default));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("rrelu_with_noise", TORCH_FN(rrelu_with_noise_tpu));
  m.impl("rrelu_with_noise_", TORCH_FN(rrelu_with_noise__tpu));
  m.impl("rrelu_with_noise.out", TORCH_FN(rrelu_with_noise_out_tpu));
  m.impl("multinomial", TORCH_FN(multinomial_tpu));
  m.impl("multinomial.out", TORCH_FN(multinomial_out));
  m.impl("randperm.generator_out", TORCH_FN(randperm_out));
  m.impl("randperm.out", TORCH_FN(randperm_out_nogen));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_float));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulli_tensor));
  m.impl("bernoulli.p", TORCH_FN(bernoulli_p));
  m.impl("bernoulli.out", TORCH_FN(bernoulli_out));
  m.impl("native_dropout", TORCH_FN(native_dropout));
  m.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));
}

}  // namespace tpu::ops
