"""Ops added for OpInfo coverage, on tpu against CPU with fresh random
inputs, forward and backward: ctc_loss (_ctc_loss, _ctc_loss_backward)
and the others listed by section below."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- ctc_loss --

def _ctc_inputs(T=12, N=4, C=6, S=5, concat=False, zero_len=False, impossible=False):
    logits = torch.randn(T, N, C)
    lp = logits.log_softmax(2)
    targets = torch.randint(1, C, (N, S))
    if impossible:
        targets[0, :3] = 2  # repeats need blanks between them: 3 + 2 > T for T = 4
    il = torch.randint(max(T // 2, 1), T + 1, (N,))
    il[0] = T
    tl = torch.randint(1, S + 1, (N,))
    tl[min(1, N - 1)] = S
    if zero_len:
        tl[min(2, N - 1)] = 0
    if impossible:
        tl[0] = 3
    if concat:
        targets = torch.cat([targets[i, :tl[i]] for i in range(N)])
    return lp, targets, il, tl


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("concat", [False, True], ids=["padded", "concat"])
def test_ctc_loss(reduction, concat):
    lp, targets, il, tl = _ctc_inputs(concat=concat, zero_len=True)
    compare_grad(lambda x: F.ctc_loss(x, targets.to(x.device), il.to(x.device), tl.to(x.device),
                                      reduction=reduction), lp, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_zero_infinity(zero_infinity):
    lp, targets, il, tl = _ctc_inputs(T=4, S=3, impossible=True)
    il[0] = 4

    def fn(x):
        return F.ctc_loss(x, targets.to(x.device), il.to(x.device), tl.to(x.device),
                          reduction="sum" if zero_infinity else "none", zero_infinity=zero_infinity)
    if zero_infinity:
        compare_grad(fn, lp, atol=1e-4, rtol=1e-4)
    else:  # the impossible element's loss is inf (its gradient NaN, as on CPU)
        c, t = fn(lp), fn(lp.to(TPU))
        assert torch.isinf(c[0]) and torch.isinf(t[0].cpu())
        assert_close(t.cpu(), c)


def test_ctc_loss_int_list_lengths_blank_and_cpu_lengths():
    lp, targets, il, tl = _ctc_inputs(T=10, N=3, C=5, S=4)
    blank = 4
    targets = torch.where(targets == blank, 0, targets)
    compare_grad(lambda x: F.ctc_loss(x, targets.to(x.device), il.tolist(), tl.tolist(),
                                      blank=blank), lp, atol=1e-4, rtol=1e-4)
    # lengths left on the CPU, log_probs on tpu
    x = lp.to(TPU).requires_grad_()
    out = F.ctc_loss(x, targets.to(TPU), il, tl, blank=blank)
    assert_close(out.cpu(), F.ctc_loss(lp, targets, il, tl, blank=blank), atol=1e-4, rtol=1e-4)


def test_ctc_loss_unbatched_and_raw():
    lp, targets, il, tl = _ctc_inputs(N=1)
    compare_grad(lambda x: F.ctc_loss(x[:, 0], targets[0].to(x.device), il[0].to(x.device),
                                      tl[0].to(x.device)), lp, atol=1e-4, rtol=1e-4)
    nll_c, _ = torch._ctc_loss(lp, targets, il.tolist(), tl.tolist())
    nll_t, alpha_t = torch._ctc_loss(lp.to(TPU), targets.to(TPU), il.tolist(), tl.tolist())
    assert alpha_t.shape == (1, lp.shape[0], 2 * int(tl.max()) + 1)
    assert_close(nll_t.cpu(), nll_c, atol=1e-4, rtol=1e-4)


def test_ctc_loss_errors():
    lp, targets, il, tl = _ctc_inputs()
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(lp.to(TPU), targets.to(TPU), il.tolist(), tl.tolist(), blank=6)
    with pytest.raises(RuntimeError, match="input_lengths must be of size batch_size"):
        torch._ctc_loss(lp.to(TPU), targets.to(TPU), il.tolist()[:2], tl.tolist())


# ------------------------------------------------------------ small ops --

def test_rsub_nansum_addbmm_angle(highest_matmul_precision):
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    compare_grad(lambda a, b: torch.rsub(a, b, alpha=2), x, y)
    xn = x.clone()
    xn[0, 1] = float("nan")
    compare_grad(lambda a: torch.nansum(a, 1), xn)
    compare_grad(lambda a: torch.nanmean(a), xn)
    m, b1, b2 = torch.randn(3, 4), torch.randn(5, 3, 2), torch.randn(5, 2, 4)
    compare_grad(lambda a, b, c: torch.addbmm(a, b, c, beta=0.5, alpha=2), m, b1, b2, atol=1e-4,
                 rtol=1e-4)
    compare_grad(lambda a: torch.angle(a), torch.tensor([-1.0, 0.0, 2.0, float("nan")]),
                 equal_nan=True)
    out = torch.empty(0, device=TPU)
    torch.amax(x.to(TPU), 1, out=out)
    assert_close(out.cpu(), x.amax(1))


def test_gcd_lcm_frexp():
    a = torch.randint(-50, 50, (6, 7))
    b = torch.randint(-50, 50, (7,))
    assert_close(torch.gcd(a.to(TPU), b.to(TPU)).cpu(), torch.gcd(a, b))
    assert_close(torch.lcm(a.to(TPU), b.to(TPU)).cpu(), torch.lcm(a, b))
    x = torch.cat([torch.randn(20) * 1e3, torch.tensor([0.0, -0.0, 3e-38, -3.0, 0.5, 1.0])])  # no subnormals: XLA flushes them
    mc, ec = torch.frexp(x)
    mt, et = torch.frexp(x.to(TPU))
    assert et.dtype == torch.int32
    assert_close(mt.cpu(), mc)
    assert_close(et.cpu(), ec)


def test_index_reduce_unfold_backward_batch_norm_update():
    for reduce in ["prod", "mean", "amax", "amin"]:
        for include_self in [True, False]:
            compare_grad(lambda s, src: s.index_reduce(0, torch.tensor([0, 2, 0, 1], device=s.device),
                                                        src, reduce, include_self=include_self),
                         torch.randn(3, 4), torch.randn(4, 4))
    compare_grad(lambda a: a.unfold(1, 3, 2), torch.randn(2, 9, 3))
    x = torch.randn(4, 3, 5)
    rm, rv = torch.zeros(3), torch.ones(3)
    rmt, rvt = rm.to(TPU), rv.to(TPU)
    compare_grad(lambda a, w, b: torch.ops.aten._batch_norm_with_update(
        a, w, b, rm if a.device.type == "cpu" else rmt, rv if a.device.type == "cpu" else rvt,
        0.1, 1e-5)[0], x, torch.randn(3), torch.randn(3), atol=1e-4, rtol=1e-4)
    assert_close(rmt.cpu(), rm)
    assert_close(rvt.cpu(), rv)


def test_random_distributions_shapes_and_ranges():
    x = torch.empty(1000, device=TPU)
    assert (x.exponential_(2.0).cpu() >= 0).all()
    assert (x.geometric_(0.3).cpu() >= 1).all()
    assert (x.log_normal_().cpu() > 0).all()
    assert torch.isfinite(x.cauchy_().cpu()).all()
    m = torch.normal(torch.zeros(3, 1, device=TPU), torch.ones(4, device=TPU))
    assert m.shape == (3, 4)
    assert abs(torch.normal(5.0, torch.full((4000,), 0.1, device=TPU)).mean().item() - 5.0) < 0.05


# ---------------------------------------------------------------- linalg --

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

@pytest.mark.parametrize("fn", [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
    "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"])
def test_orthogonal_polynomials(fn):
    f = getattr(torch.special, fn)
    x = torch.rand(6, 7) * 2.4 - 1.2
    x[0, :3] = torch.tensor([1.0, -1.0, 0.0])
    n = torch.randint(-2, 9, (7,)).float()
    assert_close(f(x.to(TPU), n.to(TPU)).cpu(), f(x, n), rtol=1e-4, atol=1e-4)
    assert_close(f(x.to(TPU), 5).cpu(), f(x, 5), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fn", ["i0", "special.i0e", "special.i1", "special.i1e",
                                "special.modified_bessel_i0", "special.modified_bessel_i1"])
def test_bessel_i(fn):
    f = torch.i0 if fn == "i0" else getattr(torch.special, fn.split(".")[1])
    x = torch.cat([torch.randn(50) * 5, torch.tensor([0.0, 40.0, -60.0, 29.9, 30.1])])
    if fn in ("i0", "special.i1", "special.modified_bessel_i0", "special.modified_bessel_i1"):
        x = x.clamp(-80, 80)
    assert_close(f(x.to(TPU)).cpu(), f(x), rtol=1e-4, atol=1e-5)
    if fn in ("i0", "special.i0e", "special.i1", "special.i1e"):
        compare_grad(f, torch.randn(20) * 3, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fn", ["spherical_bessel_j0", "ndtri", "log_ndtr", "erfcx"])
def test_error_function_family(fn):
    f = getattr(torch.special, fn)
    if fn == "ndtri":
        x = torch.rand(100) * 0.98 + 0.01
    else:
        x = torch.cat([torch.randn(100) * 4, torch.tensor([0.0, 0.3, -0.3, 7.0, 30.0, -5.0])])
    assert_close(f(x.to(TPU)).cpu(), f(x), rtol=1e-4, atol=1e-5)
    if fn != "spherical_bessel_j0":
        compare_grad(f, x[:20].clone(), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------- margin losses, mode --

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(reduction, p):
    x, t, w = torch.randn(5, 4), torch.randint(0, 4, (5,)), torch.rand(4)
    compare_grad(lambda a: F.multi_margin_loss(a, t.to(a.device), p=p, margin=0.7,
                                               weight=w.to(a.device), reduction=reduction), x)
    compare_grad(lambda a: F.multi_margin_loss(a, t[0].to(a.device), reduction=reduction), x[0])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    x = torch.randn(4, 5)
    t = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 2, 3, 4], [4, 4, 1, -1, 0]])
    compare_grad(lambda a: F.multilabel_margin_loss(a, t.to(a.device), reduction=reduction), x)


def test_mode_and_conj_physical():
    x = torch.randint(0, 4, (5, 9)).float()
    for dim, keepdim in [(1, False), (0, True)]:
        vc, ic = torch.mode(x, dim, keepdim)
        vt, it = torch.mode(x.to(TPU), dim, keepdim)
        assert_close(vt.cpu(), vc)
        # the index points at an occurrence of the mode
        assert_close(torch.take_along_dim(x, it.cpu() if keepdim else it.cpu().unsqueeze(dim), dim),
                     vc if keepdim else vc.unsqueeze(dim))
    compare_grad(lambda a: torch.mode(a, 1)[0], torch.randn(4, 6))
    c = torch.randn(3, 4, dtype=torch.complex64)
    out = torch.empty(0, dtype=torch.complex64, device=TPU)
    torch.conj_physical(c.to(TPU), out=out)
    assert_close(out.cpu(), c.conj_physical())


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


def test_unique_dim_and_histogram():
    x = torch.randint(0, 3, (7, 3)).float()
    for dim in [0, 1]:
        c = torch.unique(x, dim=dim, return_inverse=True, return_counts=True)
        t = torch.unique(x.to(TPU), dim=dim, return_inverse=True, return_counts=True)
        for a, b in zip(t, c):
            assert_close(a.cpu(), b)
    v, w = torch.randn(100), torch.rand(100)
    for kw in [{}, {"range": (-1.0, 1.5)}, {"weight": w}, {"density": True, "weight": w}]:
        hc, ec = torch.histogram(v, 7, **kw)
        kwt = {k: (a.to(TPU) if isinstance(a, torch.Tensor) else a) for k, a in kw.items()}
        ht, et = torch.histogram(v.to(TPU), 7, **kwt)
        assert_close(et.cpu(), ec)
        assert_close(ht.cpu(), hc, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("initial", [None, 1.5])
def test_segment_reduce(reduce, initial):
    data = torch.randn(7, 3)
    data[3, 1] = 0.0
    lengths = torch.tensor([2, 0, 3, 2])
    kw = {} if initial is None else {"initial": initial}
    compare_grad(lambda d: torch.segment_reduce(d, reduce, lengths=lengths.to(d.device), **kw),
                 data, equal_nan=True, atol=1e-5, rtol=1e-5)
    offsets = torch.tensor([0, 2, 2, 5, 7])
    compare_grad(lambda d: torch.segment_reduce(d, reduce, offsets=offsets.to(d.device), axis=0,
                                                **kw), data, equal_nan=True, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac])
def test_igamma(fn):
    a = torch.cat([torch.rand(200) * 9 + 0.01, torch.tensor([0.0, 1.0, -1.0, 2.0, float("inf")])])
    x = torch.cat([torch.rand(200) * 12, torch.tensor([1.0, 0.0, 1.0, float("inf"), 3.0])])
    assert_close(fn(a.to(TPU), x.to(TPU)).cpu(), fn(a, x), atol=2e-5, rtol=1e-4, equal_nan=True)


@pytest.mark.parametrize("fn", [torch.special.bessel_j0, torch.special.bessel_j1])
def test_bessel_j(fn):
    x = torch.cat([torch.randn(200) * 6, torch.tensor([0.0, 7.99, 8.0, 8.01, -12.0, 30.0])])
    assert_close(fn(x.to(TPU)).cpu(), fn(x), atol=1e-4, rtol=1e-4)


def test_hash_tensor():
    x = torch.randn(4, 5)
    for kw in [{}, {"dim": 1}, {"dim": (0, 1), "keepdim": True}]:
        t, c = torch.hash_tensor(x.to(TPU), **kw).cpu(), torch.hash_tensor(x, **kw)
        assert t.dtype == c.dtype and t.shape == c.shape and t.tolist() == c.tolist()
    i = torch.randint(-100, 100, (6,), dtype=torch.int32)
    assert torch.hash_tensor(i.to(TPU)).cpu().tolist() == torch.hash_tensor(i).tolist()
