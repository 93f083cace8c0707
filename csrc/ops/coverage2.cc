// Smaller ops that complete PyTorch's operator surface: rsub, nansum,
// amax/amin out=, addbmm, the remaining random distributions (exponential,
// cauchy, geometric, log_normal, normal with tensor parameters),
// unfold_backward, _efficientzerotensor, _unique, _batch_norm_with_update /
// _no_update and batch_norm_backward, index_reduce, angle, gcd/lcm, frexp.
//
// Most are compositions of other tpu ops (each still a StableHLO lowering);
// gcd/lcm (Euclid's algorithm in a stablehlo.while) and frexp (on the
// floating-point bits) are lowerings of their own.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_unique2.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/div.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/le.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/unique_consecutive.h>
#include <ATen/ops/add.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/ceil.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/scatter_reduce.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tan.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "ops/bridge.h"
#include "ops/complex.h"
#include "ops/index_checks.h"
#include "ops/formula.h"
#include "ops/loops.h"

namespace tpu::ops {

using at::Tensor;
using ir::Builder;
using ir::DType;
using ir::Value;
using VS = std::vector<Value>;
using TT = std::vector<ir::TensorType>;

namespace {

c10::TensorOptions Tpu(at::ScalarType t) {
  return c10::TensorOptions().dtype(t).device(c10::Device(c10::DeviceType::PrivateUse1));
}

Tensor& Into(const char* op, const Tensor& r, Tensor& out) {
  PrepareOut(op, out, r.sizes(), r.scalar_type());
  out.copy_(r);
  return out;
}

// ---- rsub, nansum, amax/amin out=, addbmm ----

Tensor rsub_tensor_tpu(const Tensor& self, const Tensor& other, const c10::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

Tensor nansum_tpu(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  std::optional<at::ScalarType> dtype) {
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  Tensor x = at::isFloatingType(self.scalar_type())
                 ? at::where(at::isnan(self), at::zeros({}, Tpu(self.scalar_type())), self)
                 : self;
  return at::sum(x, dim, keepdim, dtype);
}
Tensor& nansum_out_tpu(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype, Tensor& out) {
  return Into("nansum", nansum_tpu(self, dim, keepdim, dtype.has_value() ? dtype : out.scalar_type()),
              out);
}

Tensor& amax_out_tpu(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "Expected the dtype for input and out to "
              "match, but got ", self.scalar_type(), " for input's dtype and ", out.scalar_type(),
              " for out's dtype.");
  return Into("amax", at::amax(self, dim, keepdim), out);
}
Tensor& amin_out_tpu(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "Expected the dtype for input and out to "
              "match, but got ", self.scalar_type(), " for input's dtype and ", out.scalar_type(),
              " for out's dtype.");
  return Into("amin", at::amin(self, dim, keepdim), out);
}

Tensor Addbmm(const Tensor& self, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
              const c10::Scalar& alpha) {
  TORCH_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b1.size(0) == b2.size(0), "batch1 and batch2 must have same number of batches, got ",
              b1.size(0), " and ", b2.size(0));
  TORCH_CHECK(b1.size(2) == b2.size(1), "Incompatible matrix sizes for bmm (", b1.size(1), "x",
              b1.size(2), " and ", b2.size(1), "x", b2.size(2), ")");
  // beta * self + alpha * sum_b b1[b] @ b2[b] as one addmm over (b, k), so
  // that a low-precision result is rounded once, not once per step.
  const int64_t nb = b1.size(0), n = b1.size(1), k = b1.size(2), m = b2.size(2);
  return at::addmm(self.expand({n, m}), b1.permute({1, 0, 2}).reshape({n, nb * k}),
                   b2.reshape({nb * k, m}), beta, alpha);
}
Tensor addbmm_tpu(const Tensor& self, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
                  const c10::Scalar& alpha) {
  return Addbmm(self, b1, b2, beta, alpha);
}
Tensor& addbmm_out_tpu(const Tensor& self, const Tensor& b1, const Tensor& b2,
                       const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out) {
  return Into("addbmm", Addbmm(self, b1, b2, beta, alpha), out);
}
Tensor& addbmm__tpu(Tensor& self, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
                    const c10::Scalar& alpha) {
  Tensor r = Addbmm(self, b1, b2, beta, alpha);
  TORCH_CHECK(r.sizes() == self.sizes(), "addbmm_: result shape ", r.sizes(),
              " does not match self ", self.sizes());
  return self.copy_(r);
}

// ---- random distributions, from uniform_ / normal_ ----

void CheckFloat(const char* op, const Tensor& self) {
  CheckTpu(op, self, "self");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, " expects a floating point tensor, got ",
              self.scalar_type());
}
Tensor& exponential__tpu(Tensor& self, double lambd, std::optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  CheckFloat("exponential_", self);
  Tensor u = at::empty(self.sizes(), Tpu(at::kFloat)).uniform_(0, 1, gen);
  return self.copy_(at::mul(at::log1p(at::mul(u, -1.0)), -1.0 / lambd));
}
Tensor& cauchy__tpu(Tensor& self, double median, double sigma, std::optional<at::Generator> gen) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  CheckFloat("cauchy_", self);
  Tensor u = at::empty(self.sizes(), Tpu(at::kFloat)).uniform_(0, 1, gen);
  return self.copy_(at::add(at::mul(at::tan(at::mul(at::sub(u, 0.5), M_PI)), sigma), median));
}
Tensor& geometric__tpu(Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  CheckTpu("geometric_", self, "self");
  Tensor u = at::empty(self.sizes(), Tpu(at::kFloat)).uniform_(0, 1, gen);
  // 1 - u is in (0, 1]: log of it is finite.
  Tensor r = at::ceil(at::mul(at::log(at::rsub(u, 1.0)), 1.0 / std::log1p(-p)));
  return self.copy_(at::where(at::lt(r, 1.0), at::full({}, 1.0, Tpu(at::kFloat)), r));
}
Tensor& log_normal__tpu(Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  CheckFloat("log_normal_", self);
  Tensor z = at::empty(self.sizes(), Tpu(self.scalar_type())).normal_(mean, std, gen);
  return self.copy_(at::exp(z));
}

Tensor NormalOf(const Tensor& mean, const Tensor& std, std::optional<at::Generator> gen) {
  auto shape = at::infer_size(mean.sizes(), std.sizes());
  auto dt = at::result_type(mean, std);
  TORCH_CHECK(at::isFloatingType(dt), "normal expects floating point mean and std, got ", dt);
  Tensor z = at::empty(shape, Tpu(dt)).normal_(0, 1, gen);
  return at::add(at::mul(z, std), mean);
}
Tensor normal_tt_tpu(const Tensor& mean, const Tensor& std, std::optional<at::Generator> gen) {
  return NormalOf(mean, std, gen);
}
Tensor normal_tf_tpu(const Tensor& mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  return NormalOf(mean, at::full({}, std, Tpu(mean.scalar_type())), gen);
}
Tensor normal_ft_tpu(double mean, const Tensor& std, std::optional<at::Generator> gen) {
  return NormalOf(at::full({}, mean, Tpu(std.scalar_type())), std, gen);
}
Tensor& normal_tt_out_tpu(const Tensor& mean, const Tensor& std, std::optional<at::Generator> gen,
                          Tensor& out) {
  return Into("normal", normal_tt_tpu(mean, std, gen), out);
}
Tensor& normal_tf_out_tpu(const Tensor& mean, double std, std::optional<at::Generator> gen,
                          Tensor& out) {
  return Into("normal", normal_tf_tpu(mean, std, gen), out);
}
Tensor& normal_ft_out_tpu(double mean, const Tensor& std, std::optional<at::Generator> gen,
                          Tensor& out) {
  return Into("normal", normal_ft_tpu(mean, std, gen), out);
}

// ---- unfold_backward: the windows added back at their positions ----

Tensor unfold_backward_tpu(const Tensor& grad, c10::SymIntArrayRef input_sizes, int64_t dim,
                           int64_t size, int64_t step) {
  TORCH_CHECK_VALUE(step > 0, "step is ", step, " but must be > 0");
  TORCH_CHECK(size >= 0, "size is ", size, " but must be >= 0");
  std::vector<int64_t> in_sizes;
  for (const auto& s : input_sizes) in_sizes.push_back(s.expect_int());
  const int64_t nd = static_cast<int64_t>(in_sizes.size());
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(nd, 1));
  Tensor zeros = at::zeros(in_sizes, Tpu(grad.scalar_type()));
  if (grad.numel() == 0) return zeros;
  if (nd == 0) return grad.reshape({});
  const int64_t n = grad.size(d);
  // grad: (..., n, ..., size) -> (..., n * size, ...) with window k's
  // element j at position k * step + j.
  Tensor g = grad.movedim(-1, d + 1);
  std::vector<int64_t> flat = g.sizes().vec();
  flat[d] = n * size;
  flat.erase(flat.begin() + d + 1);
  g = g.reshape(flat);
  Tensor idx = at::add(at::arange(n, Tpu(at::kLong)).mul(step).unsqueeze(1),
                       at::arange(size, Tpu(at::kLong)).unsqueeze(0))
                   .reshape({-1});
  return at::index_add(zeros, d, idx, g);
}

// ---- _efficientzerotensor, _unique ----

Tensor efficientzerotensor_tpu(c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device>,
                               std::optional<bool>) {
  std::vector<int64_t> s;
  for (const auto& v : size) s.push_back(v.expect_int());
  return at::zeros(s, Tpu(dtype.value_or(c10::typeMetaToScalarType(at::get_default_dtype()))));
}

std::tuple<Tensor, Tensor> unique_tpu(const Tensor& self, bool sorted, bool return_inverse) {
  auto r = at::_unique2(self, sorted, return_inverse, false);
  return {std::get<0>(r), std::get<1>(r)};
}

// ---- batch norm entry points of the training/inference split ----

std::tuple<Tensor, Tensor, Tensor, Tensor> batch_norm_with_update_tpu(
    const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    Tensor& running_mean, Tensor& running_var, double momentum, double eps) {
  auto [o, m, r] = at::native_batch_norm(input, weight, bias, running_mean, running_var, true,
                                         momentum, eps);
  return {o, m, r, at::empty({0}, Tpu(at::kByte))};
}
std::tuple<Tensor, Tensor, Tensor, Tensor> batch_norm_no_update_tpu(
    const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    double momentum, double eps) {
  const bool have_stats = running_mean.has_value() && running_mean->defined();
  auto [o, m, r] = at::native_batch_norm(input, weight, bias, running_mean, running_var,
                                         !have_stats, momentum, eps);
  return {o, m, r, at::empty({0}, Tpu(at::kByte))};
}
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward_tpu(
    const Tensor& grad_out, const Tensor& input, const Tensor& weight,
    const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
    const std::optional<Tensor>& save_mean, const std::optional<Tensor>& save_var, bool update,
    double eps, std::array<bool, 3> mask, const Tensor&) {
  return at::native_batch_norm_backward(grad_out, input, weight, running_mean, running_var,
                                        save_mean, save_var, update, eps, mask);
}

// ---- index_reduce, through scatter_reduce with the index spread ----

Tensor IndexReduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                   c10::string_view reduce, bool include_self) {
  TORCH_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
              "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ",
              reduce, ".");
  TORCH_CHECK(index.dim() <= 1, "index_reduce_(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_reduce_(): Expected dtype int32/int64 for index but got: ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_reduce_(): self (",
              self.scalar_type(), ") and source (", source.scalar_type(),
              ") must have the same scalar type");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK(source.dim() == 0 || source.size(d) == index.numel(),
              "index_reduce_(): Expected index to have the same number of elements as source "
              "along dim ", d);
  if (index.numel() == 0) return self.clone();
  CheckIndexRange({"aten::index_reduce", true, false, "index out of range in self", "", false},
                  index, self.dim() == 0 ? 1 : self.size(d));
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  Tensor src = source.dim() == 0 ? source.reshape({1}) : source;
  std::vector<int64_t> view(src.dim(), 1);
  view[d] = -1;
  Tensor idx = index.to(at::kLong).reshape(view).expand(src.sizes());
  Tensor r = at::scatter_reduce(x, d, idx, src, reduce, include_self);
  return self.dim() == 0 ? r.reshape({}) : r;
}
Tensor index_reduce_tpu(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                        c10::string_view reduce, bool include_self) {
  return IndexReduce(self, dim, index, source, reduce, include_self);
}
Tensor& index_reduce_out_tpu(const Tensor& self, int64_t dim, const Tensor& index,
                             const Tensor& source, c10::string_view reduce, bool include_self,
                             Tensor& out) {
  return Into("index_reduce", IndexReduce(self, dim, index, source, reduce, include_self), out);
}
Tensor& index_reduce__tpu(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                          c10::string_view reduce, bool include_self) {
  return self.copy_(IndexReduce(self, dim, index, source, reduce, include_self));
}

// ---- angle of real inputs: pi where negative, 0 elsewhere, NaN kept ----

Tensor angle_tpu(const Tensor& self) {
  CheckTpu("angle", self, "self");
  if (self.is_complex()) return ComplexToReal("angle", self);
  const auto rt = at::isIntegralType(self.scalar_type(), true)
                      ? c10::typeMetaToScalarType(at::get_default_dtype())
                      : self.scalar_type();
  Tensor x = self.to(rt);
  Tensor pi = at::full({}, M_PI, Tpu(rt)), zero = at::zeros({}, Tpu(rt));
  return at::where(at::isnan(x), x, at::where(at::lt(x, 0), pi, zero));
}
Tensor& angle_out_tpu(const Tensor& self, Tensor& out) { return Into("angle", angle_tpu(self), out); }

// ---- gcd / lcm: Euclid's algorithm, all elements in one while loop ----

// ins = (a, b) in the result dtype and shape; ints = (lcm?).
VS LowerGcd(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const ir::Dims& d = out[0].dims;
  const DType t = out[0].dtype;
  Value a0 = ir::Unary(b, "stablehlo.abs", ir::BroadcastTo(b, ir::Convert(b, in[0], t), d));
  Value b0 = ir::Unary(b, "stablehlo.abs", ir::BroadcastTo(b, ir::Convert(b, in[1], t), d));
  ir::Dims all;
  for (size_t i = 0; i < d.size(); ++i) all.push_back(static_cast<int64_t>(i));
  auto zero = [&](Builder& bb) { return ir::Full(bb, ir::ConstantI(bb, 0, t), d); };
  VS r = loop::While(
      b, {a0, b0},
      [&](Builder& bb, const VS& v) {
        Value nz = ir::Compare(bb, v[0], zero(bb), ir::Cmp::NE);
        return ir::Reduce(bb, nz, ir::ConstantI(bb, 0, DType::PRED), all, "stablehlo.or");
      },
      [&](Builder& bb, const VS& v) {
        Value nz = ir::Compare(bb, v[0], zero(bb), ir::Cmp::NE);
        Value safe = ir::Select(bb, nz, v[0], ir::Full(bb, ir::ConstantI(bb, 1, t), d));
        Value rem = ir::Binary(bb, "stablehlo.remainder", v[1], safe);
        return VS{ir::Select(bb, nz, rem, zero(bb)), ir::Select(bb, nz, v[0], v[1])};
      });
  Value g = r[1];
  if (!at.ints[0]) return {g};
  Value gz = ir::Compare(b, g, zero(b), ir::Cmp::EQ);
  Value safe = ir::Select(b, gz, ir::Full(b, ir::ConstantI(b, 1, t), d), g);
  Value l = ir::Unary(b, "stablehlo.abs",
                      Mul(b, ir::Binary(b, "stablehlo.divide",
                                        ir::BroadcastTo(b, ir::Convert(b, in[0], t), d), safe),
                          ir::BroadcastTo(b, ir::Convert(b, in[1], t), d)));
  return {ir::Select(b, gz, zero(b), l)};
}
constexpr lazy::Lowering kGcd{"aten::gcd", &LowerGcd};

Tensor Gcd(const char* op, const Tensor& a, const Tensor& bb, bool lcm) {
  CheckTpu(op, a, "self");
  CheckTpu(op, bb, "other");
  const auto rt = at::result_type(a, bb);
  TORCH_CHECK(at::isIntegralType(rt, /*includeBool=*/false), "\"", op, "_cpu\" not implemented for '",
              c10::toString(rt), "'");
  auto shape = at::infer_size(a.sizes(), bb.sizes());
  if (c10::multiply_integers(shape) == 0) return EmptyTpu(shape, rt);
  return Run1(kGcd, {{lcm ? 1 : 0}, {}, {}}, {OperandOf(a), OperandOf(bb)}, TypeOf(shape, rt));
}
Tensor gcd_tpu(const Tensor& a, const Tensor& b) { return Gcd("gcd", a, b, false); }
Tensor& gcd_out_tpu(const Tensor& a, const Tensor& b, Tensor& out) {
  return Into("gcd", Gcd("gcd", a, b, false), out);
}
Tensor& gcd__tpu(Tensor& a, const Tensor& b) { return a.copy_(Gcd("gcd", a, b, false)); }
Tensor lcm_tpu(const Tensor& a, const Tensor& b) { return Gcd("lcm", a, b, true); }
Tensor& lcm_out_tpu(const Tensor& a, const Tensor& b, Tensor& out) {
  return Into("lcm", Gcd("lcm", a, b, true), out);
}
Tensor& lcm__tpu(Tensor& a, const Tensor& b) { return a.copy_(Gcd("lcm", a, b, true)); }

// ---- frexp: mantissa in [0.5, 1) and exponent, from the bits ----

// ins = (x); out = (mantissa (x's dtype), exponent (s32)). Computed in f32
// for 16-bit floats (exact), f64 for f64.
VS LowerFrexp(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const DType ft = out[0].dtype == DType::F64 ? DType::F64 : DType::F32;
  const bool dbl = ft == DType::F64;
  const DType it = dbl ? DType::S64 : DType::S32;
  const int mbits = dbl ? 52 : 23;
  const int64_t emask = dbl ? 0x7ff : 0xff;
  const int64_t bias_m1 = dbl ? 1022 : 126;
  const ir::Dims& d = out[0].dims;
  auto I = [&](int64_t v) { return ir::Full(b, ir::ConstantI(b, v, it), d); };
  Value x = ir::Convert(b, in[0], ft);
  // Subnormals scaled into the normal range first.
  const int sub_shift = dbl ? 54 : 25;
  Value ax = ir::Unary(b, "stablehlo.abs", x);
  Value tiny = ir::Compare(b, ax, C(b, dbl ? 2.2250738585072014e-308 : 1.1754943508222875e-38, ax),
                           ir::Cmp::LT);
  Value xs = ir::Select(b, tiny, Mul(b, x, C(b, std::ldexp(1.0, sub_shift), x)), x);
  Value bits = b.Op1("stablehlo.bitcast_convert", {xs}, ir::TensorType{it, d});
  Value ebits = ir::Binary(b, "stablehlo.and",
                           ir::Binary(b, "stablehlo.shift_right_logical", bits, I(mbits)), I(emask));
  Value e = Sub(b, ebits, I(bias_m1));
  e = ir::Select(b, tiny, Sub(b, e, I(sub_shift)), e);
  // Mantissa: the exponent field replaced by bias - 1 (value in [0.5, 1)).
  Value keep = ir::Unary(b, "stablehlo.not", ir::Binary(b, "stablehlo.shift_left", I(emask), I(mbits)));
  Value mb = ir::Binary(b, "stablehlo.or", ir::Binary(b, "stablehlo.and", bits, keep),
                        ir::Binary(b, "stablehlo.shift_left", I(bias_m1), I(mbits)));
  Value m = b.Op1("stablehlo.bitcast_convert", {mb}, ir::TensorType{ft, d});
  // Zero, inf and NaN: the value itself and exponent 0.
  Value special = ir::Binary(
      b, "stablehlo.or", ir::Compare(b, x, C(b, 0, x), ir::Cmp::EQ),
      ir::Unary(b, "stablehlo.not", b.Op1("stablehlo.is_finite", {x}, ir::TensorType{DType::PRED, d})));
  m = ir::Select(b, special, x, m);
  e = ir::Select(b, special, I(0), e);
  return {ir::Convert(b, m, out[0].dtype), ir::Convert(b, e, DType::S32)};
}
constexpr lazy::Lowering kFrexp{"aten::frexp", &LowerFrexp};

std::tuple<Tensor, Tensor> frexp_tpu(const Tensor& self) {
  CheckTpu("frexp", self, "self");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "torch.frexp() only supports floating-point "
              "dtypes");
  if (self.numel() == 0)
    return {EmptyTpu(self.sizes(), self.scalar_type()), EmptyTpu(self.sizes(), at::kInt)};
  auto r = Run(kFrexp, {}, {OperandOf(self)},
               {TypeOf(self.sizes(), self.scalar_type()), TypeOf(self.sizes(), at::kInt)});
  return {r[0], r[1]};
}
std::tuple<Tensor&, Tensor&> frexp_out_tpu(const Tensor& self, Tensor& mantissa, Tensor& exponent) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "torch.frexp() only supports floating-point "
              "dtypes");
  TORCH_CHECK(mantissa.scalar_type() == self.scalar_type(), "torch.frexp() expects mantissa to have "
              "dtype ", self.scalar_type(), " but got ", mantissa.scalar_type());
  TORCH_CHECK(exponent.scalar_type() == at::kInt, "torch.frexp() expects exponent to have int "
              "dtype but got ", exponent.scalar_type());
  auto [m, e] = frexp_tpu(self);
  Into("frexp", m, mantissa);
  Into("frexp", e, exponent);
  return {mantissa, exponent};
}

// ---- conj_physical (a copy for real tensors) ----

// in = (x complex); out = conj(x).
VS LowerConj(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType& t = out[0];
  const DType rt = t.dtype == DType::C128 ? DType::F64 : DType::F32;
  Value x = ir::Convert(b, in[0], t.dtype);
  Value re = b.Op1("stablehlo.real", {x}, ir::TensorType{rt, t.dims});
  Value im = b.Op1("stablehlo.imag", {x}, ir::TensorType{rt, t.dims});
  return {b.Op1("stablehlo.complex", {re, ir::Unary(b, "stablehlo.negate", im)}, t)};
}
constexpr lazy::Lowering kConj{"aten::conj_physical", &LowerConj};

Tensor& conj_physical_out_tpu(const Tensor& self, Tensor& out) {
  CheckTpu("conj_physical", self, "self");
  PrepareOut("conj_physical", out, self.sizes(), self.scalar_type());
  if (!self.is_complex() || self.numel() == 0) return out.copy_(self);
  return out.copy_(Run1(kConj, {}, {OperandOf(self)}, TypeOf(self.sizes(), self.scalar_type())));
}

// ---- mode: the most frequent value along dim (the smallest among ties)
// and the index of its last occurrence in sorted order ----

// in = (x (R, n)); out = (values (R), indices (R) s64).
VS LowerMode(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::TensorType xt = b.type(in[0]);
  const int64_t R = xt.dims[0], n = xt.dims[1];
  const ir::Dims d{R, n};
  Value iota = ir::Iota(b, d, 1, DType::S64);
  ir::TensorType sv{xt.dtype, {}}, si{DType::S64, {}};
  VS sorted = ir::Sort(b, {in[0], iota}, 1, /*stable=*/true, [](Builder& rb, const VS& a) {
    return VS{ir::Compare(rb, a[0], a[1], ir::Cmp::LT)};
  });
  Value v = sorted[0], idx = sorted[1];
  auto shifted = [&](Value x, bool right, Value fill) {  // x[i - 1] or x[i + 1]
    Value f = ir::Full(b, fill, {R, 1});
    if (n == 1) return ir::Full(b, fill, d);
    return right ? ir::Concatenate(b, {f, ir::Slice(b, x, {0, 0}, {R, n - 1}, {1, 1})}, 1)
                 : ir::Concatenate(b, {ir::Slice(b, x, {0, 1}, {R, n}, {1, 1}), f}, 1);
  };
  Value first = ir::Compare(b, iota, ir::Full(b, ir::ConstantI(b, 0, DType::S64), d), ir::Cmp::EQ);
  Value last = ir::Compare(b, iota, ir::Full(b, ir::ConstantI(b, n - 1, DType::S64), d), ir::Cmp::EQ);
  Value zero_v = ir::ConstantI(b, 0, xt.dtype);
  Value start = ir::Binary(b, "stablehlo.or", first,
                           ir::Compare(b, v, shifted(v, true, zero_v), ir::Cmp::NE));
  Value end = ir::Binary(b, "stablehlo.or", last,
                         ir::Compare(b, v, shifted(v, false, zero_v), ir::Cmp::NE));
  Value start_pos = ir::CumReduce(b, ir::Select(b, start, iota, ir::Full(b, ir::ConstantI(b, 0, DType::S64), d)),
                                  ir::ConstantI(b, 0, DType::S64), 1, "stablehlo.maximum");
  Value len = Add(b, ir::Binary(b, "stablehlo.subtract", iota, start_pos),
                      ir::Full(b, ir::ConstantI(b, 1, DType::S64), d));
  len = ir::Select(b, end, len, ir::Full(b, ir::ConstantI(b, 0, DType::S64), d));
  Value pos = ir::ArgReduce(b, len, 1, /*is_max=*/true).second;  // first longest run
  Value pos2 = ir::Reshape(b, pos, {R, 1});
  Value pick = ir::Compare(b, iota, ir::BroadcastInDim(b, pos, d, {0}), ir::Cmp::EQ);
  (void)pos2;
  Value vals = ir::Reduce(b, ir::Select(b, pick, v, ir::Full(b, zero_v, d)), zero_v, {1}, "stablehlo.add");
  Value inds = ir::Reduce(b, ir::Select(b, pick, idx, ir::Full(b, ir::ConstantI(b, 0, DType::S64), d)),
                          ir::ConstantI(b, 0, DType::S64), {1}, "stablehlo.add");
  return {ir::Convert(b, vals, out[0].dtype), inds};
}
constexpr lazy::Lowering kMode{"aten::mode", &LowerMode};

std::tuple<Tensor, Tensor> mode_tpu(const Tensor& self, int64_t dim, bool keepdim) {
  CheckTpu("mode", self, "self");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK(self.dim() == 0 || self.size(d) > 0, "mode(): Expected reduction dim ", d,
              " to have non-zero size.");
  if (self.dim() == 0) return {self.clone(), at::zeros({}, Tpu(at::kLong))};
  Tensor x = self.movedim(d, -1);
  std::vector<int64_t> rest(x.sizes().begin(), x.sizes().end() - 1);
  const int64_t n = x.size(-1), R = c10::multiply_integers(rest);
  Tensor vals, inds;
  if (R == 0) {
    vals = EmptyTpu(rest, self.scalar_type());
    inds = EmptyTpu(rest, at::kLong);
  } else {
    auto r = Run(kMode, {}, {OperandOf(x.reshape({R, n}))},
                 {TypeOf({R}, self.scalar_type()), TypeOf({R}, at::kLong)});
    vals = r[0].reshape(rest);
    inds = r[1].reshape(rest);
  }
  if (keepdim) {
    vals = vals.unsqueeze(d);
    inds = inds.unsqueeze(d);
  }
  return {vals, inds};
}

// ---- unique along a dim: rows sorted lexicographically (stable sorts by
// each column, last first), then unique_consecutive ----

std::tuple<Tensor, Tensor, Tensor> unique_dim_tpu(const Tensor& self, int64_t dim, bool sorted,
                                                  bool return_inverse, bool return_counts) {
  (void)sorted;  // always sorted, as on CPU
  CheckTpu("unique_dim", self, "self");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  Tensor x = self.movedim(d, 0);
  const int64_t n = x.size(0);
  Tensor empty_l = at::empty({0}, Tpu(at::kLong));
  if (n == 0 || self.numel() == 0) {
    TORCH_CHECK(n == 0 || self.numel() > 0, "Number of zero sized dimensions is more than one, so "
                "unique cannot be applied ");
    return {self.clone(), return_inverse ? at::zeros({n}, Tpu(at::kLong)) : empty_l,
            return_counts ? at::zeros({n}, Tpu(at::kLong)) : empty_l};
  }
  Tensor x2 = x.reshape({n, -1});
  Tensor perm = at::arange(n, Tpu(at::kLong));
  for (int64_t c = x2.size(1) - 1; c >= 0; --c) {
    Tensor key = x2.index_select(0, perm).select(1, c);
    Tensor p = std::get<1>(at::sort(key, std::optional<bool>(true), 0, false));
    perm = perm.index_select(0, p);
  }
  auto [u, inv_sorted, counts] =
      at::unique_consecutive(x.index_select(0, perm), /*return_inverse=*/true, return_counts, 0);
  Tensor inverse = at::zeros({n}, Tpu(at::kLong)).scatter(0, perm, inv_sorted);
  return {u.movedim(0, d), return_inverse ? inverse : empty_l, return_counts ? counts : empty_l};
}

// ---- histogram with a bin count: bins over [min, max] (or range) ----

// Counts (or weights) of x (1-d) in the bins between consecutive edges, the
// last bin closed on the right; values outside the edges are not counted.
Tensor HistogramOver(const Tensor& x, const Tensor& edges, const std::optional<Tensor>& weight,
                     bool density) {
  const auto dt = edges.scalar_type();
  const int64_t bins = edges.numel() - 1;
  Tensor hist = at::zeros({bins}, Tpu(dt));
  if (bins <= 0) return hist;
  if (x.numel() == 0) {
    if (density) hist = at::div(hist, at::sum(hist));  // 0 / 0, as on CPU
    return hist;
  }
  Tensor pos = at::sub(at::searchsorted(edges, x, false, true), 1);
  Tensor last = at::eq(x, edges.select(0, bins));
  pos = at::where(last, at::full({}, bins - 1, Tpu(at::kLong)), pos);
  Tensor valid = at::logical_and(at::ge(x, edges.select(0, 0)), at::le(x, edges.select(0, bins)));
  const bool has_w = weight.has_value() && weight->defined();
  Tensor w = has_w ? weight->reshape({-1}).to(dt) : at::ones({x.numel()}, Tpu(dt));
  w = at::where(valid, w, at::zeros({}, Tpu(dt)));
  pos = at::clamp(pos, 0, bins - 1);
  hist = hist.index_add(0, pos, w);
  if (density) {
    Tensor widths = at::sub(edges.narrow(0, 1, bins), edges.narrow(0, 0, bins));
    hist = at::div(hist, at::mul(at::sum(hist), widths));
  }
  return hist;
}

std::tuple<Tensor, Tensor> histogram_bin_ct_tpu(const Tensor& self, int64_t bins,
                                                 std::optional<at::ArrayRef<double>> range,
                                                 const std::optional<Tensor>& weight, bool density) {
  CheckTpu("histogram", self, "self");
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "torch.histogram: input tensor and bins "
              "tensors should have the same dtype");
  const bool has_w = weight.has_value() && weight->defined();
  if (has_w)
    TORCH_CHECK(weight->sizes() == self.sizes(), "torch.histogram(): if weight tensor is provided "
                "it should have the same shape as the input tensor excluding its innermost "
                "dimension");
  const auto dt = self.scalar_type();
  Tensor x = self.reshape({-1});
  double lo = 0, hi = 0;
  if (range.has_value()) {
    TORCH_CHECK(range->size() == 2, "torch.histogram(): range should have 2 elements");
    lo = (*range)[0];
    hi = (*range)[1];
  } else if (x.numel() > 0) {
    auto [mn, mx] = at::aminmax(x);
    lo = mn.item<double>();
    hi = mx.item<double>();
  } else {
    hi = 1;  // CPU's edges for an empty input
  }
  TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histogram(): range of [", lo, ", ", hi,
              "] is not finite");
  TORCH_CHECK(lo <= hi, "torch.histogram(): min should not exceed max, but got min ", lo, " max ", hi);
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  Tensor edges = at::linspace(lo, hi, bins + 1, Tpu(dt));
  return {HistogramOver(x, edges, weight, density), edges};
}
std::tuple<Tensor&, Tensor&> histogram_bin_ct_out_tpu(const Tensor& self, int64_t bins,
                                                      std::optional<at::ArrayRef<double>> range,
                                                      const std::optional<Tensor>& weight,
                                                      bool density, Tensor& hist, Tensor& edges) {
  auto [h, e] = histogram_bin_ct_tpu(self, bins, range, weight, density);
  Into("histogram", h, hist);
  Into("histogram", e, edges);
  return {hist, edges};
}

std::tuple<Tensor, Tensor> histogram_bins_tensor_tpu(const Tensor& self, const Tensor& bins,
                                                      const std::optional<Tensor>& weight, bool density) {
  CheckTpu("histogram", self, "self");
  CheckTpu("histogram", bins, "bins");
  TORCH_CHECK(bins.dim() == 1, "torch.histogram(): bins tensor should have one dimension, but got ",
              bins.dim(), " dimensions in the bin tensor");
  TORCH_CHECK(bins.numel() > 0, "torch.histogram(): bins tensor should have at least 1 element, "
              "but got ", bins.numel(), " elements");
  TORCH_CHECK(self.scalar_type() == bins.scalar_type(), "torch.histogram: input tensor and bins "
              "tensors should have the same dtype, but got input ", self.scalar_type(),
              " and bins ", bins.scalar_type());
  Tensor edges = bins.clone();
  return {HistogramOver(self.reshape({-1}), edges, weight, density), edges};
}
std::tuple<Tensor&, Tensor&> histogram_bins_tensor_out_tpu(const Tensor& self, const Tensor& bins,
                                                           const std::optional<Tensor>& weight,
                                                           bool density, Tensor& hist, Tensor& edges) {
  auto [h, e] = histogram_bins_tensor_tpu(self, bins, weight, density);
  Into("histogram", h, hist);
  Into("histogram", e, edges);
  return {hist, edges};
}

// ---- segment_reduce along `axis` with 1-d lengths or offsets: each
// segment folded from `initial` (default: the reduction's identity; mean:
// (initial + sum) / length, NaN for an empty segment without initial) ----

struct Segments {
  Tensor lengths;  // (S) int64
  Tensor idx;      // data-shaped segment id along axis (S for elements past the last segment)
  int64_t S = 0, axis = 0;
};
Segments SegmentsOf(const Tensor& data, const std::optional<Tensor>& lengths,
                    const std::optional<Tensor>& offsets, int64_t axis) {
  Segments g;
  g.axis = at::maybe_wrap_dim(axis, data.dim());
  // lengths (or offsets) are (data.shape[:axis], S): one row of segments
  // per leading index (or 1-d, shared).
  if (lengths.has_value() && lengths->defined()) {
    g.lengths = lengths->to(at::kLong);
  } else {
    TORCH_CHECK(offsets.has_value() && offsets->defined(), "segment_reduce(): Either lengths or "
                "offsets must be defined");
    Tensor o = offsets->to(at::kLong);
    const int64_t k = o.size(-1);
    g.lengths = at::sub(o.narrow(-1, 1, k - 1), o.narrow(-1, 0, k - 1));
  }
  TORCH_CHECK(g.lengths.dim() == 1 || g.lengths.dim() == g.axis + 1,
              "segment_reduce(): Expected lengths/offsets to have ", g.axis + 1, " dimensions");
  g.S = g.lengths.size(-1);
  const int64_t n = data.size(g.axis);
  std::vector<int64_t> lead(g.lengths.sizes().begin(), g.lengths.sizes().end() - 1);
  Tensor ends = at::cumsum(g.lengths, -1);
  std::vector<int64_t> pos_shape = lead;
  pos_shape.push_back(n);
  Tensor pos = at::arange(n, Tpu(at::kLong)).expand(pos_shape).contiguous();
  Tensor ids = at::searchsorted(ends.contiguous(), pos, false, true);  // (lead..., n)
  std::vector<int64_t> view(data.dim(), 1);
  for (size_t i = 0; i < lead.size(); ++i) view[i] = lead[i];
  view[g.axis] = n;
  g.idx = ids.reshape(view).expand(data.sizes());
  return g;
}
double SegmentInit(c10::string_view reduce, const std::optional<c10::Scalar>& initial) {
  if (initial.has_value()) return initial->toDouble();
  if (reduce == "max") return -INFINITY;
  if (reduce == "min") return INFINITY;
  if (reduce == "prod") return 1;
  return 0;
}
std::vector<int64_t> WithAxis(const Tensor& data, int64_t axis, int64_t size) {
  auto v = data.sizes().vec();
  v[axis] = size;
  return v;
}
Tensor LengthsAlong(const Segments& g, const Tensor& like) {  // lengths shaped to broadcast with the output
  std::vector<int64_t> view(like.dim(), 1);
  for (int64_t i = 0; i + 1 < g.lengths.dim(); ++i) view[i] = g.lengths.size(i);
  view[g.axis] = g.S;
  return g.lengths.reshape(view);
}

Tensor segment_reduce_tpu(const Tensor& data, c10::string_view reduce, const std::optional<Tensor>& lengths,
                          const std::optional<Tensor>& indices, const std::optional<Tensor>& offsets,
                          int64_t axis, bool unsafe, const std::optional<c10::Scalar>& initial) {
  (void)indices;
  (void)unsafe;
  CheckTpu("segment_reduce", data, "data");
  TORCH_CHECK(reduce == "max" || reduce == "min" || reduce == "sum" || reduce == "mean" ||
              reduce == "prod", "segment_reduce: unsupported reduction ", reduce);
  Segments g = SegmentsOf(data, lengths, offsets, axis);
  const auto dt = data.scalar_type();
  // one extra segment collects what lies past the last one
  Tensor out = at::full(WithAxis(data, g.axis, g.S + 1), SegmentInit(reduce, initial), Tpu(dt));
  const char* how = reduce == "max" ? "amax" : reduce == "min" ? "amin" : reduce == "prod" ? "prod" : "sum";
  if (data.numel() > 0) out = at::scatter_reduce(out, g.axis, g.idx, data, how, /*include_self=*/true);
  out = out.narrow(g.axis, 0, g.S);
  if (reduce == "mean") {
    Tensor len = LengthsAlong(g, out);
    Tensor mean = at::div(out, at::clamp_min(len, 1).to(dt));
    Tensor empty = initial.has_value() ? out : at::full({}, NAN, Tpu(dt));
    out = at::where(at::gt(len, 0), mean, empty);
  }
  return out.contiguous();
}

Tensor segment_reduce_backward_tpu(const Tensor& grad, const Tensor& output, const Tensor& data,
                                   c10::string_view reduce, const std::optional<Tensor>& lengths,
                                   const std::optional<Tensor>& offsets, int64_t axis,
                                   const std::optional<c10::Scalar>& initial) {
  Segments g = SegmentsOf(data, lengths, offsets, axis);
  const auto dt = data.scalar_type();
  auto pad = [&](const Tensor& t) {  // (S) -> (S + 1) along axis with a zero segment
    return at::cat({t, at::zeros(WithAxis(data, g.axis, 1), Tpu(t.scalar_type()))}, g.axis);
  };
  Tensor gi = pad(grad).gather(g.axis, g.idx);
  if (reduce == "sum") return gi;
  if (reduce == "mean") {
    Tensor len = pad(LengthsAlong(g, grad).expand(grad.sizes()).to(dt)).gather(g.axis, g.idx);
    return at::div(gi, at::clamp_min(len, 1));
  }
  Tensor oi = pad(output).gather(g.axis, g.idx);
  if (reduce == "max" || reduce == "min") {
    Tensor hit = at::eq(data, oi).to(dt);
    Tensor cnt = at::zeros(WithAxis(data, g.axis, g.S + 1), Tpu(dt)).scatter_add(g.axis, g.idx, hit);
    Tensor ci = cnt.gather(g.axis, g.idx);
    return at::where(at::gt(hit, 0), at::div(gi, at::clamp_min(ci, 1)), at::zeros({}, Tpu(dt)));
  }
  // prod: output / x where x != 0; with one zero in the segment, the
  // product of the others at that zero; with more, 0.
  Tensor zero = at::eq(data, 0);
  Tensor nz = at::where(zero, at::ones({}, Tpu(dt)), data);
  Tensor zc = at::zeros(WithAxis(data, g.axis, g.S + 1), Tpu(dt)).scatter_add(g.axis, g.idx, zero.to(dt));
  Tensor prod_nz = at::full(WithAxis(data, g.axis, g.S + 1), SegmentInit(reduce, initial), Tpu(dt))
                       .scatter_reduce(g.axis, g.idx, nz, "prod", true);
  Tensor zi = zc.gather(g.axis, g.idx), pi = prod_nz.gather(g.axis, g.idx);
  Tensor at_nonzero = at::div(at::mul(gi, oi), nz);
  Tensor at_zero = at::where(at::eq(zi, 1), at::mul(gi, pi), at::zeros({}, Tpu(dt)));
  return at::where(zero, at_zero, at_nonzero);
}

// ---- hash_tensor (mode 0): XOR of the elements' 64-bit patterns (floats
// as float64, integers as int64), over `dim` ----

// in = (x); ints = (reduced dims...); out = u64 with the reduced dims
// removed (keepdim is a reshape on the ATen side).
VS LowerHash(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::TensorType t = b.type(in[0]);
  const bool fl = ir::IsFloat(t.dtype);
  Value x = ir::Convert(b, in[0], fl ? DType::F64 : DType::S64);
  x = b.Op1("stablehlo.bitcast_convert", {x}, ir::TensorType{DType::U64, t.dims});
  ir::Dims dims(a.ints.begin(), a.ints.end());
  Value r = dims.empty() ? x : ir::Reduce(b, x, ir::ConstantI(b, 0, DType::U64), dims, "stablehlo.xor");
  return {ir::Reshape(b, r, out[0].dims)};
}
constexpr lazy::Lowering kHash{"aten::hash_tensor", &LowerHash};

Tensor hash_tensor_tpu(const Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode) {
  CheckTpu("hash_tensor", self, "self");
  TORCH_CHECK(mode == 0, "hash_tensor: only mode 0 (xor_sum) is supported, got ", mode);
  TORCH_CHECK(!self.is_complex(), "hash_tensor: complex inputs are not supported");
  if (dim.empty())
    TORCH_CHECK(self.numel() > 0, "hash_tensor: Expected reduction dim to be specified for "
                "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  std::vector<bool> reduced(std::max<int64_t>(self.dim(), 1), dim.empty());
  for (int64_t d : dim) reduced[at::maybe_wrap_dim(d, std::max<int64_t>(self.dim(), 1))] = true;
  std::vector<int64_t> dims, keep_shape, out_shape;
  for (int64_t i = 0; i < self.dim(); ++i) {
    if (reduced[i]) {
      dims.push_back(i);
      keep_shape.push_back(1);
    } else {
      keep_shape.push_back(self.size(i));
      out_shape.push_back(self.size(i));
    }
  }
  Tensor r;
  if (self.numel() == 0) {
    r = at::zeros(out_shape, Tpu(at::kUInt64));
  } else {
    r = Run1(kHash, {dims, {}, {}}, {OperandOf(self)}, TypeOf(out_shape, at::kUInt64));
  }
  return keepdim ? r.reshape(keep_shape) : r;
}
Tensor& hash_tensor_out_tpu(const Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode,
                            Tensor& out) {
  return Into("hash_tensor", hash_tensor_tpu(self, dim, keepdim, mode), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("rsub.Tensor", TORCH_FN(rsub_tensor_tpu));
  m.impl("nansum", TORCH_FN(nansum_tpu));
  m.impl("nansum.out", TORCH_FN(nansum_out_tpu));
  m.impl("amax.out", TORCH_FN(amax_out_tpu));
  m.impl("amin.out", TORCH_FN(amin_out_tpu));
  m.impl("addbmm", TORCH_FN(addbmm_tpu));
  m.impl("addbmm.out", TORCH_FN(addbmm_out_tpu));
  m.impl("addbmm_", TORCH_FN(addbmm__tpu));
  m.impl("exponential_", TORCH_FN(exponential__tpu));
  m.impl("cauchy_", TORCH_FN(cauchy__tpu));
  m.impl("geometric_", TORCH_FN(geometric__tpu));
  m.impl("log_normal_", TORCH_FN(log_normal__tpu));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normal_tt_tpu));
  m.impl("normal.Tensor_float", TORCH_FN(normal_tf_tpu));
  m.impl("normal.float_Tensor", TORCH_FN(normal_ft_tpu));
  m.impl("normal.Tensor_Tensor_out", TORCH_FN(normal_tt_out_tpu));
  m.impl("normal.Tensor_float_out", TORCH_FN(normal_tf_out_tpu));
  m.impl("normal.float_Tensor_out", TORCH_FN(normal_ft_out_tpu));
  m.impl("unfold_backward", TORCH_FN(unfold_backward_tpu));
  m.impl("_efficientzerotensor", TORCH_FN(efficientzerotensor_tpu));
  m.impl("_unique", TORCH_FN(unique_tpu));
  m.impl("_batch_norm_with_update", TORCH_FN(batch_norm_with_update_tpu));
  m.impl("_batch_norm_no_update", TORCH_FN(batch_norm_no_update_tpu));
  m.impl("batch_norm_backward", TORCH_FN(batch_norm_backward_tpu));
  m.impl("index_reduce", TORCH_FN(index_reduce_tpu));
  m.impl("index_reduce.out", TORCH_FN(index_reduce_out_tpu));
  m.impl("index_reduce_", TORCH_FN(index_reduce__tpu));
  m.impl("angle", TORCH_FN(angle_tpu));
  m.impl("angle.out", TORCH_FN(angle_out_tpu));
  m.impl("gcd", TORCH_FN(gcd_tpu));
  m.impl("gcd.out", TORCH_FN(gcd_out_tpu));
  m.impl("gcd_", TORCH_FN(gcd__tpu));
  m.impl("lcm", TORCH_FN(lcm_tpu));
  m.impl("lcm.out", TORCH_FN(lcm_out_tpu));
  m.impl("lcm_", TORCH_FN(lcm__tpu));
  m.impl("frexp.Tensor", TORCH_FN(frexp_tpu));
  m.impl("frexp.Tensor_out", TORCH_FN(frexp_out_tpu));
  m.impl("conj_physical.out", TORCH_FN(conj_physical_out_tpu));
  m.impl("mode", TORCH_FN(mode_tpu));
  m.impl("unique_dim", TORCH_FN(unique_dim_tpu));
  m.impl("hash_tensor", TORCH_FN(hash_tensor_tpu));
  m.impl("hash_tensor.out", TORCH_FN(hash_tensor_out_tpu));
  m.impl("segment_reduce", TORCH_FN(segment_reduce_tpu));
  m.impl("_segment_reduce_backward", TORCH_FN(segment_reduce_backward_tpu));
  m.impl("histogram.bin_ct", TORCH_FN(histogram_bin_ct_tpu));
  m.impl("histogram.bins_tensor", TORCH_FN(histogram_bins_tensor_tpu));
  m.impl("histogram.bins_tensor_out", TORCH_FN(histogram_bins_tensor_out_tpu));
  m.impl("histogram.bin_ct_out", TORCH_FN(histogram_bin_ct_out_tpu));
}

}  // namespace tpu::ops
