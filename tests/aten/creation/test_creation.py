"""linspace and tril_indices / triu_indices on tpu against CPU."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- nonzero --

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

def test_tril_triu_indices():
    for args in [(4, 3, 1), (3, 5, -1), (5, 5, 0), (0, 3, 0)]:
        assert torch.equal(torch.tril_indices(*args, device=TPU).cpu(), torch.tril_indices(*args))
        assert torch.equal(torch.triu_indices(*args, device=TPU).cpu(), torch.triu_indices(*args))
    assert torch.tril_indices(3, 3, dtype=torch.int32, device=TPU).dtype == torch.int32
