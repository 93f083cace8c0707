"""nonzero, im2col/col2im (unfold/fold) and cdist/pdist on tpu against CPU,
forward and backward."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- nonzero --

@pytest.mark.parametrize("shape", [(7,), (4, 5), (3, 4, 5), (2, 1, 3, 2)])
def test_nonzero(shape):
    x = torch.randn(shape)
    x[x < 0.3] = 0
    xt = x.to(TPU)
    assert torch.equal(xt.nonzero().cpu(), x.nonzero())
    assert torch.equal(torch.argwhere(xt).cpu(), torch.argwhere(x))
    for a, b in zip(torch.nonzero(xt, as_tuple=True), torch.nonzero(x, as_tuple=True)):
        assert torch.equal(a.cpu(), b)
    assert torch.equal((xt > 0).nonzero().cpu(), (x > 0).nonzero())
    out = torch.empty(0, dtype=torch.long, device=TPU)
    torch.nonzero(xt, out=out)
    assert torch.equal(out.cpu(), x.nonzero())


def test_nonzero_edge_cases_and_static():
    for x in [torch.zeros(4, 3), torch.ones(2, 2, dtype=torch.int32), torch.tensor(2.0),
              torch.tensor(0.0), torch.empty(0, 3), torch.tensor([True, False, True])]:
        r = x.to(TPU).nonzero()
        assert r.dtype == torch.long
        assert torch.equal(r.cpu(), x.nonzero()), x
    x = torch.tensor([[0, 1, 0], [2, 0, 3]])
    for size, fill in [(5, -1), (2, 0), (3, 7)]:
        assert torch.equal(torch.nonzero_static(x.to(TPU), size=size, fill_value=fill).cpu(),
                           torch.nonzero_static(x, size=size, fill_value=fill))
    y = torch.randn(3, 4, device=TPU)
    m = y > 0
    assert torch.equal(y[m].cpu(), y.cpu()[m.cpu()])


# ------------------------------------------------------------- fold/unfold --

@pytest.mark.parametrize("kw", [
    dict(kernel_size=3),
    dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)),
    dict(kernel_size=2, stride=2),
])
def test_unfold_fold(kw):
    x = torch.randn(2, 3, 9, 8)
    compare_grad(lambda t: F.unfold(t, **kw), x)
    cols = F.unfold(x, **kw)
    compare_grad(lambda t: F.fold(t, (9, 8), **kw), cols, atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: F.unfold(t, **kw), x[0])  # unbatched
    compare_grad(lambda t: F.fold(t, (9, 8), **kw), cols[0], atol=1e-5, rtol=1e-5)


def test_unfold_module_and_errors():
    compare_grad(torch.nn.Unfold(kernel_size=(2, 2), padding=1), torch.randn(1, 2, 5, 5))
    with pytest.raises(RuntimeError):
        F.unfold(torch.randn(2, 3, 2, 2, device=TPU), kernel_size=3)
    with pytest.raises(RuntimeError):
        F.fold(torch.randn(1, 7, 4, device=TPU), (3, 3), kernel_size=2)


# ------------------------------------------------------------ cdist, pdist --

@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 3.0, 0.5, float("inf")])
def test_cdist_pdist(p):
    x1, x2 = torch.randn(2, 5, 4), torch.randn(2, 6, 4)
    compare_grad(lambda a, b: torch.cdist(a, b, p), x1, x2, atol=1e-5, rtol=1e-4)
    compare_grad(lambda a: torch.pdist(a, p), torch.randn(7, 3), atol=1e-5, rtol=1e-4)


def test_cdist_broadcast_and_errors():
    compare_grad(lambda a, b: torch.cdist(a, b), torch.randn(3, 1, 4, 2), torch.randn(2, 5, 2),
                 atol=1e-5, rtol=1e-4)
    compare_grad(lambda a, b: torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist"),
                 torch.randn(30, 3), torch.randn(28, 3), atol=1e-5, rtol=1e-4)
    with pytest.raises(RuntimeError, match="same number of columns"):
        torch.cdist(torch.randn(3, 2, device=TPU), torch.randn(3, 4, device=TPU))
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.pdist(torch.randn(3, 2, device=TPU), -1)
    assert torch.pdist(torch.randn(1, 3, device=TPU)).shape == (0,)


# ---------------------------------------------------------- embedding_bag --

def _bag_inputs(include_last_offset):
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
    off = torch.tensor([0, 4, 4, 7, 10] if include_last_offset else [0, 4, 4, 7])
    return idx, off


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag(mode, padding_idx, include_last_offset):
    idx, off = _bag_inputs(include_last_offset)
    w = torch.randn(10, 4)
    compare_grad(lambda t: F.embedding_bag(idx.to(t.device), t, off.to(t.device), mode=mode,
                                           padding_idx=padding_idx,
                                           include_last_offset=include_last_offset),
                 w, atol=1e-5, rtol=1e-5)


def test_embedding_bag_per_sample_weights_2d_and_module():
    idx, off = _bag_inputs(False)
    compare_grad(lambda t, p: F.embedding_bag(idx.to(t.device), t, off.to(t.device), mode="sum",
                                              per_sample_weights=p),
                 torch.randn(10, 4), torch.rand(10), atol=1e-5, rtol=1e-5)
    x = torch.randint(0, 10, (3, 5))
    for mode in ["sum", "mean", "max"]:
        compare_grad(lambda t: F.embedding_bag(x.to(t.device), t, mode=mode), torch.randn(10, 6),
                     atol=1e-5, rtol=1e-5)
    m = torch.nn.EmbeddingBag(10, 4, mode="mean")
    mt = torch.nn.EmbeddingBag(10, 4, mode="mean").to(TPU)
    mt.load_state_dict(m.state_dict())
    with torch.no_grad():  # the forward-only variant
        assert_close(mt(x.to(TPU)).cpu(), m(x), atol=1e-6, rtol=1e-5)


def test_embedding_bag_scale_grad_by_freq():
    # Each row's gradient is divided by how often its index occurs in the
    # batch (as embedding's own scale_grad_by_freq does).
    x = torch.tensor([[0, 0, 1], [1, 2, 3]])
    w = torch.randn(5, 2, device=TPU, requires_grad=True)
    F.embedding_bag(x.to(TPU), w, mode="sum", scale_grad_by_freq=True).sum().backward()
    wc = w.detach().cpu().requires_grad_()
    F.embedding(x, wc, scale_grad_by_freq=True).sum().backward()
    assert_close(w.grad.cpu(), wc.grad)


def test_embedding_bag_errors():
    w = torch.randn(10, 4, device=TPU)
    with pytest.raises(RuntimeError, match="per_sample_weights"):
        F.embedding_bag(torch.tensor([1, 2], device=TPU), w, torch.tensor([0], device=TPU),
                        mode="mean", per_sample_weights=torch.ones(2, device=TPU))


# --------------------------------------------------------------- linspace --

@pytest.mark.parametrize("start,end,steps,dtype", [
    (0, 1, 5, torch.float32), (-3.3, 7.1, 11, torch.float32), (0, 10, 7, torch.int64),
    (2, -5, 4, torch.float64), (1, 1, 1, torch.float32), (0, 1, 0, torch.float32),
    (0, 1, 100, torch.bfloat16)])
def test_linspace(start, end, steps, dtype):
    expected = torch.linspace(start, end, steps, dtype=dtype)
    actual = torch.linspace(start, end, steps, dtype=dtype, device=TPU)
    assert actual.dtype == dtype and actual.shape == expected.shape
    assert_close(actual.cpu(), expected, atol=1e-2 if dtype == torch.bfloat16 else 1e-6, rtol=1e-5)


# ------------------------- searchsorted, bucketize, bincount, histc, repeat --

@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_bucketize(right):
    seq = torch.tensor([1.0, 2.0, 2.0, 3.0, 5.0])
    v = torch.tensor([[0.0, 2.0, 2.5], [5.0, 6.0, 1.0]])
    assert torch.equal(torch.searchsorted(seq.to(TPU), v.to(TPU), right=right).cpu(),
                       torch.searchsorted(seq, v, right=right))
    assert torch.equal(torch.bucketize(v.to(TPU), seq.to(TPU), right=right).cpu(),
                       torch.bucketize(v, seq, right=right))
    s2, v2 = torch.sort(torch.randn(2, 6))[0], torch.randn(2, 4)
    assert torch.equal(torch.searchsorted(s2.to(TPU), v2.to(TPU), right=right).cpu(),
                       torch.searchsorted(s2, v2, right=right))
    side = "right" if right else "left"
    unsorted = torch.randn(7)
    sorter = unsorted.argsort()
    assert torch.equal(
        torch.searchsorted(unsorted.to(TPU), v.to(TPU), side=side, sorter=sorter.to(TPU)).cpu(),
        torch.searchsorted(unsorted, v, side=side, sorter=sorter))
    r = torch.searchsorted(seq.to(TPU), 2.0, right=right, out_int32=True)
    assert r.dtype == torch.int32 and r.item() == torch.searchsorted(seq, 2.0, right=right).item()


def test_bincount_histc_repeat_interleave():
    x = torch.randint(0, 10, (50,))
    w = torch.rand(50)
    assert torch.equal(torch.bincount(x.to(TPU)).cpu(), torch.bincount(x))
    assert torch.equal(torch.bincount(x.to(TPU), minlength=15).cpu(), torch.bincount(x, minlength=15))
    assert_close(torch.bincount(x.to(TPU), w.to(TPU)).cpu(), torch.bincount(x, w))
    assert torch.bincount(x.to(TPU), w.double().to(TPU)).dtype == torch.float64
    assert torch.bincount(torch.empty(0, dtype=torch.long, device=TPU)).shape == (0,)
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.bincount(torch.tensor([1, -1], device=TPU))
    y = torch.randn(1000)
    assert torch.equal(torch.histc(y.to(TPU), 10).cpu(), torch.histc(y, 10))
    assert torch.equal(torch.histc(y.to(TPU), 7, -1, 1).cpu(), torch.histc(y, 7, -1, 1))
    assert torch.equal(torch.histc(y.double().to(TPU), 13, -2, 3).cpu(), torch.histc(y.double(), 13, -2, 3))
    r = torch.tensor([2, 0, 3, 1])
    assert torch.equal(torch.repeat_interleave(r.to(TPU)).cpu(), torch.repeat_interleave(r))
    xx = torch.randn(4, 3)
    compare_grad(lambda t: t.repeat_interleave(r.to(t.device), dim=0), xx)
    assert torch.equal(torch.repeat_interleave(torch.tensor([0, 0], device=TPU)).cpu(),
                       torch.repeat_interleave(torch.tensor([0, 0])))


# ------------------------------------- take, put_, tri indices, unique, renorm --

def test_take_put():
    x = torch.randn(4, 5)
    i = torch.tensor([[0, -1], [7, 19]])
    assert torch.equal(torch.take(x.to(TPU), i.to(TPU)).cpu(), torch.take(x, i))
    compare_grad(lambda t: torch.take(t, i.to(t.device)), x)
    for acc in [False, True]:
        idx = torch.tensor([1, 3, -2, 1]) if acc else torch.tensor([1, 3, -2])
        src = torch.randn(idx.numel())
        expected = x.clone().put_(idx, src, accumulate=acc)
        actual = x.to(TPU).put_(idx.to(TPU), src.to(TPU), accumulate=acc)
        assert_close(actual.cpu(), expected)
    compare_grad(lambda t, s: t.put(torch.tensor([2, 4]).to(t.device), s), x, torch.randn(2))


def test_tril_triu_indices():
    for args in [(4, 3, 1), (3, 5, -1), (5, 5, 0), (0, 3, 0)]:
        assert torch.equal(torch.tril_indices(*args, device=TPU).cpu(), torch.tril_indices(*args))
        assert torch.equal(torch.triu_indices(*args, device=TPU).cpu(), torch.triu_indices(*args))
    assert torch.tril_indices(3, 3, dtype=torch.int32, device=TPU).dtype == torch.int32


@pytest.mark.parametrize("t", [
    torch.tensor([3, 1, 2, 3, 3, 1, 5]), torch.tensor([2.0, float("nan"), 1.0, 2.0, float("nan")]),
    torch.tensor([[0, 2, 2], [1, 0, 3]]), torch.tensor([True, False, True]),
], ids=["int", "nan", "2d", "bool"])
def test_unique(t):
    for fn in [torch.unique, torch.unique_consecutive]:
        expected = fn(t, return_inverse=True, return_counts=True)
        actual = fn(t.to(TPU), return_inverse=True, return_counts=True)
        for e, a in zip(expected, actual):
            assert a.shape == e.shape and a.dtype == e.dtype
            assert_close(a.cpu(), e, equal_nan=True)
    assert torch.equal(torch.unique(t.to(TPU)).cpu(), torch.unique(t)) or t.is_floating_point()
    assert torch.unique(torch.empty(0, device=TPU)).shape == (0,)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_embedding_max_norm(norm_type):
    w = torch.randn(10, 4) * 3
    idx = torch.tensor([[1, 2], [2, 5]])
    wc, wt = w.clone(), w.to(TPU)
    out_c = F.embedding(idx, wc, max_norm=1.0, norm_type=norm_type)
    out_t = F.embedding(idx.to(TPU), wt, max_norm=1.0, norm_type=norm_type)
    assert_close(wt.cpu(), wc, atol=1e-6, rtol=1e-5)  # renormalized in place
    assert_close(out_t.cpu(), out_c, atol=1e-6, rtol=1e-5)


# ---------------------------------------------------------- cross, renorm --

def test_cross_and_renorm():
    a, b = torch.randn(4, 3, 5), torch.randn(4, 3, 5)
    compare_grad(lambda x, y: torch.linalg.cross(x, y, dim=1), a, b, atol=1e-6, rtol=1e-5)
    compare_grad(lambda x, y: torch.cross(x, y, dim=-1), torch.randn(6, 3), torch.randn(1, 3),
                 atol=1e-6, rtol=1e-5)
    with pytest.raises(RuntimeError, match="length 3"):
        torch.linalg.cross(torch.randn(2, 4, device=TPU), torch.randn(2, 4, device=TPU))
    x = torch.randn(4, 5) * 3
    for p in [1, 2, 3]:
        compare_grad(lambda t: torch.renorm(t, p, 0, 2.0), x, atol=1e-5, rtol=1e-5)
    y = x.to(TPU)
    y.renorm_(2, 1, 1.0)
    assert_close(y.cpu(), x.renorm(2, 1, 1.0), atol=1e-6, rtol=1e-5)


def test_unique_consecutive_dim():
    x = torch.tensor([[1, 1, 2, 2, 2], [3, 3, 4, 4, 5], [3, 3, 4, 4, 5], [1, 1, 1, 1, 1]])
    for t in [x, x.float(), x[None].expand(2, 4, 5)]:
        for d in range(t.dim()):
            expected = torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=d)
            actual = torch.unique_consecutive(t.to(TPU), return_inverse=True, return_counts=True,
                                              dim=d)
            for e, a in zip(expected, actual):
                assert torch.equal(a.cpu(), e)
