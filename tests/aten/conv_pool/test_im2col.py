"""im2col / col2im (F.unfold / F.fold, nn.Unfold) on tpu against CPU,
forward and backward."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- nonzero --

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
