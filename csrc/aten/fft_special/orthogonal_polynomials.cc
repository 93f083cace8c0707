// torch.special orthogonal polynomials: chebyshev_polynomial_{t,u,v,w},
// their shifted forms, hermite_polynomial_{h,he}, laguerre_polynomial_l,
// legendre_polynomial_p, as CPU evaluates them: n truncated to an integer,
// 0 for n < 0, then the three-term recurrence up to n.
//
// One stablehlo.while runs the recurrence for all elements at once, up to
// the largest n; each element keeps its value once k passes its own n.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

namespace {

enum Poly : int64_t { kT, kU, kV, kW, kH, kHe, kL, kP, kST, kSU, kSV, kSW };

// in = (x, n); ints = (kind, compute dtype).
VS LowerPoly(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto kind = static_cast<Poly>(a.ints[0]);
  const auto ct = static_cast<DType>(a.ints[1]);
  const ir::Dims& d = out[0].dims;
  Value x = ir::BroadcastTo(b, ir::Convert(b, in[0], ct), d);
  Value nf = ir::BroadcastTo(b, in[1], d);
  Value n = ir::Convert(b, nf, DType::S64);  // truncation, as static_cast<int64_t>
  Poly base = kind;
  if (kind >= kST) {  // shifted: the same polynomials of 2x - 1
    x = Sub(b, Add(b, x, x), C(b, 1, x));
    base = static_cast<Poly>(kind - kST);
  }
  Value one = C(b, 1, x), two_x = Add(b, x, x);
  Value q0;  // p_1
  switch (base) {
    case kT: q0 = x; break;
    case kU: q0 = two_x; break;
    case kV: q0 = Sub(b, two_x, one); break;
    case kW: q0 = Add(b, two_x, one); break;
    case kH: q0 = two_x; break;
    case kHe: q0 = x; break;
    case kL: q0 = Sub(b, one, x); break;
    case kP: q0 = x; break;
    default: q0 = x;
  }
  ir::Dims all;
  for (size_t i = 0; i < d.size(); ++i) all.push_back(static_cast<int64_t>(i));
  Value maxn = d.empty() ? n : ir::Reduce(b, n, ir::MinValue(b, DType::S64), all, "stablehlo.maximum");
  // j = 2..n: (p, q) = (p_{j-2}, p_{j-1}) -> (p_{j-1}, p_j)
  VS init{ir::ConstantI(b, 2, DType::S64), maxn, one, q0, x, n};
  VS r = loop::While(
      b, init,
      [&](Builder& bb, const VS& v) { return ir::Compare(bb, v[0], v[1], ir::Cmp::LE); },
      [&](Builder& bb, const VS& v) {
        Value j = v[0], p = v[2], q = v[3], xx = v[4];
        Value jf = ir::Full(bb, ir::Convert(bb, j, ct), d);
        Value onej = C(bb, 1, xx);
        Value k = Sub(bb, jf, onej);  // j - 1
        Value tx = Add(bb, xx, xx);
        Value nx;
        switch (base) {
          case kH: nx = Sub(bb, Mul(bb, tx, q), Mul(bb, Add(bb, k, k), p)); break;
          case kHe: nx = Sub(bb, Mul(bb, xx, q), Mul(bb, k, p)); break;
          case kL:
            nx = Div(bb, Sub(bb, Mul(bb, Add(bb, Add(bb, k, k), Sub(bb, onej, xx)), q), Mul(bb, k, p)),
                     jf);
            break;
          case kP:
            nx = Div(bb, Sub(bb, Mul(bb, Mul(bb, Add(bb, Add(bb, k, k), onej), xx), q), Mul(bb, k, p)),
                     jf);
            break;
          default: nx = Sub(bb, Mul(bb, tx, q), p);
        }
        Value live = ir::Compare(bb, ir::Full(bb, j, d), v[5], ir::Cmp::LE);
        Value np = ir::Select(bb, live, q, p), nq = ir::Select(bb, live, nx, q);
        return VS{Add(bb, j, ir::ConstantI(bb, 1, DType::S64)), v[1], np, nq, xx, v[5]};
      });
  Value res = r[3];
  auto I = [&](int64_t v) { return ir::Full(b, ir::ConstantI(b, v, DType::S64), d); };
  res = ir::Select(b, ir::Compare(b, n, I(0), ir::Cmp::EQ), one, res);
  res = ir::Select(b, ir::Compare(b, n, I(0), ir::Cmp::LT), C(b, 0, x), res);
  // NaN n: CPU's cast gives an unspecified integer; keep NaN.
  Value nn = ir::Convert(b, nf, ct);
  res = ir::Select(b, ir::Compare(b, nn, nn, ir::Cmp::NE), nn, res);
  return {ir::Convert(b, res, out[0].dtype)};
}
constexpr lazy::Lowering kPoly{"aten::special_polynomial", &LowerPoly};

Tensor Polynomial(Poly kind, const char* name, const Tensor& x, const Tensor& n) {
  CheckTpu(name, x, "x");
  CheckTpu(name, n, "n");
  auto rt = at::result_type(x, n);
  if (at::isIntegralType(rt, /*includeBool=*/true)) rt = c10::typeMetaToScalarType(at::get_default_dtype());
  TORCH_CHECK(at::isFloatingType(rt), name, ": expected floating point inputs, got ", rt);
  auto shape = at::infer_size(x.sizes(), n.sizes());
  if (c10::multiply_integers(shape) == 0) return EmptyTpu(shape, rt);
  return Run1(kPoly, {{kind, IrCode(OpMathType(rt))}, {}, {}}, {OperandOf(x), OperandOf(n)},
              TypeOf(shape, rt));
}

#define TPU_POLY(fn, kind)                                                              \
  Tensor fn##_tpu(const Tensor& x, const Tensor& n) { return Polynomial(kind, #fn, x, n); } \
  Tensor& fn##_out_tpu(const Tensor& x, const Tensor& n, Tensor& out) {                   \
    Tensor r = Polynomial(kind, #fn, x, n);                                               \
    PrepareOut(#fn, out, r.sizes(), r.scalar_type());                                     \
    return out.copy_(r);                                                                  \
  }
TPU_POLY(special_chebyshev_polynomial_t, kT)
TPU_POLY(special_chebyshev_polynomial_u, kU)
TPU_POLY(special_chebyshev_polynomial_v, kV)
TPU_POLY(special_chebyshev_polynomial_w, kW)
TPU_POLY(special_shifted_chebyshev_polynomial_t, kST)
TPU_POLY(special_shifted_chebyshev_polynomial_u, kSU)
TPU_POLY(special_shifted_chebyshev_polynomial_v, kSV)
TPU_POLY(special_shifted_chebyshev_polynomial_w, kSW)
TPU_POLY(special_hermite_polynomial_h, kH)
TPU_POLY(special_hermite_polynomial_he, kHe)
TPU_POLY(special_laguerre_polynomial_l, kL)
TPU_POLY(special_legendre_polynomial_p, kP)
#undef TPU_POLY


// ---- Bessel-type and error-function specials ----

enum Fn : int64_t { kI0, kI0e, kI1, kI1e, kSphJ0, kNdtri, kLogNdtr, kErfcx, kJ0, kJ1, kY0, kY1,
                    kK0, kK0e, kK1, kK1e, kAiryAi };

Value Exp(Builder& b, Value x) { return ir::Unary(b, "stablehlo.exponential", x); }
Value Abs(Builder& b, Value x) { return ir::Unary(b, "stablehlo.abs", x); }
Value Lt(Builder& b, Value x, double v) { return ir::Compare(b, x, C(b, v, x), ir::Cmp::LT); }

// Power series of I0 (nu = 0) or I1 (nu = 1) for moderate |x|:
// sum_k (x/2)^(2k+nu) / (k! (k+nu)!), summed until the terms are negligible.
Value BesselISeries(Builder& b, Value x, int nu) {
  const ir::Dims d = b.type(x).dims;
  const DType ct = b.type(x).dtype;
  Value h = Mul(b, x, C(b, 0.5, x));
  Value q = Mul(b, h, h);
  Value t0 = nu == 0 ? C(b, 1, x) : h;
  ir::Dims all;
  for (size_t i = 0; i < d.size(); ++i) all.push_back(static_cast<int64_t>(i));
  VS r = loop::While(
      b, {ir::ConstantI(b, 1, DType::S64), t0, t0, q},
      [&](Builder& bb, const VS& v) {
        Value big = ir::Compare(bb, Abs(bb, v[1]), Mul(bb, Abs(bb, v[2]), C(bb, 1e-9, v[2])),
                                ir::Cmp::GT);
        Value any = d.empty() ? big
                              : ir::Reduce(bb, big, ir::ConstantI(bb, 0, DType::PRED), all, "stablehlo.or");
        return ir::Binary(bb, "stablehlo.and", any,
                          ir::Compare(bb, v[0], ir::ConstantI(bb, 500, DType::S64), ir::Cmp::LT));
      },
      [&](Builder& bb, const VS& v) {
        Value kf = ir::Full(bb, ir::Convert(bb, v[0], ct), d);
        Value denom = Mul(bb, kf, Add(bb, kf, C(bb, nu, kf)));
        Value t = Div(bb, Mul(bb, v[1], v[3]), denom);
        return VS{Add(bb, v[0], ir::ConstantI(bb, 1, DType::S64)), t, Add(bb, v[2], t), v[3]};
      });
  return r[2];
}

// e^-|x| I_nu(x) for large |x|: 1/sqrt(2 pi |x|) sum_k (-1)^k a_k(nu) / |x|^k.
Value BesselIAsymptoticScaled(Builder& b, Value x, int nu) {
  Value ax = Abs(b, x);
  const double mu = 4.0 * nu * nu;
  Value sum = C(b, 1, x), term = C(b, 1, x);
  for (int k = 1; k <= 12; ++k) {
    const double f = -(mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0);
    term = Div(b, Mul(b, term, C(b, f, x)), ax);
    sum = Add(b, sum, term);
  }
  Value r = Div(b, sum, ir::Unary(b, "stablehlo.sqrt", Mul(b, ax, C(b, 2 * M_PI, x))));
  if (nu == 1) r = Mul(b, r, ir::Unary(b, "stablehlo.sign", x));
  return r;
}

Value BesselI(Builder& b, Value x, int nu, bool scaled) {
  const double cut = 30;
  Value ax = Abs(b, x);
  Value small = Lt(b, ax, cut);
  Value xs = ir::Select(b, small, x, C(b, 0, x));
  Value ser = BesselISeries(b, xs, nu);
  Value asym = BesselIAsymptoticScaled(b, ir::Select(b, small, C(b, cut, x), x), nu);
  if (scaled) return ir::Select(b, small, Mul(b, ser, Exp(b, ir::Unary(b, "stablehlo.negate", ax))), asym);
  return ir::Select(b, small, ser, Mul(b, asym, Exp(b, ax)));
}

// erfc(x) e^(x^2): directly below 5, from the continued fraction above.
Value Erfcx(Builder& b, Value x) {
  Value direct = Mul(b, Exp(b, Mul(b, x, x)), ir::Unary(b, "chlo.erfc", x));
  Value big = Lt(b, x, 5.0);
  Value xc = ir::Select(b, big, C(b, 5, x), x);
  Value t = xc;
  for (int k = 60; k >= 1; --k) t = Add(b, xc, Div(b, C(b, 0.5 * k, x), t));
  Value cf = Div(b, C(b, 1.0 / std::sqrt(M_PI), x), t);
  return ir::Select(b, big, direct, cf);
}

// J_nu (nu = 0, 1): the power series below |x| = 8, Hankel's asymptotic
// expansion above.
Value BesselJ(Builder& b, Value x, int nu) {
  const ir::Dims d = b.type(x).dims;
  const DType ct = b.type(x).dtype;
  Value ax = Abs(b, x);
  Value small = Lt(b, ax, 8.0);
  Value xs = ir::Select(b, small, x, C(b, 0, x));
  Value h = Mul(b, xs, C(b, 0.5, xs));
  Value q = Mul(b, h, h);
  Value t0 = nu == 0 ? C(b, 1, x) : h;
  ir::Dims all;
  for (size_t i = 0; i < d.size(); ++i) all.push_back(static_cast<int64_t>(i));
  VS r = loop::While(
      b, {ir::ConstantI(b, 1, DType::S64), t0, t0, q},
      [&](Builder& bb, const VS& v) {
        Value big = ir::Compare(bb, Abs(bb, v[1]), Mul(bb, Abs(bb, v[2]), C(bb, 1e-10, v[2])), ir::Cmp::GT);
        Value any = d.empty() ? big : ir::Reduce(bb, big, ir::ConstantI(bb, 0, DType::PRED), all, "stablehlo.or");
        return ir::Binary(bb, "stablehlo.and", any,
                          ir::Compare(bb, v[0], ir::ConstantI(bb, 200, DType::S64), ir::Cmp::LT));
      },
      [&](Builder& bb, const VS& v) {
        Value kf = ir::Full(bb, ir::Convert(bb, v[0], ct), d);
        Value denom = Mul(bb, kf, Add(bb, kf, C(bb, nu, kf)));
        Value t = ir::Unary(bb, "stablehlo.negate", Div(bb, Mul(bb, v[1], v[3]), denom));
        return VS{Add(bb, v[0], ir::ConstantI(bb, 1, DType::S64)), t, Add(bb, v[2], t), v[3]};
      });
  Value ser = r[2];
  // asymptotic, on |x| >= 8
  Value xa = ir::Select(b, small, C(b, 8, x), ax);
  const double mu = 4.0 * nu * nu;
  Value P = C(b, 1, x), Q = C(b, 0, x), term = C(b, 1, x);
  for (int k = 1; k <= 10; ++k) {
    const double f = (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0);
    term = Div(b, Mul(b, term, C(b, f, x)), xa);
    const double sgn = ((k / 2) % 2 == 0) ? 1.0 : -1.0;  // k = 1,2: +; 3,4: -; ...
    if (k % 2 == 0) P = Add(b, P, Mul(b, term, C(b, k % 4 == 2 ? -1.0 : 1.0, x)));
    else Q = Add(b, Q, Mul(b, term, C(b, sgn, x)));
  }
  Value chi = Sub(b, xa, C(b, (0.5 * nu + 0.25) * M_PI, x));
  Value amp = ir::Unary(b, "stablehlo.sqrt", Div(b, C(b, 2.0 / M_PI, x), xa));
  Value asym = Mul(b, amp, Sub(b, Mul(b, P, ir::Unary(b, "stablehlo.cosine", chi)),
                               Mul(b, Q, ir::Unary(b, "stablehlo.sine", chi))));
  if (nu == 1) asym = Mul(b, asym, ir::Unary(b, "stablehlo.sign", x));
  Value out = ir::Select(b, small, ser, asym);
  Value inf = ir::Compare(b, ax, C(b, INFINITY, x), ir::Cmp::EQ);
  return ir::Select(b, inf, C(b, 0, x), out);
}

// ---- Bessel functions of the second kind: Y_nu and K_nu, nu = 0, 1 ----

constexpr double kEulerGamma = 0.57721566490153286061;

// Power series in q = x^2/4 (A&S 9.1.11, 9.6.11), n terms, s = -1 for the
// J/Y family and +1 for the I/K family. Returns {F, G}:
//   nu = 0: F = sum s^k q^k / (k!)^2 (J0 or I0),
//           G = sum_{k>=1} s^(k+1) H_k q^k / (k!)^2
//   nu = 1: F = sum s^k q^k / (k! (k+1)!) (J1 or I1 over x/2),
//           G = sum s^k (H_k + H_(k+1)) q^k / (k! (k+1)!)
// (H_k the harmonic numbers).
std::pair<Value, Value> SecondKindSeries(Builder& b, Value q, int nu, double s, int n) {
  Value term = C(b, 1, q), f = C(b, 1, q);
  double h = 0;  // H_k
  Value g = C(b, nu == 1 ? 1.0 : 0.0, q);  // k = 0: H_0 + H_1 = 1 for nu = 1
  for (int k = 1; k < n; ++k) {
    term = Mul(b, term, Mul(b, q, C(b, s / (k * double(k + nu)), q)));
    h += 1.0 / k;
    f = Add(b, f, term);
    // term holds s^k: nu = 0 weighs it by s H_k, nu = 1 by H_k + H_(k+1)
    const double w = nu == 0 ? s * h : h + h + 1.0 / (k + 1);
    g = Add(b, g, Mul(b, term, C(b, w, q)));
  }
  return {f, g};
}

// Hankel's expansion for large x: sum_k a_k(nu) / x^k with
// a_k = prod_{j<=k} (4 nu^2 - (2j-1)^2) / (k! 8^k); `alternate` gives the
// P and Q of J/Y (even terms with (-1)^(k/2) in P, odd ones with
// (-1)^((k-1)/2) in Q), otherwise the plain sum of K's expansion.
std::pair<Value, Value> Hankel(Builder& b, Value x, double nu, int terms, bool alternate) {
  const double mu = 4.0 * nu * nu;
  Value p = C(b, 1, x), q = C(b, 0, x), term = C(b, 1, x);
  for (int k = 1; k <= terms; ++k) {
    term = Div(b, Mul(b, term, C(b, (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0), x)), x);
    if (!alternate) {
      p = Add(b, p, term);
    } else if (k % 2 == 0) {
      p = Add(b, p, Mul(b, term, C(b, (k / 2) % 2 ? -1.0 : 1.0, x)));
    } else {
      q = Add(b, q, Mul(b, term, C(b, ((k - 1) / 2) % 2 ? -1.0 : 1.0, x)));
    }
  }
  return {p, q};
}

// Y_nu(x), computed in float64 (the series below x = 20 cancels terms
// up to 10^7 times its result); NaN below 0 and at inf, -inf at 0.
Value BesselY(Builder& b, Value x_in, int nu) {
  const DType ct = b.type(x_in).dtype;
  Value x = ir::Convert(b, x_in, DType::F64);
  const double cut = 20;
  Value small = Lt(b, x, cut);
  Value xs = ir::Select(b, small, x, C(b, 1, x));  // (the other branch's arguments are safe)
  Value xl = ir::Select(b, small, C(b, cut, x), x);
  Value half = Mul(b, xs, C(b, 0.5, xs));
  auto [f, g] = SecondKindSeries(b, Mul(b, half, half), nu, -1.0, 48);
  Value lg = ir::Unary(b, "stablehlo.log", half);
  Value ser;
  if (nu == 0) {  // (2/pi)((ln(x/2) + gamma) J0 + G)
    ser = Mul(b, C(b, 2 / M_PI, x), Add(b, Mul(b, Add(b, lg, C(b, kEulerGamma, x)), f), g));
  } else {  // (2/pi) ln(x/2) J1 - 2/(pi x) - (x/2)/pi (G - 2 gamma F)
    Value j1 = Mul(b, half, f);
    Value rest = Sub(b, g, Mul(b, f, C(b, 2 * kEulerGamma, x)));
    ser = Sub(b, Mul(b, C(b, 2 / M_PI, x), Mul(b, lg, j1)),
              Add(b, Div(b, C(b, 2 / M_PI, x), xs), Mul(b, Mul(b, half, rest), C(b, 1 / M_PI, x))));
  }
  auto [p, q] = Hankel(b, xl, nu, 30, true);
  Value chi = Sub(b, xl, C(b, (0.5 * nu + 0.25) * M_PI, x));
  Value amp = ir::Unary(b, "stablehlo.sqrt", Div(b, C(b, 2 / M_PI, x), xl));
  Value asym = Mul(b, amp, Add(b, Mul(b, p, ir::Unary(b, "stablehlo.sine", chi)),
                               Mul(b, q, ir::Unary(b, "stablehlo.cosine", chi))));
  Value r = ir::Select(b, small, ser, asym);
  // (inf gives NaN, as on CPU)
  r = ir::Select(b, ir::Compare(b, x, C(b, INFINITY, x), ir::Cmp::EQ), C(b, NAN, x), r);
  r = ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::EQ), C(b, -INFINITY, x), r);
  r = ir::Select(b, Lt(b, x, 0), C(b, NAN, x), r);
  return ir::Convert(b, r, ct);  // NaN stays NaN through the selects
}

// e^x K_nu(x) for x >= 1/2: the trapezoidal integral at xm (x <= 25), Hankel's
// expansion at xl (x > 25), chosen by `large`.
Value KScaledLarge(Builder& b, Value xm, Value xl, Value large, double nu) {
  // e^x K = int exp(-x (cosh t - 1)) cosh(nu t) dt
  const double h = 0.1;
  Value trap = C(b, 0.5, xm);
  for (int k = 1; k <= 54; ++k) {
    const double t = k * h;
    Value e = Exp(b, Mul(b, xm, C(b, 1 - std::cosh(t), xm)));
    trap = Add(b, trap, nu == 0 ? e : Mul(b, e, C(b, std::cosh(nu * t), xm)));
  }
  trap = Mul(b, trap, C(b, h, xm));
  auto [p, unused] = Hankel(b, xl, nu, 30, false);
  Value asym = Mul(b, p, ir::Unary(b, "stablehlo.sqrt", Div(b, C(b, M_PI / 2, xl), xl)));
  return ir::Select(b, large, asym, trap);
}

// K_nu(x) (or e^x K_nu(x) when scaled): the power series below x = 1/2;
// above, the integral K_nu(x) = int_0^inf exp(-x cosh t) cosh(nu t) dt by
// the trapezoidal rule (for this entire, doubly exponentially decaying
// integrand its error is below e^(-2 pi a / h) for any strip |Im t| < a
// it stays bounded in: far below rounding here, with h = 0.1 up to
// t = 5.4); above x = 25, where the integrand's peak narrows, Hankel's
// expansion. All terms are positive there: no cancellation.
Value BesselK(Builder& b, Value x, int nu, bool scaled) {
  Value small = Lt(b, x, 0.5), large = ir::Compare(b, x, C(b, 25, x), ir::Cmp::GT);
  Value xs = ir::Select(b, small, x, C(b, 0.25, x));
  Value xm = ir::Select(b, small, C(b, 1, x), ir::Select(b, large, C(b, 1, x), x));
  Value xl = ir::Select(b, large, x, C(b, 30, x));
  // series (nu = 0: -(ln(x/2) + gamma) I0 + G; nu = 1: 1/x + ln(x/2) I1 - (x/4)(G - 2 gamma F))
  Value half = Mul(b, xs, C(b, 0.5, xs));
  auto [f, g] = SecondKindSeries(b, Mul(b, half, half), nu, 1.0, 14);
  Value lg = ir::Unary(b, "stablehlo.log", half);
  Value ser = nu == 0
      ? Sub(b, g, Mul(b, Add(b, lg, C(b, kEulerGamma, x)), f))
      : Sub(b, Add(b, Div(b, C(b, 1, x), xs), Mul(b, lg, Mul(b, half, f))),
            Mul(b, Mul(b, half, C(b, 0.5, x)), Sub(b, g, Mul(b, f, C(b, 2 * kEulerGamma, x)))));
  if (scaled) ser = Mul(b, ser, Exp(b, xs));
  Value big = KScaledLarge(b, xm, xl, large, nu);
  if (!scaled) big = Mul(b, big, Exp(b, ir::Unary(b, "stablehlo.negate", ir::Select(b, large, xl, xm))));
  Value r = ir::Select(b, small, ser, big);
  r = ir::Select(b, ir::Compare(b, x, C(b, INFINITY, x), ir::Cmp::EQ), C(b, 0, x), r);
  r = ir::Select(b, ir::Compare(b, x, C(b, 0, x), ir::Cmp::EQ), C(b, INFINITY, x), r);
  return ir::Select(b, Lt(b, x, 0), C(b, NAN, x), r);
}

// Airy Ai, computed in float64: the Maclaurin series on [-8, 2] (A&S
// 10.4.2; its terms grow as e^zeta, zeta = 2/3 |x|^(3/2), so it stops
// there), 1/pi sqrt(x/3) K_(1/3)(zeta) above, and the asymptotic expansion
// below -8 (A&S 10.4.60). As CPU: NaN at +-inf, 0
// above 103.892 (where Ai underflows).
Value AiryAi(Builder& b, Value x_in) {
  const DType ct = b.type(x_in).dtype;
  Value x = ir::Convert(b, x_in, DType::F64);
  Value mid = ir::Binary(b, "stablehlo.and", ir::Compare(b, x, C(b, -8, x), ir::Cmp::GE),
                         ir::Compare(b, x, C(b, 2, x), ir::Cmp::LE));
  Value pos = ir::Compare(b, x, C(b, 2, x), ir::Cmp::GT);
  // series
  Value xs = ir::Select(b, mid, x, C(b, 0, x));
  Value x3 = Mul(b, Mul(b, xs, xs), xs);
  Value f = C(b, 1, x), g = xs, tf = C(b, 1, x), tg = xs;
  for (int k = 1; k <= 30; ++k) {
    tf = Mul(b, tf, Mul(b, x3, C(b, 1.0 / ((3.0 * k - 1) * (3.0 * k)), x)));
    tg = Mul(b, tg, Mul(b, x3, C(b, 1.0 / ((3.0 * k) * (3.0 * k + 1)), x)));
    f = Add(b, f, tf);
    g = Add(b, g, tg);
  }
  Value ser = Sub(b, Mul(b, C(b, 0.355028053887817239, x), f),
                  Mul(b, C(b, 0.258819403792806798, x), g));
  // x > 2: Ai = 1/pi sqrt(x/3) e^-zeta (e^zeta K_(1/3)(zeta))
  Value xp = ir::Select(b, pos, x, C(b, 4, x));
  Value zeta = Mul(b, C(b, 2.0 / 3, x), Mul(b, xp, ir::Unary(b, "stablehlo.sqrt", xp)));
  Value large = ir::Compare(b, zeta, C(b, 25, x), ir::Cmp::GT);
  Value k = KScaledLarge(b, ir::Select(b, large, C(b, 1, x), zeta),
                         ir::Select(b, large, zeta, C(b, 30, x)), large, 1.0 / 3);
  Value right = Mul(b, Mul(b, C(b, 1 / M_PI, x), ir::Unary(b, "stablehlo.sqrt", Div(b, xp, C(b, 3, x)))),
                    Mul(b, Exp(b, ir::Unary(b, "stablehlo.negate", zeta)), k));
  // x < -8: Ai(-y) = y^(-1/4)/sqrt(pi) (sin(z + pi/4) P - cos(z + pi/4) Q), z = 2/3 y^(3/2)
  Value y = ir::Select(b, ir::Binary(b, "stablehlo.or", mid, pos), C(b, 16, x),
                       ir::Unary(b, "stablehlo.negate", x));
  Value z = Mul(b, C(b, 2.0 / 3, x), Mul(b, y, ir::Unary(b, "stablehlo.sqrt", y)));
  Value P = C(b, 1, x), Q = C(b, 0, x), zk = C(b, 1, x);
  double u = 1;
  for (int kk = 1; kk <= 24; ++kk) {
    u *= (6.0 * kk - 5) * (6.0 * kk - 3) * (6.0 * kk - 1) / (216.0 * (2.0 * kk - 1) * kk);
    zk = Div(b, zk, z);
    const double sign = ((kk / 2) % 2 == 0) ? 1.0 : -1.0;  // (-1)^floor(k/2)
    if (kk % 2 == 0) P = Add(b, P, Mul(b, zk, C(b, sign * u, x)));
    else Q = Add(b, Q, Mul(b, zk, C(b, sign * u, x)));
  }
  Value ph = Add(b, z, C(b, M_PI / 4, x));
  Value amp = Div(b, C(b, 1 / std::sqrt(M_PI), x),
                  ir::Unary(b, "stablehlo.sqrt", ir::Unary(b, "stablehlo.sqrt", y)));
  Value left = Mul(b, amp, Sub(b, Mul(b, ir::Unary(b, "stablehlo.sine", ph), P),
                               Mul(b, ir::Unary(b, "stablehlo.cosine", ph), Q)));
  Value r = ir::Select(b, mid, ser, ir::Select(b, pos, right, left));
  r = ir::Select(b, ir::Compare(b, x, C(b, 103.892, x), ir::Cmp::GT), C(b, 0, x), r);
  Value inf = ir::Compare(b, ir::Unary(b, "stablehlo.abs", x), C(b, INFINITY, x), ir::Cmp::EQ);
  r = ir::Select(b, inf, C(b, NAN, x), r);
  return ir::Convert(b, r, ct);
}

// in = (x); ints = (fn, compute dtype).
VS LowerSpecial(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const auto fn = static_cast<Fn>(a.ints[0]);
  const auto ct = static_cast<DType>(a.ints[1]);
  Value x = ir::Convert(b, in[0], ct);
  Value r;
  switch (fn) {
    case kI0: r = BesselI(b, x, 0, false); break;
    case kI0e: r = BesselI(b, x, 0, true); break;
    case kI1: r = BesselI(b, x, 1, false); break;
    case kI1e: r = BesselI(b, x, 1, true); break;
    case kSphJ0: {
      Value x2 = Mul(b, x, x);
      Value ser = C(b, 1.0 / 6227020800.0, x);
      const double c[] = {-1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0, 1.0};
      for (double cc : c) ser = Add(b, Mul(b, ser, x2), C(b, cc, x));
      Value direct = Div(b, ir::Unary(b, "stablehlo.sine", x), x);
      r = ir::Select(b, Lt(b, Abs(b, x), 0.5), ser, direct);
      Value inf = ir::Compare(b, Abs(b, x), C(b, INFINITY, x), ir::Cmp::EQ);
      r = ir::Select(b, inf, C(b, 0, x), r);
      break;
    }
    case kNdtri: {
      Value y = Sub(b, Add(b, x, x), C(b, 1, x));
      r = Mul(b, ir::Unary(b, "chlo.erf_inv", y), C(b, M_SQRT2, x));
      break;
    }
    case kLogNdtr: {
      // x < -1: log(erfcx(-x / sqrt 2) / 2) - x^2 / 2; else log1p(-erfc(x / sqrt 2) / 2)
      Value t = Mul(b, x, C(b, M_SQRT1_2, x));
      Value neg = Lt(b, x, -1.0);
      Value xn = ir::Select(b, neg, x, C(b, -2, x));
      Value tn = Mul(b, xn, C(b, M_SQRT1_2, x));
      Value lo = Sub(b, ir::Unary(b, "stablehlo.log", Mul(b, Erfcx(b, ir::Unary(b, "stablehlo.negate", tn)), C(b, 0.5, x))),
                     Mul(b, Mul(b, xn, xn), C(b, 0.5, x)));
      Value hi = ir::Unary(b, "stablehlo.log_plus_one",
                           Mul(b, ir::Unary(b, "chlo.erfc", t), C(b, -0.5, x)));
      r = ir::Select(b, neg, lo, hi);
      break;
    }
    case kAiryAi: r = AiryAi(b, x); break;
    case kY0: r = BesselY(b, x, 0); break;
    case kY1: r = BesselY(b, x, 1); break;
    case kK0: r = BesselK(b, x, 0, false); break;
    case kK0e: r = BesselK(b, x, 0, true); break;
    case kK1: r = BesselK(b, x, 1, false); break;
    case kK1e: r = BesselK(b, x, 1, true); break;
    case kJ0: r = BesselJ(b, x, 0); break;
    case kJ1: r = BesselJ(b, x, 1); break;
    case kErfcx: {
      r = Erfcx(b, x);
      // erfcx(-inf) = inf, erfcx(inf) = 0
      break;
    }
  }
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kSpecial{"aten::special_fn", &LowerSpecial};

Tensor SpecialFn(Fn fn, const char* name, const Tensor& x) {
  CheckTpu(name, x, "self");
  auto rt = x.scalar_type();
  if (at::isIntegralType(rt, /*includeBool=*/true)) rt = c10::typeMetaToScalarType(at::get_default_dtype());
  TORCH_CHECK(at::isFloatingType(rt), name, " is not implemented for ", x.scalar_type());
  if (x.numel() == 0) return EmptyTpu(x.sizes(), rt);
  return Run1(kSpecial, {{fn, IrCode(OpMathType(rt))}, {}, {}}, {OperandOf(x)}, TypeOf(x.sizes(), rt));
}

#define TPU_SPECIAL(fn, kind)                                                   \
  Tensor fn##_tpu(const Tensor& x) { return SpecialFn(kind, #fn, x); }          \
  Tensor& fn##_out_tpu(const Tensor& x, Tensor& out) {                          \
    Tensor r = SpecialFn(kind, #fn, x);                                         \
    PrepareOut(#fn, out, r.sizes(), r.scalar_type());                           \
    return out.copy_(r);                                                        \
  }
TPU_SPECIAL(i0, kI0)
TPU_SPECIAL(special_i0e, kI0e)
TPU_SPECIAL(special_i1, kI1)
TPU_SPECIAL(special_i1e, kI1e)
TPU_SPECIAL(special_modified_bessel_i0, kI0)
TPU_SPECIAL(special_modified_bessel_i1, kI1)
TPU_SPECIAL(special_spherical_bessel_j0, kSphJ0)
TPU_SPECIAL(special_ndtri, kNdtri)
TPU_SPECIAL(special_log_ndtr, kLogNdtr)
TPU_SPECIAL(special_erfcx, kErfcx)
TPU_SPECIAL(special_bessel_j0, kJ0)
TPU_SPECIAL(special_bessel_j1, kJ1)
TPU_SPECIAL(special_airy_ai, kAiryAi)
TPU_SPECIAL(special_bessel_y0, kY0)
TPU_SPECIAL(special_bessel_y1, kY1)
TPU_SPECIAL(special_modified_bessel_k0, kK0)
TPU_SPECIAL(special_modified_bessel_k1, kK1)
TPU_SPECIAL(special_scaled_modified_bessel_k0, kK0e)
TPU_SPECIAL(special_scaled_modified_bessel_k1, kK1e)
#undef TPU_SPECIAL

// ---- igamma / igammac: regularized incomplete gamma functions, by the
// power series of P(a, x) or the continued fraction of Q(a, x) (Cephes'
// igam/igamc), all elements iterated together until converged ----

// in = (a, x); ints = (upper?, compute dtype).
VS LowerIgamma(Builder& b, const VS& in, const lazy::Attrs& at, const TT& out) {
  const bool upper = at.ints[0] != 0;
  const auto ct = static_cast<DType>(at.ints[1]);
  const ir::Dims& d = out[0].dims;
  Value a = ir::BroadcastTo(b, ir::Convert(b, in[0], ct), d);
  Value x = ir::BroadcastTo(b, ir::Convert(b, in[1], ct), d);
  const double eps = ct == DType::F64 ? 1.1102230246251565e-16 : 5.9604644775390625e-08;
  ir::Dims all;
  for (size_t i = 0; i < d.size(); ++i) all.push_back(static_cast<int64_t>(i));
  auto any = [&](Builder& bb, Value p) {
    return d.empty() ? p : ir::Reduce(bb, p, ir::ConstantI(bb, 0, DType::PRED), all, "stablehlo.or");
  };
  auto Gt = [&](Builder& bb, Value u, Value v) { return ir::Compare(bb, u, v, ir::Cmp::GT); };
  // safe arguments (special cases are selected at the end)
  Value ok = ir::Binary(b, "stablehlo.and", Gt(b, a, C(b, 0, a)), Gt(b, x, C(b, 0, x)));
  ok = ir::Binary(b, "stablehlo.and", ok, b.Op1("stablehlo.is_finite", {x}, ir::TensorType{DType::PRED, d}));
  ok = ir::Binary(b, "stablehlo.and", ok, b.Op1("stablehlo.is_finite", {a}, ir::TensorType{DType::PRED, d}));
  Value as = ir::Select(b, ok, a, C(b, 1, a)), xs = ir::Select(b, ok, x, C(b, 1, x));
  Value ax = Sub(b, Sub(b, Mul(b, as, ir::Unary(b, "stablehlo.log", xs)), xs), ir::Unary(b, "chlo.lgamma", as));
  Value fac = Exp(b, ax);
  // series: P = fac / a * sum_k x^k / ((a+1)...(a+k))
  VS sr = loop::While(
      b, {ir::ConstantI(b, 0, DType::S64), as, C(b, 1, as), C(b, 1, as), xs},
      [&](Builder& bb, const VS& v) {
        Value big = Gt(bb, v[2], Mul(bb, v[3], C(bb, eps, v[3])));
        return ir::Binary(bb, "stablehlo.and", any(bb, big),
                          ir::Compare(bb, v[0], ir::ConstantI(bb, 2000, DType::S64), ir::Cmp::LT));
      },
      [&](Builder& bb, const VS& v) {
        Value r = Add(bb, v[1], C(bb, 1, v[1]));
        Value c = Mul(bb, v[2], Div(bb, v[4], r));
        return VS{Add(bb, v[0], ir::ConstantI(bb, 1, DType::S64)), r, c, Add(bb, v[3], c), v[4]};
      });
  Value P_series = Div(b, sr[3], as);
  P_series = Mul(b, P_series, fac);
  // continued fraction for Q (x > 1 and x > a in Cephes)
  const double big = ct == DType::F64 ? 4.503599627370496e15 : 16777216.0;
  Value y0 = Sub(b, C(b, 1, as), as);
  Value z0 = Add(b, Add(b, xs, y0), C(b, 1, xs));
  Value pkm1 = Add(b, xs, C(b, 1, xs)), qkm1 = Mul(b, z0, xs);
  Value ans0 = Div(b, pkm1, qkm1);
  VS cf = loop::While(
      b, {ir::ConstantI(b, 0, DType::S64), C(b, 0, xs), y0, z0, C(b, 1, xs), xs, pkm1, qkm1, ans0, C(b, 1, xs)},
      [&](Builder& bb, const VS& v) {
        Value big_t = Gt(bb, v[9], C(bb, eps, v[9]));
        return ir::Binary(bb, "stablehlo.and", any(bb, big_t),
                          ir::Compare(bb, v[0], ir::ConstantI(bb, 2000, DType::S64), ir::Cmp::LT));
      },
      [&](Builder& bb, const VS& v) {
        Value one = C(bb, 1, v[1]);
        Value c = Add(bb, v[1], one), y = Add(bb, v[2], one), z = Add(bb, v[3], C(bb, 2, v[3]));
        Value yc = Mul(bb, y, c);
        Value pk = Sub(bb, Mul(bb, v[6], z), Mul(bb, v[4], yc));
        Value qk = Sub(bb, Mul(bb, v[7], z), Mul(bb, v[5], yc));
        Value qnz = ir::Compare(bb, qk, C(bb, 0, qk), ir::Cmp::NE);
        Value r = Div(bb, pk, ir::Select(bb, qnz, qk, one));
        Value t = ir::Select(bb, qnz, ir::Unary(bb, "stablehlo.abs", Div(bb, Sub(bb, v[8], r), r)), one);
        Value ans = ir::Select(bb, qnz, r, v[8]);
        Value pkm2 = v[6], qkm2 = v[7], pkm1n = pk, qkm1n = qk;
        Value scale = Gt(bb, ir::Unary(bb, "stablehlo.abs", pk), C(bb, big, pk));
        auto sc = [&](Value u) { return ir::Select(bb, scale, Mul(bb, u, C(bb, 1.0 / big, u)), u); };
        return VS{Add(bb, v[0], ir::ConstantI(bb, 1, DType::S64)), c, y, z, sc(pkm2), sc(qkm2), sc(pkm1n),
                  sc(qkm1n), ans, t};
      });
  Value Q_cf = Mul(b, cf[8], fac);
  Value use_cf = ir::Binary(b, "stablehlo.and", Gt(b, xs, C(b, 1, xs)), Gt(b, xs, as));
  Value P = ir::Select(b, use_cf, Sub(b, C(b, 1, Q_cf), Q_cf), P_series);
  Value Q = ir::Select(b, use_cf, Q_cf, Sub(b, C(b, 1, P_series), P_series));
  Value r = upper ? Q : P;
  // special cases, as CPU
  Value nan = C(b, NAN, r);
  Value zero_a = ir::Compare(b, a, C(b, 0, a), ir::Cmp::EQ), zero_x = ir::Compare(b, x, C(b, 0, x), ir::Cmp::EQ);
  Value inf_a = ir::Compare(b, a, C(b, INFINITY, a), ir::Cmp::EQ), inf_x = ir::Compare(b, x, C(b, INFINITY, x), ir::Cmp::EQ);
  Value lo = C(b, upper ? 1 : 0, r), hi = C(b, upper ? 0 : 1, r);
  r = ir::Select(b, inf_x, hi, r);
  r = ir::Select(b, inf_a, ir::Select(b, inf_x, nan, lo), r);
  r = ir::Select(b, zero_x, lo, r);
  r = ir::Select(b, zero_a, ir::Select(b, Gt(b, x, C(b, 0, x)), hi, nan), r);
  Value neg = ir::Binary(b, "stablehlo.or", ir::Compare(b, x, C(b, 0, x), ir::Cmp::LT),
                         ir::Compare(b, a, C(b, 0, a), ir::Cmp::LT));
  Value isnan = ir::Binary(b, "stablehlo.or", ir::Compare(b, x, x, ir::Cmp::NE), ir::Compare(b, a, a, ir::Cmp::NE));
  r = ir::Select(b, ir::Binary(b, "stablehlo.or", neg, isnan), nan, r);
  return {ir::Convert(b, r, out[0].dtype)};
}
constexpr lazy::Lowering kIgamma{"aten::igamma", &LowerIgamma};

Tensor Igamma(bool upper, const char* name, const Tensor& a, const Tensor& x) {
  CheckTpu(name, a, "self");
  CheckTpu(name, x, "other");
  auto rt = at::result_type(a, x);
  if (at::isIntegralType(rt, /*includeBool=*/true)) rt = c10::typeMetaToScalarType(at::get_default_dtype());
  TORCH_CHECK(at::isFloatingType(rt), name, " is not implemented for ", rt);
  auto shape = at::infer_size(a.sizes(), x.sizes());
  if (c10::multiply_integers(shape) == 0) return EmptyTpu(shape, rt);
  return Run1(kIgamma, {{upper ? 1 : 0, IrCode(OpMathType(rt))}, {}, {}}, {OperandOf(a), OperandOf(x)},
              TypeOf(shape, rt));
}
Tensor igamma_tpu(const Tensor& a, const Tensor& x) { return Igamma(false, "igamma", a, x); }
Tensor igammac_tpu(const Tensor& a, const Tensor& x) { return Igamma(true, "igammac", a, x); }
Tensor& igamma_out_tpu(const Tensor& a, const Tensor& x, Tensor& out) {
  Tensor r = igamma_tpu(a, x);
  PrepareOut("igamma", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}
Tensor& igammac_out_tpu(const Tensor& a, const Tensor& x, Tensor& out) {
  Tensor r = igammac_tpu(a, x);
  PrepareOut("igammac", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define REG(fn)                          \
  m.impl(#fn, TORCH_FN(fn##_tpu));       \
  m.impl(#fn ".out", TORCH_FN(fn##_out_tpu));
  REG(special_chebyshev_polynomial_t)
  REG(special_chebyshev_polynomial_u)
  REG(special_chebyshev_polynomial_v)
  REG(special_chebyshev_polynomial_w)
  REG(special_shifted_chebyshev_polynomial_t)
  REG(special_shifted_chebyshev_polynomial_u)
  REG(special_shifted_chebyshev_polynomial_v)
  REG(special_shifted_chebyshev_polynomial_w)
  REG(special_hermite_polynomial_h)
  REG(special_hermite_polynomial_he)
  REG(special_laguerre_polynomial_l)
  REG(special_legendre_polynomial_p)
  REG(i0)
  REG(special_i0e)
  REG(special_i1)
  REG(special_i1e)
  REG(special_modified_bessel_i0)
  REG(special_modified_bessel_i1)
  REG(special_spherical_bessel_j0)
  REG(special_ndtri)
  REG(special_log_ndtr)
  REG(special_erfcx)
  REG(special_bessel_j0)
  REG(special_bessel_j1)
  REG(special_airy_ai)
  REG(special_bessel_y0)
  REG(special_bessel_y1)
  REG(special_modified_bessel_k0)
  REG(special_modified_bessel_k1)
  REG(special_scaled_modified_bessel_k0)
  REG(special_scaled_modified_bessel_k1)
  REG(igamma)
  REG(igammac)
#undef REG
}

}  // namespace tpu::ops
