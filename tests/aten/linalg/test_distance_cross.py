"""cdist / pdist, linalg_cross and renorm on tpu against CPU, forward and
backward."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- nonzero --

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
