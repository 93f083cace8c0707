#include <ATen/native/Resize.h>
// Device random numbers (Philox via rng_bit_generator, seeded from the tpu
// generator's (seed, offset)) and arange.
#include <ATen/native/RangeUtils.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include <ATen/Dispatch.h>

#include "device/generator.h"
#include "ir/ops.h"
#include "ops/bridge.h"

namespace tpu::ops {

using at::Tensor;
using ir::Builder;
using ir::DType;
using ir::Value;
using VS = std::vector<Value>;
using TT = std::vector<ir::TensorType>;

namespace {

// `count` uniform floats in [0, 1) of `t` (f32 or f64) from a Philox state.
Value Uniform01(Builder& b, Value state, int64_t count, DType t) {
  const bool f64 = t == DType::F64;
  const DType bits_t = f64 ? DType::U64 : DType::U32;
  auto r = b.Op("stablehlo.rng_bit_generator", {state},
                {b.type(state), ir::TensorType{bits_t, {count}}},
                {{"rng_algorithm", "#stablehlo<rng_algorithm PHILOX>"}});
  Value bits = r[1];
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

// Integers uniform in [from, to): floor(from + u * (to - from)) with u an
// f64 uniform, exact for ranges below 2^53.
VS LowerRandomInt(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType& o = out[0];
  const int64_t n = o.numel();
  Value u = Uniform01(b, in[0], n, DType::F64);
  Value lo = Bcast(b, in[1], DType::F64, {n});
  Value width = ir::Binary(b, "stablehlo.subtract", Bcast(b, in[2], DType::F64, {n}), lo);
  Value r = ir::Unary(b, "stablehlo.floor",
                      ir::Binary(b, "stablehlo.add", lo, ir::Binary(b, "stablehlo.multiply", u, width)));
  return {ir::Reshape(b, ir::Convert(b, r, o.dtype), o.dims)};
}
constexpr lazy::Lowering kRandomInt{"aten::random_", &LowerRandomInt};

Tensor& random_from(Tensor& self, int64_t from, std::optional<int64_t> to,
                    std::optional<at::Generator> gen) {
  CheckTpu("random_", self, "self");
  int64_t hi;
  if (to.has_value()) {
    hi = *to;
  } else {
    // to=None: up to the dtype's largest value (+1), as on CPU.
    hi = self.scalar_type() == at::kBool ? 2
         : at::isFloatingType(self.scalar_type())
             ? (int64_t{1} << std::numeric_limits<float>::digits)
             : c10::Scalar(std::numeric_limits<int64_t>::max()).toLong();
    if (at::isIntegralType(self.scalar_type(), false)) {
      AT_DISPATCH_INTEGRAL_TYPES(self.scalar_type(), "random_", [&] {
        hi = static_cast<int64_t>(std::numeric_limits<scalar_t>::max());
      });
    }
  }
  TORCH_CHECK(from < hi, "random_ expects 'from' to be less than 'to', but got from=", from,
              " >= to=", hi);
  if (self.numel() == 0) return self;
  RunInto(kRandomInt, {},
          {StateOperand(gen, static_cast<uint64_t>(self.numel()) * 2),
           ScalarOperand(static_cast<double>(from), at::kDouble),
           ScalarOperand(static_cast<double>(hi), at::kDouble)},
          {TypeOf(self.sizes(), self.scalar_type())}, {self});
  return self;
}
Tensor& random_to(Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_from(self, 0, to, gen);
}

Tensor& uniform_(Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  return Random(self, false, from, to, gen);
}
Tensor& normal_(Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  return Random(self, true, mean, std, gen);
}

// ins = (start, step) as 0-d operands of the compute dtype.
VS LowerArange(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const auto ct = static_cast<DType>(at.ints[0]);
  const ir::Dims& d = out[0].dims;
  Value i = ir::Iota(b, d, 0, ct);
  Value r = ir::Binary(b, "stablehlo.add", ir::Full(b, ir::Convert(b, in[0], ct), d),
                       ir::Binary(b, "stablehlo.multiply", i, ir::Full(b, ir::Convert(b, in[1], ct), d)));
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kArange{"aten::arange", &LowerArange};

Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                   Tensor& out) {
  const auto dt = out.scalar_type();
  int64_t size = 0;
  if (at::isIntegralType(dt, true)) {
    at::native::arange_check_bounds(start, end, step);
    const int64_t s = start.toLong(), e = end.toLong(), st = step.toLong();
    size = st > 0 ? std::max<int64_t>(0, (e - s + st - 1) / st)
                  : std::max<int64_t>(0, (s - e - st - 1) / -st);
  } else {
    at::native::arange_check_bounds(start, end, step);
    size = static_cast<int64_t>(
        std::ceil((end.toDouble() - start.toDouble()) / step.toDouble()));
    size = std::max<int64_t>(size, 0);
  }
  at::native::resize_output(out, {size});
  if (size == 0) return out;
  const auto ct = at::isIntegralType(dt, true) ? at::kLong
                  : dt == at::kDouble          ? at::kDouble
                                               : at::kFloat;
  RunInto(kArange, {{static_cast<int64_t>(ToIr(ct))}, {}, {}},
          {ScalarOperand(start, ct), ScalarOperand(step, ct)}, {TypeOf({size}, dt)}, {out});
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("random_.from", TORCH_FN(random_from));
  m.impl("random_.to", TORCH_FN(random_to));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("arange.start_out", TORCH_FN(arange_out));
}

}  // namespace tpu::ops
