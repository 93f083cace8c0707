"""unique along a dim, histogram, segment_reduce and hash_tensor on tpu
against CPU."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- ctc_loss --

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


def test_hash_tensor():
    x = torch.randn(4, 5)
    for kw in [{}, {"dim": 1}, {"dim": (0, 1), "keepdim": True}]:
        t, c = torch.hash_tensor(x.to(TPU), **kw).cpu(), torch.hash_tensor(x, **kw)
        assert t.dtype == c.dtype and t.shape == c.shape and t.tolist() == c.tolist()
    i = torch.randint(-100, 100, (6,), dtype=torch.int32)
    assert torch.hash_tensor(i.to(TPU)).cpu().tolist() == torch.hash_tensor(i).tolist()
