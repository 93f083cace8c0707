// Matrix factorizations and solves: LU with partial pivoting (as LAPACK's
// getrf: the first largest |pivot|, rows swapped, multipliers stored below
// the diagonal), Cholesky (stablehlo.cholesky) and triangular solves
// (stablehlo.triangular_solve), and what PyTorch builds on them: lu_factor,
// lu, lu_unpack, lu_solve, det, slogdet, inv, solve, cholesky, cholesky_ex,
// cholesky_solve, cholesky_inverse, solve_triangular, triangular_solve.
//
// Batch dimensions are flattened into one; the LU factorization is a
// stablehlo.while over the pivot columns that updates the whole (masked)
// matrix at each step.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/linalg_lstsq.h>
#include <ATen/ops/linalg_eig.h>
#include <ATen/ops/_linalg_eigvals.h>
#include <ATen/ops/linalg_eigvals.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/ceil.h>
#include <ATen/ops/log2.h>
#include <ATen/ops/div.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/conj_physical.h>
#include <ATen/ops/real.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/argsort.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/add.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/diag_embed.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/max.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/diagonal.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/log.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/prod.h>
#include <ATen/ops/sgn.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/take_along_dim.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/triu.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "ir/ops.h"
#include "aten/kernel_helpers.h"
#include "aten/tensor_bridge.h"
#include "aten/formula.h"
#include "aten/loops.h"

namespace tpu::ops {

namespace {

// The out= check of PyTorch's structured linalg kernels: the exact dtype.
void PrepareOutExact(const char* op, const Tensor& out, at::IntArrayRef sizes,
                     at::ScalarType dtype) {
  TORCH_CHECK(out.scalar_type() == dtype, "Expected out tensor to have dtype ",
              c10::scalarTypeToTypeMeta(dtype), ", but got ", out.dtype(), " instead");
  PrepareOut(op, out, sizes, dtype);
}


Value I64(Builder& b, int64_t v, const ir::Dims& d) { return ir::Full(b, ir::ConstantI(b, v, DType::S64), d); }
Value And(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.and", x, y); }

// Complex helpers; each is the identity (or the plain op) on real values, so
// one lowering serves both.
DType PartOf(DType t) { return t == DType::C128 ? DType::F64 : t == DType::C64 ? DType::F32 : t; }
Value Part(Builder& b, const char* op, Value x) {
  const ir::TensorType& t = b.type(x);
  return b.Op1(op, {x}, ir::TensorType{PartOf(t.dtype), t.dims});
}
Value Re(Builder& b, Value x) { return ir::IsComplex(b.type(x).dtype) ? Part(b, "stablehlo.real", x) : x; }
Value Conj(Builder& b, Value x) {
  const ir::TensorType& t = b.type(x);
  if (!ir::IsComplex(t.dtype)) return x;
  return b.Op1("stablehlo.complex",
               {Part(b, "stablehlo.real", x), ir::Unary(b, "stablehlo.negate", Part(b, "stablehlo.imag", x))}, t);
}
// |x| as a real value.
Value AbsR(Builder& b, Value x) {
  return ir::IsComplex(b.type(x).dtype) ? Part(b, "stablehlo.abs", x) : ir::Unary(b, "stablehlo.abs", x);
}
// |x|^2 as a real value.
Value Abs2(Builder& b, Value x) {
  if (!ir::IsComplex(b.type(x).dtype)) return Mul(b, x, x);
  Value re = Part(b, "stablehlo.real", x), im = Part(b, "stablehlo.imag", x);
  return Add(b, Mul(b, re, re), Mul(b, im, im));
}
// The identity matrices (B, n, n) of dims d, in dtype ft.
Value Eye(Builder& b, const ir::Dims& d, DType ft) {
  Value eq = ir::Compare(b, ir::Iota(b, d, 1, DType::S64), ir::Iota(b, d, 2, DType::S64), ir::Cmp::EQ);
  return ir::Convert(b, ir::Convert(b, eq, PartOf(ft)), ft);
}
// The conjugate transpose of (B, r, c).
Value Adjoint(Builder& b, Value x) { return Conj(b, ir::Transpose(b, x, {0, 2, 1})); }
// conj(g) / |g|, the unit phase that makes g real (1 where `skip`), for
// g of a complex pair rotation (complex values only).
Value Phase(Builder& b, Value g, Value absg, Value skip) {
  const DType ft = b.type(g).dtype;
  Value safe = ir::Select(b, skip, C(b, 1, absg), absg);
  return ir::Select(b, skip, C(b, 1, g), Div(b, Conj(b, g), ir::Convert(b, safe, ft)));
}

// The Jacobi rotation (c, s) that zeroes the off-diagonal entry of the
// symmetric 2x2 [[app, apq], [apq, aqq]] (the smaller-angle solution); the
// identity where `skip`. Shared by the one-sided SVD and eigh.
std::pair<Value, Value> JacobiRotation(Builder& b, Value app, Value aqq, Value apq, Value skip) {
  Value g2 = ir::Select(b, skip, C(b, 1, apq), apq);
  Value zeta = Div(b, Sub(b, aqq, app), Add(b, g2, g2));
  Value sgn = ir::Select(b, ir::Compare(b, zeta, C(b, 0, zeta), ir::Cmp::LT), C(b, -1, zeta), C(b, 1, zeta));
  Value t = Div(b, sgn, Add(b, ir::Unary(b, "stablehlo.abs", zeta),
                            ir::Unary(b, "stablehlo.sqrt", Add(b, C(b, 1, zeta), Mul(b, zeta, zeta)))));
  Value c = ir::Unary(b, "stablehlo.rsqrt", Add(b, C(b, 1, t), Mul(b, t, t)));
  Value s = Mul(b, c, t);
  return {ir::Select(b, skip, C(b, 1, c), c), ir::Select(b, skip, C(b, 0, s), s)};
}

// in = (A (B, m, n)); out = (LU, pivots (B, k) s32 1-based, info (B) s32).
VS LowerLu(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::Dims d = out[0].dims;
  const int64_t B = d[0], m = d[1], n = d[2], k = std::min(m, n);
  const DType ft = out[0].dtype;
  Value a = ir::Convert(b, in[0], ft);
  Value piv = ir::Full(b, ir::ConstantI(b, 0, DType::S32), {B, k});
  Value info = ir::Full(b, ir::ConstantI(b, 0, DType::S32), {B});
  VS r = loop::For(b, 0, k, {a, piv, info}, [&](Builder& bb, Value j, const VS& v) {
    Value A = v[0];
    Value row = ir::Iota(bb, d, 1, DType::S64), col = ir::Iota(bb, d, 2, DType::S64);
    Value jd = ir::Full(bb, j, d);
    Value zero = C(bb, 0, A);
    // column j (B, m), rows below j only
    Value colj = ir::Reduce(bb, ir::Select(bb, ir::Compare(bb, col, jd, ir::Cmp::EQ), A, zero),
                            ir::ConstantF(bb, 0, ft), {2}, "stablehlo.add");
    Value r1 = ir::Iota(bb, {B, m}, 1, DType::S64);
    Value below = ir::Compare(bb, r1, ir::Full(bb, j, {B, m}), ir::Cmp::GE);
    // the pivot's size: |a|, or |re| + |im| for complex (LAPACK's izamax)
    Value mag;
    if (ir::IsComplex(ft)) {
      const ir::TensorType part{ft == DType::C128 ? DType::F64 : DType::F32, {B, m}};
      mag = Add(bb, ir::Unary(bb, "stablehlo.abs", bb.Op1("stablehlo.real", {colj}, part)),
                ir::Unary(bb, "stablehlo.abs", bb.Op1("stablehlo.imag", {colj}, part)));
    } else {
      mag = ir::Unary(bb, "stablehlo.abs", colj);
    }
    Value cand = ir::Select(bb, below, mag, ir::Full(bb, ir::ConstantF(bb, -1, bb.type(mag).dtype), {B, m}));
    Value p = ir::ArgReduce(bb, cand, 1, true).second;  // (B) s64
    // swap rows j and p
    Value pd = ir::BroadcastInDim(bb, p, d, {0});
    Value is_j = ir::Compare(bb, row, jd, ir::Cmp::EQ), is_p = ir::Compare(bb, row, pd, ir::Cmp::EQ);
    Value rowj = ir::Reduce(bb, ir::Select(bb, is_j, A, zero), ir::ConstantF(bb, 0, ft), {1}, "stablehlo.add");
    Value rowp = ir::Reduce(bb, ir::Select(bb, is_p, A, zero), ir::ConstantF(bb, 0, ft), {1}, "stablehlo.add");
    Value rj = ir::BroadcastInDim(bb, rowj, d, {0, 2}), rp = ir::BroadcastInDim(bb, rowp, d, {0, 2});
    A = ir::Select(bb, is_j, rp, ir::Select(bb, is_p, rj, A));
    // eliminate below the pivot
    Value pivval = ir::Reduce(bb, ir::Select(bb, ir::Compare(bb, ir::Iota(bb, {B, n}, 1, DType::S64),
                                                             ir::Full(bb, j, {B, n}), ir::Cmp::EQ),
                                             rowp, ir::Full(bb, ir::ConstantF(bb, 0, ft), {B, n})),
                              ir::ConstantF(bb, 0, ft), {1}, "stablehlo.add");  // (B)
    Value nz = ir::Compare(bb, pivval, ir::Full(bb, ir::ConstantF(bb, 0, ft), {B}), ir::Cmp::NE);
    Value safe = ir::Select(bb, nz, pivval, ir::Full(bb, ir::ConstantF(bb, 1, ft), {B}));
    Value recip = Div(bb, ir::Full(bb, ir::ConstantF(bb, 1, ft), {B}), safe);
    Value nzd = ir::BroadcastInDim(bb, nz, d, {0});
    Value rowbelow = ir::Compare(bb, row, jd, ir::Cmp::GT);
    // multipliers l_i = A[i, j] / pivot (the swapped column j)
    Value colj2 = ir::Reduce(bb, ir::Select(bb, ir::Compare(bb, col, jd, ir::Cmp::EQ), A, zero),
                             ir::ConstantF(bb, 0, ft), {2}, "stablehlo.add");
    Value l = Mul(bb, colj2, ir::BroadcastInDim(bb, recip, {B, m}, {0}));
    Value ld = ir::BroadcastInDim(bb, l, d, {0, 1});
    Value upd = Sub(bb, A, Mul(bb, ld, rp));  // A[i, c] - l_i * U[j, c]
    Value colgt = ir::Compare(bb, col, jd, ir::Cmp::GT), coleq = ir::Compare(bb, col, jd, ir::Cmp::EQ);
    Value do_upd = And(bb, nzd, rowbelow);
    A = ir::Select(bb, And(bb, do_upd, colgt), upd, ir::Select(bb, And(bb, do_upd, coleq), ld, A));
    // pivots[:, j] = p + 1; info = j + 1 at the first zero pivot
    Value pj = ir::Convert(bb, Add(bb, p, ir::Full(bb, ir::ConstantI(bb, 1, DType::S64), {B})), DType::S32);
    Value kcol = ir::Compare(bb, ir::Iota(bb, {B, k}, 1, DType::S64), ir::Full(bb, j, {B, k}), ir::Cmp::EQ);
    Value pv = ir::Select(bb, kcol, ir::BroadcastInDim(bb, pj, {B, k}, {0}), v[1]);
    Value j1 = ir::Convert(bb, Add(bb, j, ir::ConstantI(bb, 1, DType::S64)), DType::S32);
    Value zero_i = ir::Full(bb, ir::ConstantI(bb, 0, DType::S32), {B});
    Value first = And(bb, ir::Unary(bb, "stablehlo.not", nz), ir::Compare(bb, v[2], zero_i, ir::Cmp::EQ));
    Value inf = ir::Select(bb, first, ir::Full(bb, j1, {B}), v[2]);
    return VS{A, pv, inf};
  });
  return {ir::Convert(b, r[0], out[0].dtype), r[1], r[2]};
}
constexpr lazy::Lowering kLu{"aten::linalg_lu_factor_ex", &LowerLu};

// in = (pivots (B, k) s32); ints = (m); out = perm (B, m) s64 with
// A[perm] = L U (the swaps applied in order to 0..m-1).
VS LowerPerm(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const int64_t m = a.ints[0];
  const ir::Dims pd = b.type(in[0]).dims;
  const int64_t B = pd[0], k = pd[1];
  Value perm = ir::Iota(b, {B, m}, 1, DType::S64);
  Value piv = ir::Convert(b, in[0], DType::S64);
  VS r = loop::For(b, 0, k, {perm, piv}, [&](Builder& bb, Value j, const VS& v) {
    Value idx = ir::Iota(bb, {B, m}, 1, DType::S64);
    Value kk = ir::Compare(bb, ir::Iota(bb, {B, k}, 1, DType::S64), ir::Full(bb, j, {B, k}), ir::Cmp::EQ);
    Value p = Sub(bb, ir::Reduce(bb, ir::Select(bb, kk, v[1], I64(bb, 0, {B, k})),
                                 ir::ConstantI(bb, 0, DType::S64), {1}, "stablehlo.add"),
                  I64(bb, 1, {B}));
    Value pm = ir::BroadcastInDim(bb, p, {B, m}, {0});
    Value is_j = ir::Compare(bb, idx, ir::Full(bb, j, {B, m}), ir::Cmp::EQ);
    Value is_p = ir::Compare(bb, idx, pm, ir::Cmp::EQ);
    Value zero = I64(bb, 0, {B, m});
    Value vj = ir::Reduce(bb, ir::Select(bb, is_j, v[0], zero), ir::ConstantI(bb, 0, DType::S64), {1}, "stablehlo.add");
    Value vp = ir::Reduce(bb, ir::Select(bb, is_p, v[0], zero), ir::ConstantI(bb, 0, DType::S64), {1}, "stablehlo.add");
    Value np = ir::Select(bb, is_j, ir::BroadcastInDim(bb, vp, {B, m}, {0}),
                          ir::Select(bb, is_p, ir::BroadcastInDim(bb, vj, {B, m}, {0}), v[0]));
    return VS{np, v[1]};
  });
  (void)out;
  return {r[0]};
}
constexpr lazy::Lowering kPerm{"aten::lu_unpack(perm)", &LowerPerm};

// in = (A (B, n, n), X (B, n, r) or (B, r, n)); ints = (left, lower, unit,
// transpose: 0 no, 1 transpose, 2 adjoint).
VS LowerTriSolve(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ft = out[0].dtype;
  Value A = ir::Convert(b, in[0], ft), X = ir::Convert(b, in[1], ft);
  const char* kinds[] = {"#stablehlo<transpose NO_TRANSPOSE>", "#stablehlo<transpose TRANSPOSE>",
                         "#stablehlo<transpose ADJOINT>"};
  std::string tr = kinds[a.ints[3]];
  return {b.Op1("stablehlo.triangular_solve", {A, X}, out[0],
                {{"left_side", a.ints[0] ? "true" : "false"},
                 {"lower", a.ints[1] ? "true" : "false"},
                 {"unit_diagonal", a.ints[2] ? "true" : "false"},
                 {"transpose_a", tr}})};
}
constexpr lazy::Lowering kTriSolve{"aten::triangular_solve", &LowerTriSolve};

// in = (A (B, n, n)); ints = (upper); out = (factor with the other triangle
// zeroed, info (B) s32: 1 + the first non-finite diagonal entry, else 0).
VS LowerCholesky(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::Dims d = out[0].dims;
  const int64_t B = d[0], n = d[1];
  const bool upper = a.ints[0] != 0;
  Value A = ir::Convert(b, in[0], out[0].dtype);
  Value L = b.Op1("stablehlo.cholesky", {A}, out[0], {{"lower", upper ? "false" : "true"}});
  Value row = ir::Iota(b, d, 1, DType::S64), col = ir::Iota(b, d, 2, DType::S64);
  Value keep = ir::Compare(b, row, col, upper ? ir::Cmp::LE : ir::Cmp::GE);
  L = ir::Select(b, keep, L, C(b, 0, L));
  Value diag = ir::Reduce(b, ir::Select(b, ir::Compare(b, row, col, ir::Cmp::EQ), L, C(b, 0, L)),
                          ir::ConstantF(b, 0, out[0].dtype), {2}, "stablehlo.add");  // (B, n)
  if (ir::IsComplex(out[0].dtype))  // a complex factor's diagonal is real
    diag = b.Op1("stablehlo.real", {diag}, ir::TensorType{out[0].dtype == DType::C128 ? DType::F64
                                                                                    : DType::F32, {B, n}});
  // XLA fills the factor of a matrix that is not positive-definite with NaN
  // entirely, so the order of the first minor that is not (LAPACK's info)
  // is found by an unblocked factorization of the failed matrices only: a
  // loop over the pivots that runs no step when every matrix factored.
  Value bad = ir::Unary(b, "stablehlo.not", b.Op1("stablehlo.is_finite", {diag}, ir::TensorType{DType::PRED, {B, n}}));
  Value failed = ir::Reduce(b, bad, ir::ConstantI(b, 0, DType::PRED), {1}, "stablehlo.or");  // (B)
  const DType ft = out[0].dtype, rt = PartOf(ft);
  // The Hermitian matrix that the named triangle describes.
  Value tri = ir::Select(b, ir::Compare(b, row, col, upper ? ir::Cmp::LT : ir::Cmp::GT), A, C(b, 0, A));
  Value dg = ir::Select(b, ir::Compare(b, row, col, ir::Cmp::EQ), ir::Convert(b, Re(b, A), ft), C(b, 0, A));
  Value H = Add(b, Add(b, tri, Adjoint(b, tri)), dg);
  VS init{ir::ConstantI(b, 0, DType::S64), H, I64(b, 0, {B}), failed};
  VS r = loop::While(
      b, init,
      [&](Builder& bb, const VS& v) {
        Value open = And(bb, v[3], ir::Compare(bb, v[2], I64(bb, 0, {B}), ir::Cmp::EQ));
        Value any = ir::Reduce(bb, open, ir::ConstantI(bb, 0, DType::PRED), {0}, "stablehlo.or");
        return And(bb, any, ir::Compare(bb, v[0], ir::ConstantI(bb, n, DType::S64), ir::Cmp::LT));
      },
      [&](Builder& bb, const VS& v) {
        Value k = v[0], S = v[1];
        Value rr = ir::Iota(bb, d, 1, DType::S64), cc = ir::Iota(bb, d, 2, DType::S64);
        Value kd = ir::Full(bb, k, d);
        Value colk = ir::Reduce(bb, ir::Select(bb, ir::Compare(bb, cc, kd, ir::Cmp::EQ), S, C(bb, 0, S)),
                                ir::ConstantF(bb, 0, ft), {2}, "stablehlo.add");  // (B, n): S[:, :, k]
        Value r1 = ir::Iota(bb, {B, n}, 1, DType::S64), k1 = ir::Full(bb, k, {B, n});
        Value pivot = ir::Reduce(bb, Re(bb, ir::Select(bb, ir::Compare(bb, r1, k1, ir::Cmp::EQ), colk, C(bb, 0, colk))),
                                 ir::ConstantF(bb, 0, rt), {1}, "stablehlo.add");  // (B)
        // not > 0 (NaN included)
        Value notpos = ir::Unary(bb, "stablehlo.not", ir::Compare(bb, pivot, C(bb, 0, pivot), ir::Cmp::GT));
        Value kb = ir::Full(bb, k, {B});
        Value info = ir::Select(bb, And(bb, notpos, ir::Compare(bb, v[2], I64(bb, 0, {B}), ir::Cmp::EQ)),
                                Add(bb, kb, I64(bb, 1, {B})), v[2]);
        Value safe = ir::Select(bb, notpos, C(bb, 1, pivot), pivot);
        Value l = ir::Select(bb, ir::Compare(bb, r1, k1, ir::Cmp::GT),
                             Div(bb, colk, ir::Convert(bb, ir::BroadcastInDim(bb, ir::Unary(bb, "stablehlo.sqrt", safe), {B, n}, {0}), ft)),
                             C(bb, 0, colk));
        Value outer = Mul(bb, ir::BroadcastInDim(bb, l, d, {0, 1}), ir::BroadcastInDim(bb, Conj(bb, l), d, {0, 2}));
        Value Sn = Sub(bb, S, outer);
        return VS{Add(bb, k, ir::ConstantI(bb, 1, DType::S64)), Sn, info, v[3]};
      });
  Value info = r[2];
  return {L, ir::Convert(b, info, DType::S32)};
}
constexpr lazy::Lowering kCholesky{"aten::linalg_cholesky_ex", &LowerCholesky};

// One-sided Jacobi SVD of A (B, m, n) with m >= n: column pairs rotated
// until orthogonal (a fixed number of sweeps), then S = the column norms,
// U = the normalized columns, V = the product of the rotations, sorted by
// descending S. Each sweep is n - 1 steps of the round-robin (tournament)
// ordering: a step rotates n/2 disjoint column pairs at once (gathered,
// rotated and put back as whole matrices, O(m n) work), so a sweep costs
// O(m n^2) rather than the O(m n^3) of rotating one pair per step. An odd n
// gets a zero column, whose rotations are skipped. in = (A); ints =
// (sweeps); out = (U (B, m, n), S (B, n), V (B, n, n)).
VS LowerSvd(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::Dims d = out[0].dims;
  const int64_t B = d[0], m = d[1], n = d[2];
  const DType ft = out[0].dtype;  // complex for a complex A; S is real
  const bool cplx = ir::IsComplex(ft);
  const int64_t sweeps = a.ints[0];
  const int64_t N = n + (n % 2), half = N / 2, steps = N - 1;
  Value A = ir::Convert(b, in[0], ft);
  const ir::Dims vd{B, n, n};
  Value V = Eye(b, vd, ft);
  if (n > 1) {
    if (N != n) {  // a zero column for A, a unit one for V (never rotated: gamma = 0)
      A = ir::Pad(b, A, ir::ConstantF(b, 0, ft), {0, 0, 0}, {0, 0, 1}, {0, 0, 0});
      V = Eye(b, {B, N, N}, ft);
    }
    // Round t pairs seat k with seat N-1-k of the circle: seat 0 holds
    // column 0, seat s > 0 holds column 1 + (s - 1 + t) mod (N - 1).
    // Tables: P and Q (steps, half), and the inverse of [P, Q] (steps, N).
    std::vector<int64_t> pt, qt, inv(steps * N);
    for (int64_t t = 0; t < steps; ++t) {
      auto seat = [&](int64_t s) { return s == 0 ? 0 : 1 + (s - 1 + t) % (N - 1); };
      for (int64_t k = 0; k < half; ++k) {
        pt.push_back(seat(k));
        qt.push_back(seat(N - 1 - k));
        inv[t * N + seat(k)] = k;
        inv[t * N + seat(N - 1 - k)] = half + k;
      }
    }
    Value ptab = ir::Reshape(b, ir::ConstantVectorI(b, pt, DType::S64), {steps, half});
    Value qtab = ir::Reshape(b, ir::ConstantVectorI(b, qt, DType::S64), {steps, half});
    Value itab = ir::Reshape(b, ir::ConstantVectorI(b, inv, DType::S64), {steps, N});
    VS r = loop::For(b, 0, sweeps * steps, {A, V, ptab, qtab, itab},
                     [&](Builder& bb, Value it, const VS& v) {
      Value t = ir::Binary(bb, "stablehlo.remainder", it, ir::ConstantI(bb, steps, DType::S64));
      Value zero = ir::ConstantI(bb, 0, DType::S64);
      Value p = ir::Reshape(bb, loop::DynSlice(bb, v[2], {t, zero}, {1, half}), {half});
      Value q = ir::Reshape(bb, loop::DynSlice(bb, v[3], {t, zero}, {1, half}), {half});
      Value back = ir::Reshape(bb, loop::DynSlice(bb, v[4], {t, zero}, {1, N}), {N});
      Value ap = ir::TakeAlong(bb, v[0], 2, p), aq = ir::TakeAlong(bb, v[0], 2, q);  // (B, m, half)
      auto sum_rows = [&](Value x) {
        return ir::Reduce(bb, x, ir::ConstantF(bb, 0, bb.type(x).dtype), {1}, "stablehlo.add");
      };
      // alpha = |a_p|^2, beta = |a_q|^2, gamma = a_p^H a_q (B, half); for
      // complex columns, a_q is first turned by the phase of gamma, which
      // makes gamma real, and the real rotation follows.
      Value alpha = sum_rows(Abs2(bb, ap)), beta = sum_rows(Abs2(bb, aq));
      Value gamma = sum_rows(Mul(bb, Conj(bb, ap), aq));
      Value g = cplx ? AbsR(bb, gamma) : gamma;
      Value tiny = ir::Compare(bb, ir::Unary(bb, "stablehlo.abs", g),
                               Mul(bb, C(bb, 1e-30, g), ir::Unary(bb, "stablehlo.sqrt", Mul(bb, alpha, beta))),
                               ir::Cmp::LE);
      tiny = ir::Binary(bb, "stablehlo.or", tiny, ir::Compare(bb, g, C(bb, 0, g), ir::Cmp::EQ));
      std::pair<Value, Value> cs = JacobiRotation(bb, alpha, beta, g, tiny);
      Value phase = cplx ? Phase(bb, gamma, g, tiny) : Value{};
      auto rotate = [&](Value X) {
        Value xp = ir::TakeAlong(bb, X, 2, p), xq = ir::TakeAlong(bb, X, 2, q);
        const ir::Dims xd = bb.type(xp).dims;
        if (cplx) xq = Mul(bb, xq, ir::BroadcastInDim(bb, phase, xd, {0, 2}));
        Value c = ir::Convert(bb, ir::BroadcastInDim(bb, cs.first, xd, {0, 2}), ft);
        Value s = ir::Convert(bb, ir::BroadcastInDim(bb, cs.second, xd, {0, 2}), ft);
        Value np_ = Sub(bb, Mul(bb, c, xp), Mul(bb, s, xq));
        Value nq_ = Add(bb, Mul(bb, s, xp), Mul(bb, c, xq));
        return ir::TakeAlong(bb, ir::Concatenate(bb, {np_, nq_}, 2), 2, back);
      };
      return VS{rotate(v[0]), rotate(v[1]), v[2], v[3], v[4]};
    });
    A = r[0];
    V = r[1];
    if (N != n) {
      A = ir::Slice(b, A, {0, 0, 0}, {B, m, n}, {1, 1, 1});
      V = ir::Slice(b, V, {0, 0, 0}, {B, n, n}, {1, 1, 1});
    }
  }
  const DType rt = PartOf(ft);
  Value S = ir::Unary(b, "stablehlo.sqrt",
                      ir::Reduce(b, Abs2(b, A), ir::ConstantF(b, 0, rt), {1}, "stablehlo.add"));  // (B, n)
  Value Sd = ir::BroadcastInDim(b, S, d, {0, 2});
  // A zero singular value has no direction of its own: e_j there (what
  // LAPACK gives for a zero matrix).
  Value ej = ir::Convert(b, ir::Convert(b, ir::Compare(b, ir::Iota(b, d, 1, DType::S64),
                                                       ir::Iota(b, d, 2, DType::S64), ir::Cmp::EQ), rt), ft);
  Value U = ir::Select(b, ir::Compare(b, Sd, C(b, 0, Sd), ir::Cmp::GT), Div(b, A, ir::Convert(b, Sd, ft)), ej);
  auto desc = [](Builder& rb, const VS& x) { return VS{ir::Compare(rb, x[0], x[1], ir::Cmp::GT)}; };
  VS us = ir::Sort(b, {Sd, U}, 2, true, desc);
  VS vs = ir::Sort(b, {ir::BroadcastInDim(b, S, vd, {0, 2}), V}, 2, true, desc);
  VS ss = ir::Sort(b, {S}, 1, true, desc);
  return {us[1], ss[0], vs[1]};
}
constexpr lazy::Lowering kSvd{"aten::_linalg_svd", &LowerSvd};

// Cyclic Jacobi eigenvalue algorithm for symmetric A (B, n, n): each pair
// (p, q) zeroed by a rotation J (A <- J^T A J, V <- V J) for a fixed number
// of sweeps; eigenvalues = diag(A) ascending, eigenvectors = V's columns.
// in = (A, already symmetric); ints = (sweeps); out = (w (B, n), V (B, n, n)).
VS LowerEigh(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const ir::Dims vd = out[1].dims;
  const int64_t B = vd[0], n = vd[1];
  const DType ft = out[1].dtype;  // complex for a Hermitian A; w is real
  const bool cplx = ir::IsComplex(ft);
  const int64_t sweeps = a.ints[0];
  std::vector<int64_t> ps, qs;
  for (int64_t p = 0; p < n; ++p)
    for (int64_t q = p + 1; q < n; ++q) {
      ps.push_back(p);
      qs.push_back(q);
    }
  const int64_t np = static_cast<int64_t>(ps.size());
  Value A = ir::Convert(b, in[0], ft);
  Value V = Eye(b, vd, ft);
  auto entry = [&](Builder& bb, Value X, Value r, Value c) {  // X[:, r, c] as (B)
    Value m = ir::Binary(bb, "stablehlo.and",
                         ir::Compare(bb, ir::Iota(bb, vd, 1, DType::S64), ir::Full(bb, r, vd), ir::Cmp::EQ),
                         ir::Compare(bb, ir::Iota(bb, vd, 2, DType::S64), ir::Full(bb, c, vd), ir::Cmp::EQ));
    return ir::Reduce(bb, ir::Select(bb, m, X, C(bb, 0, X)), ir::ConstantF(bb, 0, ft), {1, 2},
                      "stablehlo.add");
  };
  if (np > 0) {
    Value ptab = ir::ConstantVectorI(b, ps, DType::S64), qtab = ir::ConstantVectorI(b, qs, DType::S64);
    VS r = loop::For(b, 0, sweeps * np, {A, V, ptab, qtab}, [&](Builder& bb, Value it, const VS& v) {
      Value k = ir::Binary(bb, "stablehlo.remainder", it, ir::ConstantI(bb, np, DType::S64));
      Value p = ir::Reshape(bb, loop::DynSlice(bb, v[2], {k}, {1}), {});
      Value q = ir::Reshape(bb, loop::DynSlice(bb, v[3], {k}, {1}), {});
      Value app = Re(bb, entry(bb, v[0], p, p)), aqq = Re(bb, entry(bb, v[0], q, q));
      Value apq = entry(bb, v[0], p, q);
      // Complex: J = diag(1, phase) R, where the phase makes a_pq real and
      // R is the real rotation of the result.
      Value g = cplx ? AbsR(bb, apq) : apq;
      Value tiny = ir::Compare(bb, g, C(bb, 0, g), ir::Cmp::EQ);
      std::pair<Value, Value> cs = JacobiRotation(bb, app, aqq, g, tiny);
      Value c = ir::Convert(bb, cs.first, ft), s = ir::Convert(bb, cs.second, ft);
      Value phase = cplx ? Phase(bb, apq, g, tiny) : Value{};
      // columns p, q of X rotated: X J
      auto rot_cols = [&](Value X) {
        auto column = [&](Value cidx) {
          Value colm = ir::Compare(bb, ir::Iota(bb, vd, 2, DType::S64), ir::Full(bb, cidx, vd), ir::Cmp::EQ);
          return ir::BroadcastInDim(bb, ir::Reduce(bb, ir::Select(bb, colm, X, C(bb, 0, X)),
                                                   ir::ConstantF(bb, 0, ft), {2}, "stablehlo.add"),
                                    vd, {0, 1});
        };
        Value xp = column(p), xq = column(q);
        if (cplx) xq = Mul(bb, xq, ir::BroadcastInDim(bb, phase, vd, {0}));
        Value cc = ir::BroadcastInDim(bb, c, vd, {0}), ss = ir::BroadcastInDim(bb, s, vd, {0});
        Value colI = ir::Iota(bb, vd, 2, DType::S64);
        return ir::Select(bb, ir::Compare(bb, colI, ir::Full(bb, p, vd), ir::Cmp::EQ),
                          Sub(bb, Mul(bb, cc, xp), Mul(bb, ss, xq)),
                          ir::Select(bb, ir::Compare(bb, colI, ir::Full(bb, q, vd), ir::Cmp::EQ),
                                     Add(bb, Mul(bb, ss, xp), Mul(bb, cc, xq)), X));
      };
      Value A1 = rot_cols(v[0]);                             // A J
      Value A2 = Adjoint(bb, rot_cols(Adjoint(bb, A1)));     // J^H A J
      return VS{A2, rot_cols(v[1]), v[2], v[3]};
    });
    A = r[0];
    V = r[1];
  }
  const DType rt = PartOf(ft);
  Value diagm = ir::Compare(b, ir::Iota(b, vd, 1, DType::S64), ir::Iota(b, vd, 2, DType::S64), ir::Cmp::EQ);
  Value Ar = Re(b, A);
  Value w = ir::Reduce(b, ir::Select(b, diagm, Ar, C(b, 0, Ar)), ir::ConstantF(b, 0, rt), {2}, "stablehlo.add");
  auto asc = [](Builder& rb, const VS& x) { return VS{ir::Compare(rb, x[0], x[1], ir::Cmp::LT)}; };
  VS vs = ir::Sort(b, {ir::BroadcastInDim(b, w, vd, {0, 2}), V}, 2, true, asc);
  VS ws = ir::Sort(b, {w}, 1, true, asc);
  (void)B;
  return {ws[0], vs[1]};
}
constexpr lazy::Lowering kEigh{"aten::_linalg_eigh", &LowerEigh};

// Householder QR as LAPACK's geqrf + orgqr: column j reflected onto
// beta e_j with beta = -sign(alpha) ||x|| (tau = 0 when x below the
// diagonal is zero). in = (A (B, m, n)); out = (Q (B, m, m), R (B, m, n)).
// Returns (A with R on and above the diagonal, reflectors V (B, m, k) with
// v_j in column j (1 at j), taus (B, k)).
VS Geqrf(Builder& b, Value A) {
  const ir::Dims d = b.type(A).dims;
  const int64_t B = d[0], m = d[1], n = d[2], k = std::min(m, n);
  const DType ft = b.type(A).dtype, rt = PartOf(ft);
  const ir::Dims vd{B, m, k};
  Value Vs = ir::Full(b, ir::ConstantF(b, 0, ft), vd);     // reflectors, v_j in column j
  Value taus = ir::Full(b, ir::ConstantF(b, 0, ft), {B, k});
  VS r = loop::For(b, 0, k, {A, Vs, taus}, [&](Builder& bb, Value j, const VS& v) {
    Value X = v[0];
    Value row = ir::Iota(bb, d, 1, DType::S64), col = ir::Iota(bb, d, 2, DType::S64);
    Value jd = ir::Full(bb, j, d);
    Value colj = ir::Reduce(bb, ir::Select(bb, ir::Compare(bb, col, jd, ir::Cmp::EQ), X, C(bb, 0, X)),
                            ir::ConstantF(bb, 0, ft), {2}, "stablehlo.add");  // (B, m)
    Value r1 = ir::Iota(bb, {B, m}, 1, DType::S64), j1 = ir::Full(bb, j, {B, m});
    Value zero1 = ir::Full(bb, ir::ConstantF(bb, 0, ft), {B, m});
    Value alpha = ir::Reduce(bb, ir::Select(bb, ir::Compare(bb, r1, j1, ir::Cmp::EQ), colj, zero1),
                             ir::ConstantF(bb, 0, ft), {1}, "stablehlo.add");  // (B)
    Value below = ir::Select(bb, ir::Compare(bb, r1, j1, ir::Cmp::GT), colj, zero1);
    Value xnorm2 = ir::Reduce(bb, Abs2(bb, below), ir::ConstantF(bb, 0, rt), {1}, "stablehlo.add");
    // As LAPACK's larfg: no reflection where x is zero and alpha is real;
    // beta = -sign(Re alpha) ||(alpha, x)|| (real), tau = (beta - alpha) / beta.
    Value skip = ir::Compare(bb, xnorm2, C(bb, 0, xnorm2), ir::Cmp::EQ);
    if (ir::IsComplex(ft)) {
      Value im = Part(bb, "stablehlo.imag", alpha);
      skip = And(bb, skip, ir::Compare(bb, im, C(bb, 0, im), ir::Cmp::EQ));
    }
    Value nrm = ir::Unary(bb, "stablehlo.sqrt", Add(bb, Abs2(bb, alpha), xnorm2));
    Value alphr = Re(bb, alpha);
    Value neg = ir::Compare(bb, alphr, C(bb, 0, alphr), ir::Cmp::LT);
    Value beta = ir::Convert(bb, ir::Select(bb, neg, nrm, ir::Unary(bb, "stablehlo.negate", nrm)), ft);
    Value safe_beta = ir::Select(bb, skip, C(bb, 1, beta), beta);
    Value tau = ir::Select(bb, skip, C(bb, 0, beta), Div(bb, Sub(bb, beta, alpha), safe_beta));
    Value denom = ir::Select(bb, skip, C(bb, 1, alpha), Sub(bb, alpha, beta));
    // v: 1 at j, x / (alpha - beta) below, 0 above
    Value vvec = ir::Select(bb, ir::Compare(bb, r1, j1, ir::Cmp::EQ), ir::Full(bb, ir::ConstantF(bb, 1, ft), {B, m}),
                            Div(bb, below, ir::BroadcastInDim(bb, denom, {B, m}, {0})));
    // X <- H^H X = (I - conj(tau) v v^H) X on columns > j; column j becomes
    // beta e_j (or stays)
    Value w = ir::Reduce(bb, Mul(bb, ir::BroadcastInDim(bb, Conj(bb, vvec), d, {0, 1}), X),
                         ir::ConstantF(bb, 0, ft), {1}, "stablehlo.add");  // (B, n)
    Value upd = Sub(bb, X, Mul(bb, ir::BroadcastInDim(bb, Mul(bb, vvec, ir::BroadcastInDim(bb, Conj(bb, tau), {B, m}, {0})), d, {0, 1}),
                                ir::BroadcastInDim(bb, w, d, {0, 2})));
    Value newcol = ir::Select(bb, ir::Compare(bb, row, jd, ir::Cmp::EQ), ir::BroadcastInDim(bb, beta, d, {0}),
                              ir::Select(bb, ir::Compare(bb, row, jd, ir::Cmp::GT), C(bb, 0, X), X));
    newcol = ir::Select(bb, ir::BroadcastInDim(bb, skip, d, {0}), X, newcol);
    Value colgt = ir::Compare(bb, col, jd, ir::Cmp::GT), coleq = ir::Compare(bb, col, jd, ir::Cmp::EQ);
    Value Xn = ir::Select(bb, colgt, upd, ir::Select(bb, coleq, newcol, X));
    Value kcol = ir::Compare(bb, ir::Iota(bb, vd, 2, DType::S64), ir::Full(bb, j, vd), ir::Cmp::EQ);
    Value Vn = ir::Select(bb, kcol, ir::BroadcastInDim(bb, vvec, vd, {0, 1}), v[1]);
    Value tk = ir::Compare(bb, ir::Iota(bb, {B, k}, 1, DType::S64), ir::Full(bb, j, {B, k}), ir::Cmp::EQ);
    Value Tn = ir::Select(bb, tk, ir::BroadcastInDim(bb, tau, {B, k}, {0}), v[2]);
    return VS{Xn, Vn, Tn};
  });
  return r;
}

// Q = H_0 ... H_{k-1} I (B, m, m) from reflectors V (B, m, kv) and taus (B, k).
Value Orgqr(Builder& b, Value Vr, Value tr) {
  const ir::Dims vd = b.type(Vr).dims;
  const int64_t B = vd[0], m = vd[1];
  const int64_t k = b.type(tr).dims[1];
  const DType ft = b.type(Vr).dtype;
  const ir::Dims qd{B, m, m};
  Value Q = Eye(b, qd, ft);
  VS q = loop::For(b, 0, k, {Q, Vr, tr}, [&](Builder& bb, Value i, const VS& v) {
    Value j = Sub(bb, ir::ConstantI(bb, k - 1, DType::S64), i);
    Value kcol = ir::Compare(bb, ir::Iota(bb, vd, 2, DType::S64), ir::Full(bb, j, vd), ir::Cmp::EQ);
    Value vvec = ir::Reduce(bb, ir::Select(bb, kcol, v[1], C(bb, 0, v[1])), ir::ConstantF(bb, 0, ft), {2},
                            "stablehlo.add");  // (B, m)
    Value tk = ir::Compare(bb, ir::Iota(bb, {B, k}, 1, DType::S64), ir::Full(bb, j, {B, k}), ir::Cmp::EQ);
    Value tau = ir::Reduce(bb, ir::Select(bb, tk, v[2], C(bb, 0, v[2])), ir::ConstantF(bb, 0, ft), {1},
                           "stablehlo.add");
    Value w = ir::Reduce(bb, Mul(bb, ir::BroadcastInDim(bb, Conj(bb, vvec), qd, {0, 1}), v[0]),
                         ir::ConstantF(bb, 0, ft), {1}, "stablehlo.add");  // (B, m) = v^H Q
    Value tv = Mul(bb, vvec, ir::BroadcastInDim(bb, tau, {B, m}, {0}));
    Value Qn = Sub(bb, v[0], Mul(bb, ir::BroadcastInDim(bb, tv, qd, {0, 1}), ir::BroadcastInDim(bb, w, qd, {0, 2})));
    return VS{Qn, v[1], v[2]};
  });
  return q[0];
}

VS LowerQr(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::Dims d = out[1].dims;
  VS r = Geqrf(b, ir::Convert(b, in[0], out[1].dtype));
  Value row = ir::Iota(b, d, 1, DType::S64), col = ir::Iota(b, d, 2, DType::S64);
  Value R = ir::Select(b, ir::Compare(b, row, col, ir::Cmp::LE), r[0], C(b, 0, r[0]));
  return {Orgqr(b, r[1], r[2]), R};
}

// geqrf: in = (A (B, m, n)); out = (R above, reflectors below the diagonal; tau (B, k)).
VS LowerGeqrf(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::Dims d = out[0].dims;
  const int64_t m = d[1], n = d[2], k = std::min(m, n);
  VS r = Geqrf(b, ir::Convert(b, in[0], out[0].dtype));
  Value V = r[1];
  if (n > k) V = ir::Pad(b, V, ir::ConstantF(b, 0, out[0].dtype), {0, 0, 0}, {0, 0, n - k}, {0, 0, 0});
  Value row = ir::Iota(b, d, 1, DType::S64), col = ir::Iota(b, d, 2, DType::S64);
  return {ir::Select(b, ir::Compare(b, row, col, ir::Cmp::GT), V, r[0]), r[2]};
}
constexpr lazy::Lowering kGeqrf{"aten::geqrf", &LowerGeqrf};

// householder_product: in = (A (B, m, n) reflectors below the diagonal,
// tau (B, k)); out = the first n columns of H_0 ... H_{k-1}.
VS LowerHouseholder(Builder& b, const VS& in, const lazy::Attrs&, const TT& out) {
  const ir::Dims d = b.type(in[0]).dims;
  const DType ft = out[0].dtype;
  Value A = ir::Convert(b, in[0], ft);
  Value row = ir::Iota(b, d, 1, DType::S64), col = ir::Iota(b, d, 2, DType::S64);
  Value V = ir::Select(b, ir::Compare(b, row, col, ir::Cmp::GT), A,
                       ir::Select(b, ir::Compare(b, row, col, ir::Cmp::EQ), C(b, 1, A), C(b, 0, A)));
  Value Q = Orgqr(b, V, ir::Convert(b, in[1], ft));
  return {ir::Slice(b, Q, {0, 0, 0}, {d[0], d[1], d[2]}, {1, 1, 1})};
}
constexpr lazy::Lowering kHouseholder{"aten::linalg_householder_product", &LowerHouseholder};
constexpr lazy::Lowering kQr{"aten::linalg_qr", &LowerQr};

// ---- helpers on the ATen side ----

// complex_ok: the op is lowered for complex64/128 too (Cholesky and
// triangular solves, which StableHLO has for complex types).
void CheckFloatMatrix(const char* op, const Tensor& A, const char* name = "A",
                      bool complex_ok = false) {
  CheckTpu(op, A, name);
  TORCH_CHECK(A.dim() >= 2, op, ": The input tensor ", name, " must have at least 2 dimensions.");
  const auto t = A.scalar_type();
  TORCH_CHECK(at::isFloatingType(t) || (complex_ok && (t == at::kComplexFloat ||
                                                       t == at::kComplexDouble)),
              op, ": Expected a floating point tensor as input. Got ", t);
}
void CheckSquare(const char* op, const Tensor& A, const char* name = "A", bool complex_ok = false) {
  CheckFloatMatrix(op, A, name, complex_ok);
  TORCH_CHECK(A.size(-1) == A.size(-2), op, ": ", name, " must be batches of square matrices, "
              "but they are ", A.size(-2), " by ", A.size(-1), " matrices");
}
std::vector<int64_t> BatchOf(const Tensor& t) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end() - 2);
}
std::vector<int64_t> With(std::vector<int64_t> batch, std::initializer_list<int64_t> tail) {
  batch.insert(batch.end(), tail);
  return batch;
}
Tensor Flat3(const Tensor& t) { return t.reshape({-1, t.size(-2), t.size(-1)}); }

// LU of (..., m, n): (LU, pivots int32, info int32).
std::tuple<Tensor, Tensor, Tensor> LuFactor(const Tensor& A) {
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  auto batch = BatchOf(A);
  const int64_t B = c10::multiply_integers(batch);
  if (A.numel() == 0 || B == 0)
    return {A.clone(), at::zeros(With(batch, {k}), TpuOptions(at::kInt)).reshape(With(batch, {k})),
            at::zeros(batch, TpuOptions(at::kInt))};
  auto r = Run(kLu, {}, {OperandOf(Flat3(A))},
               {TypeOf({B, m, n}, A.scalar_type()), TypeOf({B, k}, at::kInt), TypeOf({B}, at::kInt)});
  std::vector<int64_t> kk = batch;
  kk.push_back(k);
  return {r[0].reshape(A.sizes()), r[1].reshape(kk), r[2].reshape(batch)};
}

// perm (..., m) int64 with A[..., perm, :] = L U.
Tensor PermOf(const Tensor& pivots, int64_t m) {
  std::vector<int64_t> batch(pivots.sizes().begin(), pivots.sizes().end() - 1);
  const int64_t B = c10::multiply_integers(batch);
  std::vector<int64_t> out = batch;
  out.push_back(m);
  if (B == 0 || m == 0) return at::zeros(out, TpuOptions(at::kLong));
  if (pivots.size(-1) == 0) return at::arange(m, TpuOptions(at::kLong)).expand(out).contiguous();
  return Run1(kPerm, {{m}, {}, {}}, {OperandOf(pivots.reshape({B, pivots.size(-1)}))},
              TypeOf({B, m}, at::kLong)).reshape(out);
}

// Solves op(A) X = B (left) or X op(A) = B (right) for triangular A with the
// batch dims broadcast.
// trans: 0 A, 1 A^T, 2 A^H (the conjugate transpose; A^T for real A).
Tensor TriSolve(const Tensor& A, const Tensor& Bm, bool upper, bool left, bool unit, int trans) {
  auto batch = at::infer_size(BatchOf(A), BatchOf(Bm));
  const int64_t n = A.size(-1);
  const auto dt = at::promote_types(A.scalar_type(), Bm.scalar_type());
  Tensor a = A.to(dt).expand(With(batch, {n, n}));
  Tensor x = Bm.to(dt).expand(With(batch, {Bm.size(-2), Bm.size(-1)}));
  if (x.numel() == 0) return x.clone();
  Tensor a3 = Flat3(a), x3 = Flat3(x);
  if (trans == 2 && !at::isComplexType(dt)) trans = 1;
  return Run1(kTriSolve, {{left ? 1 : 0, upper ? 0 : 1, unit ? 1 : 0, trans}, {}, {}},
              {OperandOf(a3), OperandOf(x3)}, TypeOf(x3.sizes(), dt))
      .reshape(x.sizes());
}

// X with A X = B (adjoint: A^H X = B) from A's LU factors.
Tensor LuSolve(const Tensor& LU, const Tensor& pivots, const Tensor& Bm, bool left, bool adjoint) {
  if (!left) {  // X A = B  <=>  A^H X^H = B^H
    return LuSolve(LU, pivots, Bm.mH(), true, !adjoint).mH();
  }
  const int64_t n = LU.size(-1);
  auto batch = at::infer_size(BatchOf(LU), BatchOf(Bm));
  Tensor lu = LU.expand(With(batch, {n, n}));
  Tensor b = Bm.expand(With(batch, {Bm.size(-2), Bm.size(-1)}));
  std::vector<int64_t> pb = batch;
  pb.push_back(pivots.size(-1));
  Tensor perm = PermOf(pivots.expand(pb), n);  // (..., n)
  if (!adjoint) {
    // P^T B = B[perm]; then L y = . and U x = y
    Tensor pbm = at::take_along_dim(b, perm.unsqueeze(-1), -2);
    Tensor y = TriSolve(lu, pbm, /*upper=*/false, true, /*unit=*/true, false);
    return TriSolve(lu, y, /*upper=*/true, true, false, false);
  }
  // A^H = U^H L^H P^T: U^H y = B, L^H z = y, x = P z (x[perm] = z).
  Tensor y = TriSolve(lu, b, /*upper=*/true, true, false, /*trans=*/2);
  Tensor z = TriSolve(lu, y, /*upper=*/false, true, /*unit=*/true, /*trans=*/2);
  Tensor inv = at::argsort(perm, -1, false);
  return at::take_along_dim(z, inv.unsqueeze(-1), -2);
}

// ---- kernels ----

std::tuple<Tensor, Tensor, Tensor> lu_factor_ex_tpu(const Tensor& A, bool pivot, bool check_errors) {
  CheckFloatMatrix("torch.linalg.lu_factor_ex", A, "A", true);
  TORCH_CHECK(pivot, "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  auto r = LuFactor(A);
  // Checking waits for the device, as on CUDA.
  if (check_errors) at::_linalg_check_errors(std::get<2>(r), "torch.linalg.lu_factor_ex", A.dim() == 2);
  return r;
}
std::tuple<Tensor&, Tensor&, Tensor&> lu_factor_ex_out_tpu(const Tensor& A, bool pivot,
                                                           bool check_errors, Tensor& LU,
                                                           Tensor& pivots, Tensor& info) {
  auto [l, p, i] = lu_factor_ex_tpu(A, pivot, check_errors);
  PrepareOutExact("linalg_lu_factor_ex", LU, l.sizes(), l.scalar_type());
  PrepareOutExact("linalg_lu_factor_ex", pivots, p.sizes(), p.scalar_type());
  PrepareOutExact("linalg_lu_factor_ex", info, i.sizes(), i.scalar_type());
  LU.copy_(l);
  pivots.copy_(p);
  info.copy_(i);
  return {LU, pivots, info};
}

std::tuple<Tensor, Tensor, Tensor> Unpack(const Tensor& LU, const Tensor& pivots, bool unpack_data,
                                          bool unpack_pivots) {
  const int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  auto batch = BatchOf(LU);
  Tensor L, U, P;
  if (unpack_data) {
    L = at::add(at::tril(LU.narrow(-1, 0, k), -1), at::eye(m, k, TpuOptions(LU.scalar_type())));
    U = at::triu(LU.narrow(-2, 0, k));
  } else {
    L = at::empty({0}, TpuOptions(LU.scalar_type()));
    U = at::empty({0}, TpuOptions(LU.scalar_type()));
  }
  if (unpack_pivots) {
    Tensor perm = PermOf(pivots, m);  // (..., m)
    // A = P L U with P[perm[i], i] = 1
    Tensor r = at::arange(m, TpuOptions(at::kLong));
    P = at::eq(perm.unsqueeze(-2), r.unsqueeze(-1)).to(LU.scalar_type());
  } else {
    P = at::empty({0}, TpuOptions(LU.scalar_type()));
  }
  return {P, L, U};
}

std::tuple<Tensor, Tensor, Tensor> lu_unpack_tpu(const Tensor& LU, const Tensor& pivots,
                                                 bool unpack_data, bool unpack_pivots) {
  CheckTpu("lu_unpack", LU, "LU_data");
  TORCH_CHECK(LU.dim() >= 2, "torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: ",
              LU.sizes(), " instead");
  TORCH_CHECK(pivots.scalar_type() == at::kInt, "torch.lu_unpack: LU_pivots is expected to be a "
              "contiguous tensor of torch.int32 dtype. Note: this function is intended to be used "
              "with the output produced by torch.linalg.lu_factor");
  return Unpack(LU, pivots, unpack_data, unpack_pivots);
}
std::tuple<Tensor&, Tensor&, Tensor&> lu_unpack_out_tpu(const Tensor& LU, const Tensor& pivots,
                                                        bool unpack_data, bool unpack_pivots,
                                                        Tensor& P, Tensor& L, Tensor& U) {
  auto [p, l, u] = lu_unpack_tpu(LU, pivots, unpack_data, unpack_pivots);
  for (auto [dst, src] : {std::pair<Tensor*, Tensor*>{&P, &p}, {&L, &l}, {&U, &u}}) {
    PrepareOut("lu_unpack", *dst, src->sizes(), src->scalar_type());
    dst->copy_(*src);
  }
  return {P, L, U};
}

std::tuple<Tensor, Tensor, Tensor> linalg_lu_tpu(const Tensor& A, bool pivot) {
  CheckFloatMatrix("linalg.lu", A, "A", true);
  TORCH_CHECK(pivot, "linalg.lu: LU without pivoting is not implemented on the CPU");
  auto [LU, piv, info] = LuFactor(A);
  return Unpack(LU, piv, true, true);
}
std::tuple<Tensor&, Tensor&, Tensor&> linalg_lu_out_tpu(const Tensor& A, bool pivot, Tensor& P,
                                                        Tensor& L, Tensor& U) {
  auto [p, l, u] = linalg_lu_tpu(A, pivot);
  for (auto [dst, src] : {std::pair<Tensor*, Tensor*>{&P, &p}, {&L, &l}, {&U, &u}}) {
    PrepareOutExact("linalg_lu", *dst, src->sizes(), src->scalar_type());
    dst->copy_(*src);
  }
  return {P, L, U};
}

Tensor lu_solve_tpu(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  CheckSquare("linalg.lu_solve", LU, "LU", true);
  TORCH_CHECK(B.dim() >= 2, "linalg.lu_solve: Expected B to have at least 2 dimensions, but it "
              "has ", B.dim(), " dimensions instead");
  TORCH_CHECK(LU.scalar_type() == B.scalar_type(), "linalg.lu_solve: Expected LU and B to have "
              "the same dtype, but found LU of type ", LU.scalar_type(), " and B of type ",
              B.scalar_type(), " instead");
  TORCH_CHECK(LU.size(-1) == (left ? B.size(-2) : B.size(-1)), "linalg.lu_solve: Incompatible "
              "shapes of A and B for the equation ", left ? "AX = B" : "XA = B", " (", LU.size(-2),
              "x", LU.size(-1), " and ", B.size(-2), "x", B.size(-1), ")");
  return LuSolve(LU, pivots, B, left, adjoint);
}
Tensor& lu_solve_out_tpu(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left,
                         bool adjoint, Tensor& out) {
  Tensor r = lu_solve_tpu(LU, pivots, B, left, adjoint);
  PrepareOutExact("linalg_lu_solve", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

// sign of the permutation: (-1)^(number of actual swaps)
Tensor PermSign(const Tensor& pivots, at::ScalarType dt) {
  Tensor idx = at::arange(1, pivots.size(-1) + 1, TpuOptions(at::kInt));
  Tensor swaps = at::sum(at::ne(pivots, idx).to(at::kLong), -1);
  return at::rsub(at::mul(at::remainder(swaps, 2), 2), 1).to(dt);
}

std::tuple<Tensor, Tensor, Tensor> linalg_det_tpu(const Tensor& A) {
  CheckSquare("linalg.det", A);
  // As CPU: the LU of A^T when A is contiguous (det(A^T) = det(A)); the
  // backward (linalg_det_backward) solves with it accordingly.
  auto [LU, piv, info] = LuFactor(A.is_contiguous() && !A.is_complex() ? A.mT() : A);
  Tensor diag = at::diagonal(LU, 0, -2, -1);
  Tensor det = at::mul(at::prod(diag, -1), PermSign(piv, A.scalar_type()));
  return {det, LU, piv};
}
std::tuple<Tensor&, Tensor&, Tensor&> linalg_det_out_tpu(const Tensor& A, Tensor& det, Tensor& LU,
                                                         Tensor& pivots) {
  auto [d, l, p] = linalg_det_tpu(A);
  for (auto [dst, src] : {std::pair<Tensor*, Tensor*>{&det, &d}, {&LU, &l}, {&pivots, &p}}) {
    PrepareOutExact("linalg_det", *dst, src->sizes(), src->scalar_type());
    dst->copy_(*src);
  }
  return {det, LU, pivots};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> linalg_slogdet_tpu(const Tensor& A) {
  CheckSquare("linalg.slogdet", A);
  auto [LU, piv, info] = LuFactor(A.is_contiguous() && !A.is_complex() ? A.mT() : A);
  Tensor diag = at::diagonal(LU, 0, -2, -1);
  Tensor sign = at::mul(at::prod(at::sgn(diag), -1), PermSign(piv, A.scalar_type()));
  Tensor logabs = at::sum(at::log(at::abs(diag)), -1);
  return {sign, logabs, LU, piv};
}
std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> linalg_slogdet_out_tpu(const Tensor& A, Tensor& sign,
                                                                      Tensor& logabsdet, Tensor& LU,
                                                                      Tensor& pivots) {
  auto [s, la, l, p] = linalg_slogdet_tpu(A);
  for (auto [dst, src] : {std::pair<Tensor*, Tensor*>{&sign, &s}, {&logabsdet, &la}, {&LU, &l},
                          {&pivots, &p}}) {
    PrepareOutExact("linalg_slogdet", *dst, src->sizes(), src->scalar_type());
    dst->copy_(*src);
  }
  return {sign, logabsdet, LU, pivots};
}

std::tuple<Tensor, Tensor> linalg_inv_ex_tpu(const Tensor& A, bool check_errors) {
  CheckSquare("linalg.inv", A, "A", true);
  auto [LU, piv, info] = LuFactor(A);
  if (check_errors) at::_linalg_check_errors(info, "linalg.inv_ex", A.dim() == 2);
  Tensor eye = at::eye(A.size(-1), TpuOptions(A.scalar_type())).expand(A.sizes());
  return {LuSolve(LU, piv, eye, true, false), info};
}
std::tuple<Tensor&, Tensor&> linalg_inv_ex_out_tpu(const Tensor& A, bool check_errors, Tensor& inv,
                                                   Tensor& info) {
  auto [i, f] = linalg_inv_ex_tpu(A, check_errors);
  PrepareOutExact("linalg_inv_ex", inv, i.sizes(), i.scalar_type());
  PrepareOutExact("linalg_inv_ex", info, f.sizes(), f.scalar_type());
  inv.copy_(i);
  info.copy_(f);
  return {inv, info};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> linalg_solve_ex_tpu(const Tensor& A, const Tensor& B,
                                                               bool left, bool check_errors) {
  CheckSquare("linalg.solve", A, "A", true);
  CheckTpu("linalg.solve", B, "B");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "linalg.solve: Expected A and B to have the "
              "same dtype, but found A of type ", A.scalar_type(), " and B of type ",
              B.scalar_type(), " instead");
  // B is a batch of vectors when it has one dimension less than A (and
  // its shape matches A's batch and size) or is 1-d.
  const bool vector_case = B.dim() == 1 || (left && B.dim() == A.dim() - 1 &&
                                            B.sizes() == A.sizes().slice(0, A.dim() - 1));
  Tensor b = vector_case ? B.unsqueeze(left ? -1 : -2) : B;
  const int64_t n = A.size(-1);
  TORCH_CHECK(left ? b.size(-2) == n : b.size(-1) == n, "linalg.solve: Incompatible shapes of A "
              "and B for the equation ", left ? "AX = B" : "XA = B", " (", A.size(-2), "x",
              A.size(-1), " and ", b.size(-2), "x", b.size(-1), ")");
  auto [LU, piv, info] = LuFactor(A);
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.solve_ex", A.dim() == 2);
  Tensor x = LuSolve(LU, piv, b, left, false);
  if (vector_case) x = x.squeeze(left ? -1 : -2);
  return {x, LU, piv, info};
}
std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> linalg_solve_ex_out_tpu(
    const Tensor& A, const Tensor& B, bool left, bool check_errors, Tensor& result, Tensor& LU,
    Tensor& pivots, Tensor& info) {
  auto [x, l, p, i] = linalg_solve_ex_tpu(A, B, left, check_errors);
  for (auto [dst, src] : {std::pair<Tensor*, Tensor*>{&result, &x}, {&LU, &l}, {&pivots, &p},
                          {&info, &i}}) {
    PrepareOutExact("linalg_solve_ex", *dst, src->sizes(), src->scalar_type());
    dst->copy_(*src);
  }
  return {result, LU, pivots, info};
}

// ---- SVD ----

std::tuple<Tensor, Tensor, Tensor> linalg_svd_tpu(const Tensor& A, bool full_matrices, bool compute_uv,
                                                  std::optional<c10::string_view> driver) {
  CheckFloatMatrix("linalg.svd", A, "A", /*complex_ok=*/true);
  (void)driver;
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  TORCH_CHECK(!compute_uv || !full_matrices || m == n,
              "linalg.svd: full_matrices=True for non-square matrices is not supported on tpu yet");
  auto batch = BatchOf(A);
  const int64_t B = c10::multiply_integers(batch);
  const auto dt = A.scalar_type();
  const auto rdt = c10::toRealValueType(dt);  // S is real
  if (A.numel() == 0 || B == 0) {
    Tensor U = compute_uv ? at::zeros(With(batch, {m, full_matrices ? m : k}), TpuOptions(dt)) : at::empty({0}, TpuOptions(dt));
    Tensor Vh = compute_uv ? at::zeros(With(batch, {full_matrices ? n : k, n}), TpuOptions(dt)) : at::empty({0}, TpuOptions(dt));
    std::vector<int64_t> sb = batch;
    sb.push_back(k);
    return {U, at::zeros(sb, TpuOptions(rdt)), Vh};
  }
  // Jacobi on the taller orientation: A = U S V^H, or A^H = V S U^H.
  const bool tall = m >= n;
  Tensor X = Flat3(tall ? A : A.mH());
  const int64_t rows = tall ? m : n, cols = tall ? n : m;
  const int64_t sweeps = rdt == at::kDouble ? 16 : 10;
  auto r = Run(kSvd, {{sweeps}, {}, {}}, {OperandOf(X)},
               {TypeOf({B, rows, cols}, dt), TypeOf({B, cols}, rdt), TypeOf({B, cols, cols}, dt)});
  Tensor Ux = r[0], S = r[1], Vx = r[2];
  std::vector<int64_t> sb = batch;
  sb.push_back(k);
  S = S.reshape(sb);
  if (!compute_uv) return {at::empty({0}, TpuOptions(dt)), S, at::empty({0}, TpuOptions(dt))};
  Tensor U = tall ? Ux : Vx, V = tall ? Vx : Ux;
  U = U.reshape(With(batch, {m, k}));
  Tensor Vh = at::conj_physical(V.mT()).reshape(With(batch, {k, n}));
  return {U, S, Vh};
}
std::tuple<Tensor&, Tensor&, Tensor&> linalg_svd_out_tpu(const Tensor& A, bool full_matrices,
                                                         bool compute_uv,
                                                         std::optional<c10::string_view> driver,
                                                         Tensor& U, Tensor& S, Tensor& Vh) {
  auto [u, s, vh] = linalg_svd_tpu(A, full_matrices, compute_uv, driver);
  for (auto [dst, src] : {std::pair<Tensor*, Tensor*>{&U, &u}, {&S, &s}, {&Vh, &vh}}) {
    PrepareOut("linalg_svd", *dst, src->sizes(), src->scalar_type());
    dst->copy_(*src);
  }
  return {U, S, Vh};
}

// ---- eigh ----

std::tuple<Tensor, Tensor> linalg_eigh_tpu(const Tensor& A, c10::string_view uplo, bool compute_v) {
  CheckSquare("linalg.eigh", A, "A", /*complex_ok=*/true);
  TORCH_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u",
              "Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  const int64_t n = A.size(-1);
  auto batch = BatchOf(A);
  const int64_t B = c10::multiply_integers(batch);
  const auto dt = A.scalar_type();
  const auto rdt = c10::toRealValueType(dt);  // the eigenvalues are real
  std::vector<int64_t> wb = batch;
  wb.push_back(n);
  if (A.numel() == 0 || B == 0)
    return {at::zeros(wb, TpuOptions(rdt)), compute_v ? at::zeros(A.sizes(), TpuOptions(dt)) : at::empty({0}, TpuOptions(dt))};
  // Only the named triangle is read (and of the diagonal, the real part).
  const bool lower = uplo == "L" || uplo == "l";
  Tensor tri = lower ? at::tril(A, -1) : at::triu(A, 1);
  Tensor diag = at::diagonal(A, 0, -2, -1);
  if (A.is_complex()) diag = at::real(diag).to(dt);
  Tensor sym = at::add(at::add(tri, at::conj_physical(tri.mT())), at::diag_embed(diag));
  const int64_t sweeps = rdt == at::kDouble ? 16 : 10;
  auto r = Run(kEigh, {{sweeps}, {}, {}}, {OperandOf(Flat3(sym))},
               {TypeOf({B, n}, rdt), TypeOf({B, n, n}, dt)});
  return {r[0].reshape(wb), compute_v ? r[1].reshape(A.sizes()) : at::empty({0}, TpuOptions(dt))};
}
std::tuple<Tensor&, Tensor&> linalg_eigh_out_tpu(const Tensor& A, c10::string_view uplo, bool compute_v,
                                                 Tensor& w, Tensor& V) {
  auto [ww, vv] = linalg_eigh_tpu(A, uplo, compute_v);
  PrepareOutExact("linalg_eigh", w, ww.sizes(), ww.scalar_type());
  PrepareOutExact("linalg_eigh", V, vv.sizes(), vv.scalar_type());
  w.copy_(ww);
  V.copy_(vv);
  return {w, V};
}

// ---- QR ----

std::tuple<Tensor, Tensor> linalg_qr_tpu(const Tensor& A, c10::string_view mode) {
  CheckFloatMatrix("linalg.qr", A, "A", /*complex_ok=*/true);
  TORCH_CHECK(mode == "reduced" || mode == "complete" || mode == "r", "qr received unrecognized mode '",
              mode, "' but expected one of 'reduced' (default), 'r', or 'complete'");
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  auto batch = BatchOf(A);
  const int64_t B = c10::multiply_integers(batch);
  const auto dt = A.scalar_type();
  const int64_t qc = mode == "complete" ? m : k, rr = mode == "complete" ? m : k;
  if (A.numel() == 0 || B == 0) {
    Tensor Q = mode == "r" ? at::empty({0}, TpuOptions(dt))
                           : at::eye(m, qc, TpuOptions(dt)).expand(With(batch, {m, qc})).contiguous();
    return {Q, at::zeros(With(batch, {rr, n}), TpuOptions(dt))};
  }
  auto r = Run(kQr, {}, {OperandOf(Flat3(A))}, {TypeOf({B, m, m}, dt), TypeOf({B, m, n}, dt)});
  Tensor Q = r[0].reshape(With(batch, {m, m})), R = r[1].reshape(With(batch, {m, n}));
  R = R.narrow(-2, 0, rr).contiguous();
  if (mode == "r") return {at::empty({0}, TpuOptions(dt)), R};
  return {Q.narrow(-1, 0, qc).contiguous(), R};
}
std::tuple<Tensor&, Tensor&> linalg_qr_out_tpu(const Tensor& A, c10::string_view mode, Tensor& Q,
                                               Tensor& R) {
  auto [q, r] = linalg_qr_tpu(A, mode);
  PrepareOutExact("linalg_qr", Q, q.sizes(), q.scalar_type());
  PrepareOutExact("linalg_qr", R, r.sizes(), r.scalar_type());
  Q.copy_(q);
  R.copy_(r);
  return {Q, R};
}

std::tuple<Tensor, Tensor> geqrf_tpu(const Tensor& A) {
  CheckFloatMatrix("geqrf", A, "input", /*complex_ok=*/true);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  auto batch = BatchOf(A);
  const int64_t B = c10::multiply_integers(batch);
  std::vector<int64_t> tb = batch;
  tb.push_back(k);
  if (A.numel() == 0 || B == 0) return {A.clone(), at::zeros(tb, TpuOptions(A.scalar_type()))};
  auto r = Run(kGeqrf, {}, {OperandOf(Flat3(A))},
               {TypeOf({B, m, n}, A.scalar_type()), TypeOf({B, k}, A.scalar_type())});
  return {r[0].reshape(A.sizes()), r[1].reshape(tb)};
}
std::tuple<Tensor&, Tensor&> geqrf_out_tpu(const Tensor& A, Tensor& a, Tensor& tau) {
  auto [x, t] = geqrf_tpu(A);
  PrepareOut("geqrf", a, x.sizes(), x.scalar_type());
  PrepareOut("geqrf", tau, t.sizes(), t.scalar_type());
  a.copy_(x);
  tau.copy_(t);
  return {a, tau};
}

Tensor householder_product_tpu(const Tensor& A, const Tensor& tau) {
  CheckFloatMatrix("torch.linalg.householder_product", A, "input", /*complex_ok=*/true);
  TORCH_CHECK(A.size(-2) >= A.size(-1), "torch.linalg.householder_product: input.shape[-2] must be "
              "greater than or equal to input.shape[-1]");
  TORCH_CHECK(A.size(-1) >= tau.size(-1), "torch.linalg.householder_product: input.shape[-1] must "
              "be greater than or equal to tau.shape[-1]");
  TORCH_CHECK(A.dim() - tau.dim() == 1, "torch.linalg.householder_product: Expected tau to have one "
              "dimension less than input, but got tau.ndim equal to ", tau.dim(),
              " and input.ndim is equal to ", A.dim());
  const int64_t m = A.size(-2), n = A.size(-1);
  auto batch = BatchOf(A);
  const int64_t B = c10::multiply_integers(batch);
  if (A.numel() == 0 || B == 0 || tau.size(-1) == 0)
    return at::eye(m, n, TpuOptions(A.scalar_type())).expand(A.sizes()).contiguous();
  return Run1(kHouseholder, {}, {OperandOf(Flat3(A)), OperandOf(tau.reshape({B, tau.size(-1)}))},
              TypeOf({B, m, n}, A.scalar_type()))
      .reshape(A.sizes());
}
Tensor& householder_product_out_tpu(const Tensor& A, const Tensor& tau, Tensor& out) {
  Tensor r = householder_product_tpu(A, tau);
  PrepareOut("linalg_householder_product", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

// ormqr: op(Q) C or C op(Q) with Q (m x m) = H_0 ... H_{k-1} of geqrf's output.
Tensor ormqr_tpu(const Tensor& A, const Tensor& tau, const Tensor& Cm, bool left, bool transpose) {
  CheckFloatMatrix("ormqr", A, "input", /*complex_ok=*/true);
  const int64_t m = A.size(-2), n = A.size(-1);
  const int64_t qm = left ? Cm.size(-2) : Cm.size(-1);
  TORCH_CHECK(qm == m, "torch.ormqr: input.shape[-2] must be equal to other.shape[", left ? -2 : -1,
              "]");
  // pad the reflectors to a square m x m (tau 0 there: H = I)
  Tensor Asq = n < m ? at::cat({A, at::zeros(With(BatchOf(A), {m, m - n}), A.options())}, -1)
                     : A.narrow(-1, 0, m);
  Tensor Q = householder_product_tpu(Asq, tau);
  Tensor op = transpose ? Q.mH() : Q;  // the conjugate transpose for complex Q
  return left ? at::matmul(op, Cm) : at::matmul(Cm, op);
}
Tensor& ormqr_out_tpu(const Tensor& A, const Tensor& tau, const Tensor& Cm, bool left, bool transpose,
                      Tensor& out) {
  Tensor r = ormqr_tpu(A, tau, Cm, left, transpose);
  PrepareOut("ormqr", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

// ---- lstsq: the minimum-norm solution through the SVD, with the extra
// outputs each CPU driver returns ----

std::tuple<Tensor, Tensor, Tensor, Tensor> linalg_lstsq_tpu(const Tensor& A, const Tensor& B,
                                                            std::optional<double> rcond,
                                                            std::optional<c10::string_view> driver) {
  CheckFloatMatrix("torch.linalg.lstsq", A, "input", /*complex_ok=*/true);
  CheckTpu("torch.linalg.lstsq", B, "other");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "torch.linalg.lstsq: Expected input and other to "
              "have the same dtype, but got input's dtype ", A.scalar_type(), " and other's dtype ",
              B.scalar_type());
  const std::string drv = driver.has_value() ? std::string(*driver) : "gelsy";
  TORCH_CHECK(drv == "gels" || drv == "gelsy" || drv == "gelsd" || drv == "gelss",
              "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  const bool vector_case = B.dim() == A.dim() - 1;
  Tensor b = vector_case ? B.unsqueeze(-1) : B;
  TORCH_CHECK(A.size(-2) == b.size(-2), "torch.linalg.lstsq: input.size(-2) should match "
              "other.size(-2)");
  const int64_t m = A.size(-2), n = A.size(-1);
  const auto dt = A.scalar_type();
  if (A.numel() == 0) {
    // Empty matrices or batches: what each driver returns then (zeros,
    // empty or ||b||^2 residuals) is CPU's; no factorization runs.
    auto [x, r, k, sv] = at::linalg_lstsq(A.cpu(), B.cpu(), rcond, driver);
    return {x.to(A.device()), r.to(A.device()), k.to(A.device()), sv.to(A.device())};
  }
  auto [U, S, Vh] = linalg_svd_tpu(A, false, true, std::nullopt);
  const double eps = c10::toRealValueType(dt) == at::kDouble ? std::numeric_limits<double>::epsilon()
                                       : std::numeric_limits<float>::epsilon();
  const double rc = rcond.has_value() && *rcond > 0 ? *rcond : eps * std::max(m, n);
  Tensor thresh = at::mul(std::get<0>(at::max(S, -1, true)), rc);
  Tensor keep = at::gt(S, thresh);
  Tensor Sinv = at::where(keep, at::reciprocal(S), at::zeros({}, TpuOptions(S.scalar_type())));
  Tensor X = at::matmul(Vh.mH(), at::mul(Sinv.unsqueeze(-1), at::matmul(U.mH(), b)));
  Tensor rank = at::sum(keep, -1).to(at::kLong);
  Tensor empty = at::empty({0}, TpuOptions(dt));
  Tensor residuals = at::empty({0}, TpuOptions(c10::toRealValueType(dt)));
  if (m > n && drv != "gelsy") {
    bool full = true;
    if (drv != "gels") full = at::lt(rank, n).any().item<bool>() == false;
    if (full) residuals = at::sum(at::pow(at::abs(at::sub(at::matmul(A, X), b)), 2), -2);
  }
  if (vector_case) {
    X = X.squeeze(-1);
    if (residuals.numel() > 0) residuals = residuals.squeeze(-1);
  }
  Tensor sv = (drv == "gelsd" || drv == "gelss") ? S : at::empty({0}, TpuOptions(S.scalar_type()));
  Tensor rk = drv == "gels" ? at::empty({0}, TpuOptions(at::kLong)) : rank;
  return {X, residuals, rk, sv};
}
std::tuple<Tensor&, Tensor&, Tensor&, Tensor&> linalg_lstsq_out_tpu(
    const Tensor& A, const Tensor& B, std::optional<double> rcond,
    std::optional<c10::string_view> driver, Tensor& solution, Tensor& residuals, Tensor& rank,
    Tensor& sv) {
  auto [x, r, k, s] = linalg_lstsq_tpu(A, B, rcond, driver);
  for (auto [dst, src] : {std::pair<Tensor*, Tensor*>{&solution, &x}, {&residuals, &r}, {&rank, &k},
                          {&sv, &s}}) {
    PrepareOut("linalg_lstsq", *dst, src->sizes(), src->scalar_type());
    dst->copy_(*src);
  }
  return {solution, residuals, rank, sv};
}

// ---- Cholesky ----

std::tuple<Tensor, Tensor> Cholesky(const Tensor& A, bool upper) {
  const int64_t n = A.size(-1);
  auto batch = BatchOf(A);
  const int64_t B = c10::multiply_integers(batch);
  if (A.numel() == 0) return {A.clone(), at::zeros(batch, TpuOptions(at::kInt))};
  auto r = Run(kCholesky, {{upper ? 1 : 0}, {}, {}}, {OperandOf(Flat3(A))},
               {TypeOf({B, n, n}, A.scalar_type()), TypeOf({B}, at::kInt)});
  return {r[0].reshape(A.sizes()), r[1].reshape(batch)};
}
std::tuple<Tensor, Tensor> cholesky_ex_tpu(const Tensor& A, bool upper, bool check_errors) {
  CheckSquare("linalg.cholesky", A, "A", true);
  auto r = Cholesky(A, upper);
  if (check_errors) at::_linalg_check_errors(std::get<1>(r), "linalg.cholesky_ex", A.dim() == 2);
  return r;
}
std::tuple<Tensor&, Tensor&> cholesky_ex_out_tpu(const Tensor& A, bool upper, bool check_errors,
                                                 Tensor& L, Tensor& info) {
  auto [l, i] = cholesky_ex_tpu(A, upper, check_errors);
  PrepareOutExact("linalg_cholesky_ex", L, l.sizes(), l.scalar_type());
  PrepareOutExact("linalg_cholesky_ex", info, i.sizes(), i.scalar_type());
  L.copy_(l);
  info.copy_(i);
  return {L, info};
}
Tensor cholesky_tpu(const Tensor& A, bool upper) {
  CheckSquare("cholesky", A, "A", true);
  return std::get<0>(Cholesky(A, upper));
}
Tensor& cholesky_out_tpu(const Tensor& A, bool upper, Tensor& out) {
  Tensor r = cholesky_tpu(A, upper);
  PrepareOut("cholesky", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}
// X with (L L^H) X = B, L lower (or U^H U with U upper).
Tensor cholesky_solve_helper_tpu(const Tensor& B, const Tensor& A, bool upper) {
  Tensor y = TriSolve(A, B, upper, true, false, /*trans=*/upper ? 2 : 0);
  return TriSolve(A, y, upper, true, false, /*trans=*/upper ? 0 : 2);
}
Tensor cholesky_inverse_tpu(const Tensor& A, bool upper) {
  CheckSquare("cholesky_inverse", A, "input", true);
  Tensor eye = at::eye(A.size(-1), TpuOptions(A.scalar_type())).expand(A.sizes());
  return cholesky_solve_helper_tpu(eye, A, upper);
}
Tensor& cholesky_inverse_out_tpu(const Tensor& A, bool upper, Tensor& out) {
  Tensor r = cholesky_inverse_tpu(A, upper);
  TORCH_CHECK(c10::canCast(r.scalar_type(), out.scalar_type()), "cholesky_inverse: Expected "
              "result to be safely castable from ", r.scalar_type(), " dtype, but got result "
              "with dtype ", out.scalar_type());
  PrepareOut("cholesky_inverse", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

// ---- triangular solves ----

Tensor solve_triangular_tpu(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  CheckSquare("linalg.solve_triangular", A, "A", true);
  CheckTpu("linalg.solve_triangular", B, "B");
  TORCH_CHECK(B.dim() >= 2, "linalg.solve_triangular: The input tensor B must have at least 2 "
              "dimensions.");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "linalg.solve_triangular: Expected A and B to "
              "have the same dtype, but found A of type ", A.scalar_type(), " and B of type ",
              B.scalar_type(), " instead");
  TORCH_CHECK(left ? A.size(-1) == B.size(-2) : A.size(-1) == B.size(-1),
              "linalg.solve_triangular: Incompatible shapes of A and B for the equation ",
              left ? "AX = B" : "XA = B", " (", A.size(-2), "x", A.size(-1), " and ", B.size(-2),
              "x", B.size(-1), ")");
  return TriSolve(A, B, upper, left, unitriangular, false);
}
Tensor& solve_triangular_out_tpu(const Tensor& A, const Tensor& B, bool upper, bool left,
                                 bool unitriangular, Tensor& out) {
  Tensor r = solve_triangular_tpu(A, B, upper, left, unitriangular);
  PrepareOut("linalg_solve_triangular", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}
std::tuple<Tensor, Tensor> triangular_solve_tpu(const Tensor& b, const Tensor& A, bool upper,
                                                bool transpose, bool unitriangular) {
  CheckSquare("triangular_solve", A, "A", true);
  TORCH_CHECK(b.dim() >= 2, "torch.triangular_solve: Expected b to have at least 2 dimensions, "
              "but it has ", b.dim(), " dimensions instead");
  TORCH_CHECK(A.scalar_type() == b.scalar_type(), "Expected b and A to have the same dtype, but "
              "found b of type ", b.scalar_type(), " and A of type ", A.scalar_type(), " instead.");
  Tensor x = TriSolve(A, b, upper, true, unitriangular, transpose);
  auto batch = at::infer_size(BatchOf(A), BatchOf(b));
  return {x, A.expand(With(batch, {A.size(-2), A.size(-1)})).clone()};
}
std::tuple<Tensor&, Tensor&> triangular_solve_out_tpu(const Tensor& b, const Tensor& A, bool upper,
                                                      bool transpose, bool unitriangular,
                                                      Tensor& X, Tensor& M) {
  auto [x, m] = triangular_solve_tpu(b, A, upper, transpose, unitriangular);
  PrepareOut("triangular_solve", X, x.sizes(), x.scalar_type());
  PrepareOut("triangular_solve", M, m.sizes(), m.scalar_type());
  X.copy_(x);
  M.copy_(m);
  return {X, M};
}

// ---- eig: on the host, as CUDA does ----
// A general (non-symmetric) eigendecomposition has no StableHLO lowering
// here; PyTorch's CUDA backend also computes it on the CPU (MAGMA's geev
// takes host memory): the input is copied to the host, LAPACK runs, and the
// results come back. This waits for the device.

std::tuple<Tensor, Tensor> linalg_eig_tpu(const Tensor& A) {
  CheckTpu("linalg.eig", A, "input");
  auto [w, v] = at::linalg_eig(A.cpu());
  return {w.to(A.device()), v.to(A.device())};
}
std::tuple<Tensor&, Tensor&> linalg_eig_out_tpu(const Tensor& A, Tensor& w, Tensor& v) {
  CheckTpu("linalg.eig", A, "input");
  CheckTpu("linalg.eig", w, "eigenvalues");
  CheckTpu("linalg.eig", v, "eigenvectors");
  // CPU's out= checks (dtypes) on host stand-ins of the same dtypes.
  Tensor wc = at::empty({0}, w.options().device(at::kCPU));
  Tensor vc = at::empty({0}, v.options().device(at::kCPU));
  at::linalg_eig_out(wc, vc, A.cpu());
  PrepareOut("linalg_eig", w, wc.sizes(), w.scalar_type());
  PrepareOut("linalg_eig", v, vc.sizes(), v.scalar_type());
  w.copy_(wc);
  v.copy_(vc);
  return {w, v};
}
Tensor linalg_eigvals_tpu(const Tensor& A) {
  CheckTpu("linalg.eigvals", A, "input");
  return at::_linalg_eigvals(A.cpu()).to(A.device());
}
Tensor& linalg_eigvals_out_tpu(const Tensor& A, Tensor& out) {
  CheckTpu("linalg.eigvals", A, "input");
  CheckTpu("linalg.eigvals", out, "out");
  Tensor oc = at::empty({0}, out.options().device(at::kCPU));
  at::linalg_eigvals_out(oc, A.cpu());
  PrepareOut("linalg_eigvals", out, oc.sizes(), out.scalar_type());
  return out.copy_(oc);
}

// ---- matrix_exp: scaling and squaring with the degree-13 Pade
// approximant (Higham 2005) ----
// Each matrix is scaled by 2^-s, where s is the least integer >= 0 with
// ||A||_1 / 2^s <= theta_13, the approximant r(A) = (V - U)^-1 (V + U)
// taken, and squared s times (matrices with a smaller s stop squaring
// earlier). One wait for the device: the largest s of the batch.

Tensor linalg_matrix_exp_tpu(const Tensor& A) {
  CheckSquare("linalg.matrix_exp", A, "A", /*complex_ok=*/true);
  const int64_t n = A.size(-1);
  if (A.numel() == 0) return at::empty_like(A, at::MemoryFormat::Contiguous);
  if (n == 1) return at::exp(A);
  constexpr double kTheta13 = 5.371920351148152;
  static constexpr double b[] = {64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
                                 1187353796428800.0,  129060195264000.0,   10559470521600.0,
                                 670442572800.0,      33522128640.0,       1323241920.0,
                                 40840800.0,          960960.0,            16380.0,
                                 182.0,               1.0};
  Tensor norm1 = at::amax(at::sum(at::abs(A), -2), -1);  // (...,) the 1-norm
  Tensor s = at::clamp_min(at::ceil(at::log2(at::div(norm1, kTheta13))), 0);
  s = at::where(at::isfinite(s), s, at::zeros({}, s.options()));  // a zero matrix: log2(0)
  Tensor scale = at::pow(2.0, at::neg(s)).to(A.scalar_type()).unsqueeze(-1).unsqueeze(-1);
  Tensor X = at::mul(A, scale);
  Tensor I = at::eye(n, A.options());
  Tensor X2 = at::matmul(X, X), X4 = at::matmul(X2, X2), X6 = at::matmul(X4, X2);
  auto comb = [&](double c6, double c4, double c2) {
    return at::add(at::add(at::mul(X6, c6), at::mul(X4, c4)), at::mul(X2, c2));
  };
  Tensor U = at::matmul(X, at::add(at::matmul(X6, comb(b[13], b[11], b[9])),
                                   at::add(comb(b[7], b[5], b[3]), at::mul(I, b[1]))));
  Tensor V = at::add(at::matmul(X6, comb(b[12], b[10], b[8])), at::add(comb(b[6], b[4], b[2]), at::mul(I, b[0])));
  Tensor R = std::get<0>(linalg_solve_ex_tpu(at::sub(V, U), at::add(V, U), true, false));
  // A NaN or infinite norm leaves s at 0: the result is then NaN, as on CPU.
  const int64_t smax = s.numel() ? static_cast<int64_t>(at::max(s).item<double>()) : 0;
  for (int64_t i = 0; i < smax; ++i) {
    Tensor more = at::gt(s, static_cast<double>(i)).unsqueeze(-1).unsqueeze(-1);
    R = at::where(more, at::matmul(R, R), R);
  }
  return R;
}
Tensor& linalg_matrix_exp_out_tpu(const Tensor& A, Tensor& out) {
  Tensor r = linalg_matrix_exp_tpu(A);
  PrepareOut("linalg_matrix_exp", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_lu_factor_ex", TORCH_FN(lu_factor_ex_tpu));
  m.impl("linalg_lu_factor_ex.out", TORCH_FN(lu_factor_ex_out_tpu));
  m.impl("lu_unpack", TORCH_FN(lu_unpack_tpu));
  m.impl("lu_unpack.out", TORCH_FN(lu_unpack_out_tpu));
  m.impl("linalg_lu", TORCH_FN(linalg_lu_tpu));
  m.impl("linalg_lu.out", TORCH_FN(linalg_lu_out_tpu));
  m.impl("linalg_lu_solve", TORCH_FN(lu_solve_tpu));
  m.impl("linalg_lu_solve.out", TORCH_FN(lu_solve_out_tpu));
  m.impl("_linalg_det", TORCH_FN(linalg_det_tpu));
  m.impl("_linalg_det.result", TORCH_FN(linalg_det_out_tpu));
  m.impl("_linalg_slogdet", TORCH_FN(linalg_slogdet_tpu));
  m.impl("_linalg_slogdet.sign", TORCH_FN(linalg_slogdet_out_tpu));
  m.impl("linalg_inv_ex", TORCH_FN(linalg_inv_ex_tpu));
  m.impl("linalg_inv_ex.inverse", TORCH_FN(linalg_inv_ex_out_tpu));
  m.impl("_linalg_solve_ex", TORCH_FN(linalg_solve_ex_tpu));
  m.impl("_linalg_solve_ex.result", TORCH_FN(linalg_solve_ex_out_tpu));
  m.impl("linalg_cholesky_ex", TORCH_FN(cholesky_ex_tpu));
  m.impl("linalg_cholesky_ex.L", TORCH_FN(cholesky_ex_out_tpu));
  m.impl("cholesky", TORCH_FN(cholesky_tpu));
  m.impl("cholesky.out", TORCH_FN(cholesky_out_tpu));
  m.impl("_cholesky_solve_helper", TORCH_FN(cholesky_solve_helper_tpu));
  m.impl("cholesky_inverse", TORCH_FN(cholesky_inverse_tpu));
  m.impl("cholesky_inverse.out", TORCH_FN(cholesky_inverse_out_tpu));
  m.impl("linalg_solve_triangular", TORCH_FN(solve_triangular_tpu));
  m.impl("linalg_solve_triangular.out", TORCH_FN(solve_triangular_out_tpu));
  m.impl("triangular_solve", TORCH_FN(triangular_solve_tpu));
  m.impl("triangular_solve.X", TORCH_FN(triangular_solve_out_tpu));
  m.impl("_linalg_svd", TORCH_FN(linalg_svd_tpu));
  m.impl("linalg_qr", TORCH_FN(linalg_qr_tpu));
  m.impl("linalg_lstsq", TORCH_FN(linalg_lstsq_tpu));
  m.impl("linalg_lstsq.out", TORCH_FN(linalg_lstsq_out_tpu));
  m.impl("geqrf", TORCH_FN(geqrf_tpu));
  m.impl("geqrf.a", TORCH_FN(geqrf_out_tpu));
  m.impl("linalg_householder_product", TORCH_FN(householder_product_tpu));
  m.impl("linalg_householder_product.out", TORCH_FN(householder_product_out_tpu));
  m.impl("ormqr", TORCH_FN(ormqr_tpu));
  m.impl("ormqr.out", TORCH_FN(ormqr_out_tpu));
  m.impl("linalg_qr.out", TORCH_FN(linalg_qr_out_tpu));
  m.impl("_linalg_eigh", TORCH_FN(linalg_eigh_tpu));
  m.impl("_linalg_eigh.eigenvalues", TORCH_FN(linalg_eigh_out_tpu));
  m.impl("_linalg_svd.U", TORCH_FN(linalg_svd_out_tpu));
  m.impl("linalg_eig", TORCH_FN(linalg_eig_tpu));
  m.impl("linalg_eig.out", TORCH_FN(linalg_eig_out_tpu));
  m.impl("_linalg_eigvals", TORCH_FN(linalg_eigvals_tpu));
  m.impl("linalg_eigvals.out", TORCH_FN(linalg_eigvals_out_tpu));
  m.impl("linalg_matrix_exp", TORCH_FN(linalg_matrix_exp_tpu));
  m.impl("linalg_matrix_exp.out", TORCH_FN(linalg_matrix_exp_out_tpu));
}

}  // namespace tpu::ops
