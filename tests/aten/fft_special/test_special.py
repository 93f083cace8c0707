"""Special functions, log-sum-exp pairs, vector norms, equal/vdot and the 2-d
NLL loss on tpu against CPU, forward and backward."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import _compare

TPU = torch.device("tpu")


def compare_grad(fn, *inputs, rtol=None, atol=None):
    _compare.compare_grad(fn, *inputs, rtol=rtol, atol=atol, equal_nan=True)


# ------------------------------------------------------- special functions --

def test_lgamma_digamma():
    x = torch.randn(500) * 4
    x = x[(x - x.round()).abs() > 1e-2]  # away from the poles
    compare_grad(torch.lgamma, x, atol=1e-4, rtol=1e-4)
    compare_grad(torch.digamma, torch.rand(300) * 20 + 0.05, atol=1e-4, rtol=1e-4)
    edge = torch.tensor([0.0, -0.0, -1.0, -3.0, 1.0, float("inf")])
    assert_close(torch.digamma(edge.to(TPU)).cpu(), torch.digamma(edge), equal_nan=True)
    assert_close(torch.lgamma(torch.arange(1, 6).to(TPU)).cpu(),
                 torch.lgamma(torch.arange(1, 6)), atol=1e-5, rtol=1e-5)


def test_polygamma_erfinv():
    x = torch.rand(300) * 10 + 0.1
    for n in [0, 1, 2, 3]:
        compare_grad(lambda t: torch.polygamma(n, t), x, atol=1e-4, rtol=1e-4)
    # Negative arguments (reflection formula), away from the poles.
    xn = -torch.rand(200) * 20 - 0.05
    xn = xn[(xn - xn.round()).abs() > 0.05]
    for n in [0, 1, 2, 3]:
        expected = torch.polygamma(n, xn)
        assert_close(torch.polygamma(n, xn.to(TPU)).cpu(), expected, atol=1e-3, rtol=1e-4)
    xt = x.to(TPU)
    assert_close(xt.clone().polygamma_(1).cpu(), x.clone().polygamma_(1), atol=1e-4, rtol=1e-4)
    compare_grad(torch.erfinv, torch.rand(300) * 1.98 - 0.99, atol=1e-5, rtol=1e-4)
    e = torch.tensor([-1.0, 1.0, 0.0, 2.0])
    assert_close(torch.erfinv(e.to(TPU)).cpu(), torch.erfinv(e), equal_nan=True)


def test_round_decimals():
    x = torch.randn(200) * 100
    for d in [1, 2, 3, -1, -2, 0]:
        assert_close(torch.round(x.to(TPU), decimals=d).cpu(), torch.round(x, decimals=d),
                     atol=1e-4, rtol=1e-6)
    y = x.to(TPU)
    y.round_(decimals=1)
    assert_close(y.cpu(), torch.round(x, decimals=1), atol=1e-4, rtol=1e-6)


def test_logsigmoid():
    x = torch.randn(400) * 20
    compare_grad(F.logsigmoid, x, atol=1e-6, rtol=1e-5)
    compare_grad(torch.nn.LogSigmoid(), torch.randn(3, 5).bfloat16(), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("fn", [torch.logaddexp, torch.logaddexp2])
def test_logaddexp(fn):
    a, b = torch.randn(50, 1) * 10, torch.randn(1, 40) * 10
    compare_grad(fn, a, b, atol=1e-5, rtol=1e-5)
    inf = float("inf")
    x = torch.tensor([inf, -inf, inf, -inf, 1.0, float("nan")])
    y = torch.tensor([inf, -inf, -inf, 2.0, -inf, 1.0])
    assert_close(fn(x.to(TPU), y.to(TPU)).cpu(), fn(x, y), equal_nan=True)
    out = torch.empty(6, device=TPU)
    fn(x.to(TPU), y.to(TPU), out=out)
    assert_close(out.cpu(), fn(x, y), equal_nan=True)


# ------------------------------------------------------------------ norms --

@pytest.mark.parametrize("ord", [2, 1, 0, 3, 0.5, float("inf"), -float("inf"), -1])
def test_linalg_vector_norm(ord):
    x = torch.randn(4, 5, 6)
    compare_grad(lambda t: torch.linalg.vector_norm(t, ord), x, atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: torch.linalg.vector_norm(t, ord, dim=(0, 2), keepdim=True), x,
                 atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: torch.linalg.vector_norm(t, ord, dim=-1), x, atol=1e-5, rtol=1e-5)


def test_norm_variants():
    x = torch.randn(6, 7)
    compare_grad(lambda t: t.norm(dim=1), x, atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: torch.norm(t, p=1, dim=0, keepdim=True), x, atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: torch.norm(t), x, atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: F.normalize(t, dim=1), x, atol=1e-5, rtol=1e-5)
    xb = x.bfloat16()
    assert_close(torch.linalg.vector_norm(xb.to(TPU), dtype=torch.float32).cpu(),
                 torch.linalg.vector_norm(xb, dtype=torch.float32), atol=1e-4, rtol=1e-4)
    assert_close(torch.linalg.vector_norm(xb.to(TPU)).cpu(), torch.linalg.vector_norm(xb),
                 atol=1e-1, rtol=1e-2)
    out = torch.empty(7, device=TPU)
    torch.linalg.vector_norm(x.to(TPU), 3, dim=0, out=out)
    assert_close(out.cpu(), torch.linalg.vector_norm(x, 3, dim=0), atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="floating point"):
        torch.linalg.vector_norm(torch.ones(3, dtype=torch.long, device=TPU))


# ------------------------------------------------------------- equal, vdot --

def test_equal_and_vdot(highest_matmul_precision):
    x = torch.randn(3, 4)
    xt = x.to(TPU)
    assert torch.equal(xt, x.clone().to(TPU))
    y = x.clone()
    y[1, 2] += 1
    assert not torch.equal(xt, y.to(TPU))
    assert not torch.equal(xt, xt[:2])
    nan = torch.tensor([float("nan")], device=TPU)
    assert not torch.equal(nan, nan)
    assert torch.equal(torch.empty(0, device=TPU), torch.empty(0, device=TPU))
    with pytest.raises(RuntimeError, match="scalar type"):
        torch.equal(xt, xt.double())
    a, b = torch.randn(17), torch.randn(17)
    compare_grad(torch.vdot, a, b, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="1D tensors expected"):
        torch.vdot(xt, xt)


# ------------------------------------------------------------- nll_loss2d --

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss2d(reduction):
    logits = torch.randn(2, 5, 4, 3)
    target = torch.randint(0, 5, (2, 4, 3))
    target[0, 0, 0] = -100
    w = torch.rand(5)
    compare_grad(lambda t: F.nll_loss(F.log_softmax(t, 1), target.to(t.device),
                                      reduction=reduction), logits, atol=1e-5, rtol=1e-5)
    target = target.clamp(min=0)
    compare_grad(lambda t: F.cross_entropy(t, target.to(t.device), weight=w.to(t.device),
                                           reduction=reduction, ignore_index=2),
                 logits, atol=1e-5, rtol=1e-5)


def test_nll_loss2d_errors():
    with pytest.raises(RuntimeError, match="spatial targets"):
        torch.ops.aten.nll_loss2d_forward(torch.randn(2, 3, 4, 4, device=TPU),
                                          torch.zeros(2, 4, dtype=torch.long, device=TPU),
                                          None, 1, -100)


# ------------------------------------------ scans, order statistics, misc --

def test_logcumsumexp_cummax_cummin():
    x = torch.randn(5, 7) * 3
    compare_grad(lambda t: torch.logcumsumexp(t, 1), x, atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: torch.logcumsumexp(t, 0), x, atol=1e-5, rtol=1e-5)
    xi = torch.randint(0, 4, (5, 7)).float()  # ties: the last index, as on CPU
    xi[2, 3] = float("nan")
    for fn in [torch.cummax, torch.cummin]:
        for dim in [0, 1]:
            ev, ei = fn(xi, dim)
            av, ai = fn(xi.to(TPU), dim)
            assert_close(av.cpu(), ev, equal_nan=True)
            assert torch.equal(ai.cpu(), ei)
    compare_grad(lambda t: torch.cummax(t, 1).values, torch.randn(4, 6))
    ii = torch.randint(0, 9, (3, 8))
    assert torch.equal(torch.cummin(ii.to(TPU), 1).values.cpu(), torch.cummin(ii, 1).values)


def test_median_kthvalue():
    x = torch.randn(6, 9)
    for k in [1, 4, 9]:
        ev, ei = torch.kthvalue(x, k, 1)
        av, ai = torch.kthvalue(x.to(TPU), k, 1)
        assert_close(av.cpu(), ev)
        assert torch.equal(ai.cpu(), ei)
    compare_grad(lambda t: torch.kthvalue(t, 2, 0, keepdim=True).values, x)
    compare_grad(lambda t: torch.median(t, 1).values, x)
    compare_grad(torch.median, x)
    xn = x.clone()
    xn[2, 3] = float("nan")
    ev, ei = torch.median(xn, 1)
    av, ai = torch.median(xn.to(TPU), 1)
    assert_close(av.cpu(), ev, equal_nan=True)
    assert torch.equal(ai.cpu(), ei)
    assert torch.median(xn.to(TPU)).isnan().item()
    xi = torch.randint(0, 20, (4, 5))
    assert torch.equal(torch.median(xi.to(TPU), 1).values.cpu(), torch.median(xi, 1).values)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.kthvalue(x.to(TPU), 10, 1)


def test_trace_eye_and_binary_functions():
    x = torch.randn(5, 7)
    compare_grad(torch.trace, x, atol=1e-5, rtol=1e-5)
    assert torch.trace(torch.arange(9).reshape(3, 3).to(TPU)).item() == 12
    for args in [(3,), (3, 5), (0,)]:
        assert torch.equal(torch.eye(*args, device=TPU).cpu(), torch.eye(*args))
    assert torch.equal(torch.eye(4, dtype=torch.long, device=TPU).cpu(), torch.eye(4, dtype=torch.long))
    a, b = torch.randn(4, 5) * 3, torch.randn(5) * 3
    compare_grad(torch.hypot, a, b, atol=1e-5, rtol=1e-5)
    compare_grad(torch.copysign, a, b, atol=1e-6, rtol=1e-6)
    assert_close(torch.copysign(a.to(TPU), -1.0).cpu(), torch.copysign(a, -1.0))
    nan = float("nan")
    p = torch.tensor([nan, 1.0, nan, -2.0])
    q = torch.tensor([3.0, nan, nan, 5.0])
    for fn in [torch.fmax, torch.fmin]:
        assert_close(fn(p.to(TPU), q.to(TPU)).cpu(), fn(p, q), equal_nan=True)
        compare_grad(fn, a, b)
    inf = float("inf")
    h = torch.tensor([inf, 3.0, 0.0, 1e30])
    assert_close(torch.hypot(h.to(TPU), torch.tensor([nan, 4.0, 0.0, 1e30], device=TPU)).cpu(),
                 torch.hypot(h, torch.tensor([nan, 4.0, 0.0, 1e30])))


def test_nanmedian_aminmax_count_nonzero_signbit_exp2():
    x = torch.randn(5, 7)
    x[2, 3] = float("nan")
    x[0, :3] = float("nan")
    for d in [0, 1]:
        ev, ei = torch.nanmedian(x, d)
        av, ai = torch.nanmedian(x.to(TPU), d)
        assert_close(av.cpu(), ev, equal_nan=True)
        assert torch.equal(ai.cpu(), ei)
    assert_close(torch.nanmedian(x.to(TPU)).cpu(), torch.nanmedian(x))
    compare_grad(lambda t: torch.nanmedian(t, 1).values, torch.randn(4, 6))
    y = torch.randn(4, 6)
    for kw in [{}, dict(dim=1), dict(dim=0, keepdim=True)]:
        for e, a in zip(torch.aminmax(y, **kw), torch.aminmax(y.to(TPU), **kw)):
            assert a.shape == e.shape
            assert_close(a.cpu(), e)
    assert torch.equal(torch.count_nonzero(x.to(TPU), 1).cpu(), torch.count_nonzero(x, 1))
    assert torch.count_nonzero(torch.tensor([0, 2, 0, 3], device=TPU)).item() == 2
    z = torch.tensor([-0.0, 0.0, -1.0, float("nan"), -float("nan"), 3.0])
    assert torch.equal(torch.signbit(z.to(TPU)).cpu(), torch.signbit(z))
    assert torch.equal(torch.signbit(torch.tensor([-2, 0, 5], device=TPU)).cpu(),
                       torch.tensor([True, False, False]))
    compare_grad(torch.exp2, torch.randn(20) * 4, atol=1e-5, rtol=1e-5)
    assert torch.equal(torch.exp2(torch.arange(8).to(TPU)).cpu(), torch.exp2(torch.arange(8)))


def test_shifts_heaviside_xlog1py_zeta_entr_nextafter():
    a = torch.randint(-100, 100, (30,), dtype=torch.int32)
    s = torch.randint(0, 40, (30,), dtype=torch.int32)
    at, st = a.to(TPU), s.to(TPU)
    assert torch.equal((at << st).cpu(), a << s)
    assert torch.equal((at >> st).cpu(), a >> s)
    assert torch.equal((at << 3).cpu(), a << 3)
    assert torch.equal((at >> 2).cpu(), a >> 2)
    u = torch.randint(0, 255, (20,), dtype=torch.uint8)
    assert torch.equal((u.to(TPU) >> 3).cpu(), u >> 3)
    assert torch.equal(torch.bitwise_left_shift(u.to(TPU), 2).cpu(), torch.bitwise_left_shift(u, 2))
    y = at.clone()
    y <<= 2
    assert torch.equal(y.cpu(), a << 2)
    x, v = torch.tensor([-1.0, 0.0, 2.0, 0.0]), torch.tensor([5.0, 6.0, 7.0, 8.0])
    assert torch.equal(torch.heaviside(x.to(TPU), v.to(TPU)).cpu(), torch.heaviside(x, v))
    p, q = torch.tensor([0.0, 0.0, 1.0, 2.0]), torch.tensor([float("nan"), 1.0, 0.5, -0.5])
    assert_close(torch.special.xlog1py(p.to(TPU), q.to(TPU)).cpu(), torch.special.xlog1py(p, q),
                 equal_nan=True)
    zx, zq = torch.tensor([2.0, 3.0, 4.5, 1.5]), torch.tensor([1.0, 2.0, 0.5, 10.0])
    assert_close(torch.special.zeta(zx.to(TPU), zq.to(TPU)).cpu(), torch.special.zeta(zx, zq),
                 rtol=1e-5, atol=1e-6)
    e = torch.tensor([0.0, 0.5, 1.0, -1.0, 2.0])
    assert_close(torch.special.entr(e.to(TPU)).cpu(), torch.special.entr(e))
    n1 = torch.tensor([1.0, 1.0, 0.0, 0.0, -1.0, float("nan"), 3.0, -0.5])
    n2 = torch.tensor([2.0, 0.0, 1.0, -1.0, -2.0, 1.0, 3.0, 0.0])
    for dt in [torch.float32, torch.float64]:
        assert_close(torch.nextafter(n1.to(dt).to(TPU), n2.to(dt).to(TPU)).cpu(),
                     torch.nextafter(n1.to(dt), n2.to(dt)), rtol=0, atol=0, equal_nan=True)
