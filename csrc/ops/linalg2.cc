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
#include <ATen/ops/arange.h>
#include <ATen/ops/argsort.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/add.h>
#include <ATen/ops/cat.h>
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
#include "ops/bridge.h"
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
Value I64(Builder& b, int64_t v, const ir::Dims& d) { return ir::Full(b, ir::ConstantI(b, v, DType::S64), d); }
Value And(Builder& b, Value x, Value y) { return ir::Binary(b, "stablehlo.and", x, y); }

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
    Value cand = ir::Select(bb, below, ir::Unary(bb, "stablehlo.abs", colj),
                            ir::Full(bb, ir::ConstantF(bb, -1, ft), {B, m}));
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
// transpose: 0 no, 1 transpose).
VS LowerTriSolve(Builder& b, const VS& in, const lazy::Attrs& a, const TT& out) {
  const DType ft = out[0].dtype;
  Value A = ir::Convert(b, in[0], ft), X = ir::Convert(b, in[1], ft);
  std::string tr = a.ints[3] ? "#stablehlo<transpose TRANSPOSE>" : "#stablehlo<transpose NO_TRANSPOSE>";
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
  Value bad = ir::Unary(b, "stablehlo.not", b.Op1("stablehlo.is_finite", {diag}, ir::TensorType{DType::PRED, {B, n}}));
  Value pos = ir::Select(b, bad, ir::Iota(b, {B, n}, 1, DType::S64), I64(b, n, {B, n}));
  Value first = ir::Reduce(b, pos, ir::ConstantI(b, n, DType::S64), {1}, "stablehlo.minimum");
  Value info = ir::Select(b, ir::Compare(b, first, I64(b, n, {B}), ir::Cmp::LT),
                          Add(b, first, I64(b, 1, {B})), I64(b, 0, {B}));
  return {L, ir::Convert(b, info, DType::S32)};
}
constexpr lazy::Lowering kCholesky{"aten::linalg_cholesky_ex", &LowerCholesky};

// ---- helpers on the ATen side ----

void CheckFloatMatrix(const char* op, const Tensor& A, const char* name = "A") {
  CheckTpu(op, A, name);
  TORCH_CHECK(A.dim() >= 2, op, ": The input tensor ", name, " must have at least 2 dimensions.");
  TORCH_CHECK(at::isFloatingType(A.scalar_type()), op, ": Expected a floating point tensor as "
              "input. Got ", A.scalar_type());
}
void CheckSquare(const char* op, const Tensor& A, const char* name = "A") {
  CheckFloatMatrix(op, A, name);
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
    return {A.clone(), at::zeros(With(batch, {k}), Tpu(at::kInt)).reshape(With(batch, {k})),
            at::zeros(batch, Tpu(at::kInt))};
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
  if (B == 0 || m == 0) return at::zeros(out, Tpu(at::kLong));
  if (pivots.size(-1) == 0) return at::arange(m, Tpu(at::kLong)).expand(out).contiguous();
  return Run1(kPerm, {{m}, {}, {}}, {OperandOf(pivots.reshape({B, pivots.size(-1)}))},
              TypeOf({B, m}, at::kLong)).reshape(out);
}

// Solves op(A) X = B (left) or X op(A) = B (right) for triangular A with the
// batch dims broadcast.
Tensor TriSolve(const Tensor& A, const Tensor& Bm, bool upper, bool left, bool unit, bool trans) {
  auto batch = at::infer_size(BatchOf(A), BatchOf(Bm));
  const int64_t n = A.size(-1);
  const auto dt = at::promote_types(A.scalar_type(), Bm.scalar_type());
  Tensor a = A.to(dt).expand(With(batch, {n, n}));
  Tensor x = Bm.to(dt).expand(With(batch, {Bm.size(-2), Bm.size(-1)}));
  if (x.numel() == 0) return x.clone();
  Tensor a3 = Flat3(a), x3 = Flat3(x);
  return Run1(kTriSolve, {{left ? 1 : 0, upper ? 0 : 1, unit ? 1 : 0, trans ? 1 : 0}, {}, {}},
              {OperandOf(a3), OperandOf(x3)}, TypeOf(x3.sizes(), dt))
      .reshape(x.sizes());
}

// X with A X = B (adjoint: A^T X = B) from A's LU factors.
Tensor LuSolve(const Tensor& LU, const Tensor& pivots, const Tensor& Bm, bool left, bool adjoint) {
  if (!left) {  // X A = B  <=>  A^T X^T = B^T
    return LuSolve(LU, pivots, Bm.mT(), true, !adjoint).mT();
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
  // A^T = U^T L^T P^T: U^T y = B, L^T z = y, x = P z (x[perm] = z).
  Tensor y = TriSolve(lu, b, /*upper=*/true, true, false, /*trans=*/true);
  Tensor z = TriSolve(lu, y, /*upper=*/false, true, /*unit=*/true, /*trans=*/true);
  Tensor inv = at::argsort(perm, -1, false);
  return at::take_along_dim(z, inv.unsqueeze(-1), -2);
}

// ---- kernels ----

std::tuple<Tensor, Tensor, Tensor> lu_factor_ex_tpu(const Tensor& A, bool pivot, bool check_errors) {
  CheckFloatMatrix("torch.linalg.lu_factor_ex", A);
  TORCH_CHECK(pivot, "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  (void)check_errors;  // checking would wait for the device
  return LuFactor(A);
}
std::tuple<Tensor&, Tensor&, Tensor&> lu_factor_ex_out_tpu(const Tensor& A, bool pivot,
                                                           bool check_errors, Tensor& LU,
                                                           Tensor& pivots, Tensor& info) {
  auto [l, p, i] = lu_factor_ex_tpu(A, pivot, check_errors);
  PrepareOut("linalg_lu_factor_ex", LU, l.sizes(), l.scalar_type());
  PrepareOut("linalg_lu_factor_ex", pivots, p.sizes(), p.scalar_type());
  PrepareOut("linalg_lu_factor_ex", info, i.sizes(), i.scalar_type());
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
    L = at::add(at::tril(LU.narrow(-1, 0, k), -1), at::eye(m, k, Tpu(LU.scalar_type())));
    U = at::triu(LU.narrow(-2, 0, k));
  } else {
    L = at::empty({0}, Tpu(LU.scalar_type()));
    U = at::empty({0}, Tpu(LU.scalar_type()));
  }
  if (unpack_pivots) {
    Tensor perm = PermOf(pivots, m);  // (..., m)
    // A = P L U with P[perm[i], i] = 1
    Tensor r = at::arange(m, Tpu(at::kLong));
    P = at::eq(perm.unsqueeze(-2), r.unsqueeze(-1)).to(LU.scalar_type());
  } else {
    P = at::empty({0}, Tpu(LU.scalar_type()));
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
  CheckFloatMatrix("linalg.lu", A);
  TORCH_CHECK(pivot, "linalg.lu: LU without pivoting is not implemented on the CPU");
  auto [LU, piv, info] = LuFactor(A);
  return Unpack(LU, piv, true, true);
}
std::tuple<Tensor&, Tensor&, Tensor&> linalg_lu_out_tpu(const Tensor& A, bool pivot, Tensor& P,
                                                        Tensor& L, Tensor& U) {
  auto [p, l, u] = linalg_lu_tpu(A, pivot);
  for (auto [dst, src] : {std::pair<Tensor*, Tensor*>{&P, &p}, {&L, &l}, {&U, &u}}) {
    PrepareOut("linalg_lu", *dst, src->sizes(), src->scalar_type());
    dst->copy_(*src);
  }
  return {P, L, U};
}

Tensor lu_solve_tpu(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  CheckSquare("linalg.lu_solve", LU, "LU");
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
  PrepareOut("linalg_lu_solve", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

// sign of the permutation: (-1)^(number of actual swaps)
Tensor PermSign(const Tensor& pivots, at::ScalarType dt) {
  Tensor idx = at::arange(1, pivots.size(-1) + 1, Tpu(at::kInt));
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
    PrepareOut("linalg_det", *dst, src->sizes(), src->scalar_type());
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
    PrepareOut("linalg_slogdet", *dst, src->sizes(), src->scalar_type());
    dst->copy_(*src);
  }
  return {sign, logabsdet, LU, pivots};
}

std::tuple<Tensor, Tensor> linalg_inv_ex_tpu(const Tensor& A, bool check_errors) {
  CheckSquare("linalg.inv", A);
  (void)check_errors;
  auto [LU, piv, info] = LuFactor(A);
  Tensor eye = at::eye(A.size(-1), Tpu(A.scalar_type())).expand(A.sizes());
  return {LuSolve(LU, piv, eye, true, false), info};
}
std::tuple<Tensor&, Tensor&> linalg_inv_ex_out_tpu(const Tensor& A, bool check_errors, Tensor& inv,
                                                   Tensor& info) {
  auto [i, f] = linalg_inv_ex_tpu(A, check_errors);
  PrepareOut("linalg_inv_ex", inv, i.sizes(), i.scalar_type());
  PrepareOut("linalg_inv_ex", info, f.sizes(), f.scalar_type());
  inv.copy_(i);
  info.copy_(f);
  return {inv, info};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> linalg_solve_ex_tpu(const Tensor& A, const Tensor& B,
                                                               bool left, bool check_errors) {
  CheckSquare("linalg.solve", A);
  CheckTpu("linalg.solve", B, "B");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "linalg.solve: Expected A and B to have the "
              "same dtype, but found A of type ", A.scalar_type(), " and B of type ",
              B.scalar_type(), " instead");
  (void)check_errors;
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
    PrepareOut("linalg_solve_ex", *dst, src->sizes(), src->scalar_type());
    dst->copy_(*src);
  }
  return {result, LU, pivots, info};
}

// ---- Cholesky ----

std::tuple<Tensor, Tensor> Cholesky(const Tensor& A, bool upper) {
  const int64_t n = A.size(-1);
  auto batch = BatchOf(A);
  const int64_t B = c10::multiply_integers(batch);
  if (A.numel() == 0) return {A.clone(), at::zeros(batch, Tpu(at::kInt))};
  auto r = Run(kCholesky, {{upper ? 1 : 0}, {}, {}}, {OperandOf(Flat3(A))},
               {TypeOf({B, n, n}, A.scalar_type()), TypeOf({B}, at::kInt)});
  return {r[0].reshape(A.sizes()), r[1].reshape(batch)};
}
std::tuple<Tensor, Tensor> cholesky_ex_tpu(const Tensor& A, bool upper, bool check_errors) {
  CheckSquare("linalg.cholesky", A);
  (void)check_errors;
  return Cholesky(A, upper);
}
std::tuple<Tensor&, Tensor&> cholesky_ex_out_tpu(const Tensor& A, bool upper, bool check_errors,
                                                 Tensor& L, Tensor& info) {
  auto [l, i] = cholesky_ex_tpu(A, upper, check_errors);
  PrepareOut("linalg_cholesky_ex", L, l.sizes(), l.scalar_type());
  PrepareOut("linalg_cholesky_ex", info, i.sizes(), i.scalar_type());
  L.copy_(l);
  info.copy_(i);
  return {L, info};
}
Tensor cholesky_tpu(const Tensor& A, bool upper) {
  CheckSquare("cholesky", A);
  return std::get<0>(Cholesky(A, upper));
}
Tensor& cholesky_out_tpu(const Tensor& A, bool upper, Tensor& out) {
  Tensor r = cholesky_tpu(A, upper);
  PrepareOut("cholesky", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}
// X with (L L^H) X = B, L lower (or U^H U with U upper).
Tensor cholesky_solve_helper_tpu(const Tensor& B, const Tensor& A, bool upper) {
  Tensor y = TriSolve(A, B, upper, true, false, /*trans=*/upper);
  return TriSolve(A, y, upper, true, false, /*trans=*/!upper);
}
Tensor cholesky_inverse_tpu(const Tensor& A, bool upper) {
  CheckSquare("cholesky_inverse", A, "input");
  Tensor eye = at::eye(A.size(-1), Tpu(A.scalar_type())).expand(A.sizes());
  return cholesky_solve_helper_tpu(eye, A, upper);
}
Tensor& cholesky_inverse_out_tpu(const Tensor& A, bool upper, Tensor& out) {
  Tensor r = cholesky_inverse_tpu(A, upper);
  PrepareOut("cholesky_inverse", out, r.sizes(), r.scalar_type());
  return out.copy_(r);
}

// ---- triangular solves ----

Tensor solve_triangular_tpu(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  CheckSquare("linalg.solve_triangular", A);
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
  CheckSquare("triangular_solve", A);
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
}

}  // namespace tpu::ops
