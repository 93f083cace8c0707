"""nonzero (and nonzero_static), searchsorted / bucketize, bincount / histc /
repeat_interleave and take / put_ on tpu against CPU."""

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
