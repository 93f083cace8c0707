"""Factorizations and solves on tpu against CPU: LU, det/slogdet/inv/solve,
Cholesky and triangular solves, SVD, eigh, QR, Householder products, lstsq."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- ctc_loss --

def _well_conditioned(*shape):
    a = torch.randn(*shape)
    return a + shape[-1] * torch.eye(shape[-1])


def _spd(*shape):
    a = torch.randn(*shape)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1])


def test_lu_family(highest_matmul_precision):
    A = torch.randn(3, 5, 5)
    compare_grad(lambda a: torch.linalg.lu_factor(a)[0], A, atol=1e-4, rtol=1e-4)
    LU, piv = torch.linalg.lu_factor(A)
    assert_close(torch.linalg.lu_factor(A.to(TPU))[1].cpu(), piv)
    compare_grad(lambda a: torch.linalg.lu(a)[1], torch.randn(4, 6), atol=1e-4, rtol=1e-4)
    compare_grad(lambda a: torch.linalg.lu(a)[2], torch.randn(6, 4), atol=1e-4, rtol=1e-4)
    P, L, U = torch.linalg.lu(A.to(TPU))
    assert_close((P @ L @ U).cpu(), A, atol=1e-4, rtol=1e-4)
    LU, piv = torch.linalg.lu_factor(_well_conditioned(3, 5, 5))
    B = torch.randn(3, 5, 2)
    for left in [True, False]:
        for adjoint in [False, True]:
            rhs = B if left else B.mT
            compare_grad(lambda lu, b: torch.linalg.lu_solve(lu, piv.to(lu.device), b, left=left,
                                                             adjoint=adjoint), LU, rhs,
                         atol=1e-3, rtol=1e-3)


def test_det_slogdet_inv_solve(highest_matmul_precision):
    A = _well_conditioned(2, 4, 4)
    compare_grad(torch.linalg.det, A, atol=1e-3, rtol=1e-4)
    compare_grad(lambda a: torch.linalg.slogdet(a)[1], A, atol=1e-4, rtol=1e-4)
    compare_grad(lambda a: torch.linalg.slogdet(a)[0], A)
    compare_grad(torch.linalg.inv, A, atol=1e-4, rtol=1e-4)
    compare_grad(torch.linalg.solve, A, torch.randn(2, 4, 3), atol=1e-4, rtol=1e-4)
    compare_grad(torch.linalg.solve, A, torch.randn(2, 4), atol=1e-4, rtol=1e-4)  # vectors
    compare_grad(lambda a, b: torch.linalg.solve(a, b, left=False), A, torch.randn(3, 4),
                 atol=1e-4, rtol=1e-4)
    # a singular matrix: det 0, info > 0
    S = torch.ones(3, 3)
    assert torch.linalg.det(S.to(TPU)).item() == 0
    assert torch.linalg.lu_factor_ex(S.to(TPU)).info.item() == torch.linalg.lu_factor_ex(S).info.item()


def test_cholesky_and_triangular(highest_matmul_precision):
    A = _spd(3, 4, 4)
    for upper in [False, True]:
        compare_grad(lambda a: torch.linalg.cholesky(a, upper=upper), A, atol=1e-4, rtol=1e-4)
    L = torch.linalg.cholesky(A)
    compare_grad(lambda l, b: torch.cholesky_solve(b, l), L, torch.randn(3, 4, 2), atol=1e-4,
                 rtol=1e-4)
    compare_grad(torch.cholesky_inverse, L[0], atol=1e-4, rtol=1e-4)
    info = torch.linalg.cholesky_ex(-A.to(TPU)).info
    assert (info.cpu() > 0).all()
    T = torch.randn(4, 4).triu() + 4 * torch.eye(4)
    B = torch.randn(2, 4, 3)
    for left in [True, False]:
        for unit in [False, True]:
            rhs = B if left else B.mT
            compare_grad(lambda t, b: torch.linalg.solve_triangular(t, b, upper=True, left=left,
                                                                    unitriangular=unit), T, rhs,
                         atol=1e-4, rtol=1e-4)
    compare_grad(lambda b, t: torch.triangular_solve(b, t, upper=False, transpose=True)[0],
                 torch.randn(4, 2), T.mT, atol=1e-4, rtol=1e-4)


# --------------------------------------------------------------- special --

def _gauge_free_svd(u, s, vh):
    # U diag(S) Vh and |U|, |Vh| do not depend on the signs LAPACK picks
    return (u * s.unsqueeze(-2)) @ vh, u.abs(), vh.abs()


@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (2, 3, 7)])
def test_svd(shape, highest_matmul_precision):
    A = torch.randn(*shape)
    compare_grad(torch.linalg.svdvals, A, atol=1e-4, rtol=1e-4)
    uc, sc, vhc = torch.linalg.svd(A, full_matrices=False)
    ut, st, vht = (t.cpu() for t in torch.linalg.svd(A.to(TPU), full_matrices=False))
    for c, t in zip(_gauge_free_svd(uc, sc, vhc), _gauge_free_svd(ut, st, vht)):
        assert_close(t, c, atol=1e-4, rtol=1e-4)
    compare_grad(torch.linalg.pinv, A, atol=1e-4, rtol=1e-4)
    compare_grad(lambda a: torch.linalg.matrix_norm(a, "nuc"), A, atol=1e-4, rtol=1e-4)
    assert torch.linalg.matrix_rank(torch.ones(4, 4, device=TPU)).item() == 1


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(uplo, highest_matmul_precision):
    A = torch.randn(3, 5, 5)
    compare_grad(lambda a: torch.linalg.eigvalsh(a, UPLO=uplo), A, atol=1e-4, rtol=1e-4)
    S = A + A.mT
    wc, vc = torch.linalg.eigh(S)
    wt, vt = (t.cpu() for t in torch.linalg.eigh(S.to(TPU)))
    assert_close(wt, wc, atol=1e-4, rtol=1e-4)
    assert_close(vt.abs(), vc.abs(), atol=1e-4, rtol=1e-4)
    assert_close((vt * wt.unsqueeze(-2)) @ vt.mT, S, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (2, 3, 5)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(shape, mode, highest_matmul_precision):
    A = torch.randn(*shape)
    if mode == "r":
        assert_close(torch.linalg.qr(A.to(TPU), mode="r")[1].cpu(), torch.linalg.qr(A, mode="r")[1],
                     atol=1e-4, rtol=1e-4)
        return
    if mode == "complete" and shape[-2] > shape[-1]:  # Q's extra columns have no gradient
        qc, rc = torch.linalg.qr(A, mode=mode)
        qt, rt = torch.linalg.qr(A.to(TPU), mode=mode)
        assert_close(qt.cpu(), qc, atol=1e-4, rtol=1e-4)
        assert_close(rt.cpu(), rc, atol=1e-4, rtol=1e-4)
        return
    compare_grad(lambda a: torch.linalg.qr(a, mode=mode), A, atol=1e-4, rtol=1e-4)


def test_geqrf_householder_ormqr(highest_matmul_precision):
    A = torch.randn(6, 4)
    ac, tc = torch.geqrf(A)
    at_, tt = torch.geqrf(A.to(TPU))
    assert_close(at_.cpu(), ac, atol=1e-4, rtol=1e-4)
    assert_close(tt.cpu(), tc, atol=1e-4, rtol=1e-4)
    compare_grad(torch.linalg.householder_product, ac, tc, atol=1e-4, rtol=1e-4)
    C = torch.randn(6, 3)
    for left, transpose in [(True, False), (True, True), (False, False)]:
        c = C if left else C.mT
        compare_grad(lambda a, t, cc: torch.ormqr(a, t, cc, left=left, transpose=transpose),
                     ac, tc, c, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("driver", ["gels", "gelsy", "gelsd", "gelss"])
def test_lstsq(driver, highest_matmul_precision):
    A, B = torch.randn(2, 6, 4), torch.randn(2, 6, 3)
    sc = torch.linalg.lstsq(A, B, driver=driver)
    st = torch.linalg.lstsq(A.to(TPU), B.to(TPU), driver=driver)
    for c, t in zip(sc, st):
        assert t.shape == c.shape and t.dtype == c.dtype, (t.shape, c.shape)
        assert_close(t.cpu(), c, atol=1e-4, rtol=1e-4)
    compare_grad(lambda a, b: torch.linalg.lstsq(a, b, driver=driver).solution, A, B, atol=1e-4,
                 rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("upper", [False, True])
def test_complex_cholesky_family(dtype, upper, highest_matmul_precision):
    # stablehlo.cholesky and triangular_solve take complex types; the
    # solves with the factor use its conjugate transpose (ADJOINT)
    x = torch.randn(3, 5, 5, dtype=dtype)
    a = x @ x.mH + 5 * torch.eye(5, dtype=dtype)
    b = torch.randn(3, 5, 2, dtype=dtype)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.complex64 else dict(rtol=1e-10, atol=1e-12)
    f = torch.linalg.cholesky(a, upper=upper)
    ft = torch.linalg.cholesky(a.to("tpu"), upper=upper)
    torch.testing.assert_close(ft.cpu(), f, **tol)
    torch.testing.assert_close(torch.cholesky_solve(b.to("tpu"), ft, upper=upper).cpu(),
                               torch.cholesky_solve(b, f, upper=upper), **tol)
    torch.testing.assert_close(torch.cholesky_inverse(ft, upper=upper).cpu(),
                               torch.cholesky_inverse(f, upper=upper), **tol)
    torch.testing.assert_close(
        torch.linalg.solve_triangular(ft, b.to("tpu"), upper=upper).cpu(),
        torch.linalg.solve_triangular(f, b, upper=upper), **tol)
    assert torch.linalg.cholesky_ex((-a).to("tpu")).info.cpu().tolist() == [1, 1, 1]


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_lu_family(dtype, highest_matmul_precision):
    # complex LU with LAPACK's pivot choice (|re| + |im|), and the solves
    # built on it: inverse, solve from either side, lu_solve with adjoint
    a = torch.randn(3, 5, 5, dtype=dtype)
    b = torch.randn(3, 5, 2, dtype=dtype)
    br = torch.randn(3, 2, 5, dtype=dtype)
    at = a.to("tpu")
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.complex64 else dict(rtol=1e-10, atol=1e-12)
    lu, piv = torch.linalg.lu_factor(a)
    lut, pivt = torch.linalg.lu_factor(at)
    assert torch.equal(pivt.cpu(), piv)
    torch.testing.assert_close(lut.cpu(), lu, **tol)
    torch.testing.assert_close(torch.linalg.inv(at).cpu(), torch.linalg.inv(a), **tol)
    torch.testing.assert_close(torch.linalg.solve(at, b.to("tpu")).cpu(), torch.linalg.solve(a, b), **tol)
    torch.testing.assert_close(torch.linalg.solve(at, br.to("tpu"), left=False).cpu(),
                               torch.linalg.solve(a, br, left=False), **tol)
    for left, rhs in ((True, b), (False, br)):
        torch.testing.assert_close(
            torch.linalg.lu_solve(lut, pivt, rhs.to("tpu"), left=left, adjoint=True).cpu(),
            torch.linalg.lu_solve(lu, piv, rhs, left=left, adjoint=True), **tol)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_svd_eigh_qr_lstsq(dtype, highest_matmul_precision):
    # the Jacobi SVD and eigh turn each complex pair by the phase that makes
    # it real and rotate as for real values; QR's reflectors are LAPACK's
    # (beta real, tau = (beta - alpha) / beta), so geqrf matches CPU entry by entry
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.complex64 else dict(rtol=1e-10, atol=1e-11)
    for shape in [(2, 6, 4), (3, 5), (4, 4)]:
        a = torch.randn(*shape, dtype=dtype)
        U, S, Vh = torch.linalg.svd(a.to(TPU), full_matrices=False)
        assert S.dtype == S.real.dtype and U.dtype == dtype and Vh.dtype == dtype
        assert_close(S.cpu(), torch.linalg.svdvals(a), **tol)
        assert_close((U * S.to(dtype).unsqueeze(-2) @ Vh).cpu(), a, **tol)
        k = min(shape[-2:])
        eye = torch.eye(k, dtype=dtype).expand(*shape[:-2], k, k)
        assert_close((U.mH @ U).cpu(), eye, **tol)
        assert_close((Vh @ Vh.mH).cpu(), eye, **tol)
        q, r = torch.linalg.qr(a.to(TPU))
        qc, rc = torch.linalg.qr(a)
        assert_close(q.cpu(), qc, **tol)
        assert_close(r.cpu(), rc, **tol)
        g, tau = torch.geqrf(a.to(TPU))
        gc, tauc = torch.geqrf(a)
        assert_close(g.cpu(), gc, **tol)
        assert_close(tau.cpu(), tauc, **tol)
        if shape[-2] >= shape[-1]:
            assert_close(torch.linalg.householder_product(gc.to(TPU), tauc.to(TPU)).cpu(),
                         torch.linalg.householder_product(gc, tauc), **tol)
        c = torch.randn(*shape[:-2], shape[-2], 3, dtype=dtype)
        assert_close(torch.ormqr(g, tau, c.to(TPU), transpose=True).cpu(),
                     torch.ormqr(gc, tauc, c, transpose=True), **tol)
    x = torch.randn(3, 5, 5, dtype=dtype)
    h = x + x.mH
    for uplo in ("L", "U"):
        # only the named triangle is read, and the diagonal's real part
        noisy = h.clone()
        noisy.diagonal(0, -2, -1).imag.add_(7)
        (noisy.triu(1) if uplo == "L" else noisy.tril(-1)).add_(3)
        w, v = torch.linalg.eigh(noisy.to(TPU), UPLO=uplo)
        assert w.dtype == h.real.dtype
        assert_close(w.cpu(), torch.linalg.eigvalsh(h), **tol)
        assert_close((v * w.to(dtype).unsqueeze(-2) @ v.mH).cpu(), h, **tol)
    a = torch.randn(2, 7, 3, dtype=dtype)
    b = torch.randn(2, 7, 2, dtype=dtype)
    for driver in ("gels", "gelsd"):
        st = torch.linalg.lstsq(a.to(TPU), b.to(TPU), driver=driver)
        sc = torch.linalg.lstsq(a, b, driver=driver)
        for t, c in zip(st, sc):
            assert t.shape == c.shape and t.dtype == c.dtype
            assert_close(t.cpu(), c, **tol)


def test_conjugate_views_reach_kernels_as_their_values():
    # a conj / negative view handed to a kernel is read as what it shows
    z = torch.complex(torch.randn(4, 4), torch.randn(4, 4))
    zt = z.to("tpu")
    assert_close(torch.linalg.solve_triangular(zt.triu(), zt.mH, upper=True).cpu(),
                 torch.linalg.solve_triangular(z.triu(), z.mH, upper=True))
    x = torch.randn(5)
    assert_close(torch.add(x.to("tpu")._neg_view(), 1).cpu(), -x + 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex128])
def test_info_names_the_first_failing_minor_and_check_errors_raises(dtype):
    # XLA leaves a failed Cholesky factor all NaN; info is still LAPACK's:
    # the order of the first leading minor that is not positive-definite
    a = torch.eye(4, dtype=dtype).repeat(4, 1, 1)
    a[1, 2, 2] = 0
    a[2, 0:2, 0:2] = torch.tensor([[1.0, 2.0], [2.0, 1.0]])  # second minor negative
    a[3, 3, 3] = -1
    for upper in (False, True):
        got = torch.linalg.cholesky_ex(a.to(TPU), upper=upper).info.cpu()
        assert got.tolist() == torch.linalg.cholesky_ex(a, upper=upper).info.tolist() == [0, 3, 2, 4]
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 1\): The factorization"):
        torch.linalg.cholesky_ex(a.to(TPU), check_errors=True)
    s = torch.eye(3, dtype=dtype)
    s[-1, -1] = 0
    with pytest.raises(torch.linalg.LinAlgError, match="diagonal element 3 is zero"):
        torch.linalg.inv_ex(s.to(TPU), check_errors=True)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.solve_ex(s.to(TPU), torch.ones(3, dtype=dtype, device=TPU), check_errors=True)
    with pytest.raises(RuntimeError, match=r"U\[3,3\] is zero"):  # CPU's error
        torch.linalg.lu_factor_ex(s.to(TPU), check_errors=True)
    assert torch.linalg.inv_ex(s.to(TPU)).info.item() == 3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
def test_matrix_exp_matches_cpu_over_scales(dtype, highest_matmul_precision):
    # scaling and squaring: each matrix of a batch squares its own number of
    # times (a tiny and a large matrix side by side)
    tol = dict(rtol=5e-5, atol=1e-5) if dtype in (torch.float32, torch.complex64) else dict(rtol=1e-12, atol=1e-13)
    for scale in (0.001, 0.5, 6.0):
        a = torch.randn(3, 5, 5, dtype=dtype) * scale
        a[1] *= 1e-3
        a[2] *= 2
        assert_close(torch.linalg.matrix_exp(a.to(TPU)).cpu(), torch.linalg.matrix_exp(a), **tol)
    assert_close(torch.linalg.matrix_exp(torch.zeros(2, 3, 3, dtype=dtype, device=TPU)).cpu(),
                 torch.eye(3, dtype=dtype).expand(2, 3, 3))
    if dtype == torch.float64:
        compare_grad(torch.linalg.matrix_exp, torch.randn(4, 4, dtype=dtype), atol=1e-8, rtol=1e-8)


def test_eig_and_eigvals_match_cpu_with_its_errors():
    a = torch.randn(2, 5, 5, dtype=torch.float64)
    w, v = torch.linalg.eig(a.to(TPU))
    assert w.device.type == "tpu" and w.dtype == torch.complex128
    assert_close((v @ torch.diag_embed(w) @ torch.linalg.inv(v)).cpu(), a.to(torch.complex128))
    assert_close(torch.linalg.eigvals(a.to(TPU)).cpu(), torch.linalg.eigvals(a))
    wo = torch.empty(0, dtype=torch.complex128, device=TPU)
    vo = torch.empty(0, dtype=torch.complex128, device=TPU)
    torch.linalg.eig(a.to(TPU), out=(wo, vo))
    assert_close(wo.cpu(), w.cpu())
    with pytest.raises(RuntimeError, match="should not contain infs or NaNs"):
        torch.linalg.eig(torch.tensor([[1.0, float("nan")], [0.0, 1.0]], device=TPU))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.linalg.eigvals(torch.ones(3, device=TPU))
    with pytest.raises(RuntimeError, match="Expected eigenvalues to be safely castable"):
        torch.linalg.eig(a.to(TPU), out=(torch.empty(0, dtype=torch.float64, device=TPU), vo))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_lstsq_of_empty_matrices_and_batches_as_cpu(dtype):
    for sa, sb in [((0, 0, 3, 3), (0, 0, 3, 2)), ((2, 2, 0, 0), (2, 2, 0, 0)),
                   ((2, 2, 3, 0), (2, 2, 3, 0)), ((2, 2, 3, 0), (2, 2, 3, 2))]:
        a, b = torch.rand(*sa, dtype=dtype), torch.rand(*sb, dtype=dtype)
        for driver in ("gelsy", "gelsd"):
            want = torch.linalg.lstsq(a, b, driver=driver)
            got = torch.linalg.lstsq(a.to(TPU), b.to(TPU), driver=driver)
            for w, g in zip(want, got):
                assert g.device.type == "tpu" and g.shape == w.shape and g.dtype == w.dtype
                assert torch.equal(g.cpu(), w)
