"""index_reduce, unfold_backward and the batch norm update entry points on
tpu against CPU."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- ctc_loss --

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
