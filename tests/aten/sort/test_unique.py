"""unique and unique_consecutive (with dim) on tpu against CPU."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- nonzero --

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


def test_unique_consecutive_dim():
    x = torch.tensor([[1, 1, 2, 2, 2], [3, 3, 4, 4, 5], [3, 3, 4, 4, 5], [1, 1, 1, 1, 1]])
    for t in [x, x.float(), x[None].expand(2, 4, 5)]:
        for d in range(t.dim()):
            expected = torch.unique_consecutive(t, return_inverse=True, return_counts=True, dim=d)
            actual = torch.unique_consecutive(t.to(TPU), return_inverse=True, return_counts=True,
                                              dim=d)
            for e, a in zip(expected, actual):
                assert torch.equal(a.cpu(), e)
