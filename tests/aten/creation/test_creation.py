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


# ------------------------------------- arange, range, linspace, logspace --

def test_linspace_integral_exact():
    # The step is computed as CPU computes it (in double), so truncation
    # toward zero lands on the same integers.
    for dt in (torch.int16, torch.int32, torch.int64):
        for start, end, steps in [(1, 127, 50), (1, 127, 25), (-100, 100, 401), (7, -9, 13)]:
            assert torch.equal(torch.linspace(start, end, steps, dtype=dt, device=TPU).cpu(),
                               torch.linspace(start, end, steps, dtype=dt))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_linspace_logspace_complex(dtype):
    for start, end in [(0, 1 + 2j), (1j, -3 + 0.5j), (-2.5 + 1j, 4)]:
        assert_close(torch.linspace(start, end, 9, dtype=dtype, device=TPU).cpu(),
                     torch.linspace(start, end, 9, dtype=dtype))
        assert_close(torch.logspace(start, end, 7, base=2.0, dtype=dtype, device=TPU).cpu(),
                     torch.logspace(start, end, 7, base=2.0, dtype=dtype), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32])
def test_logspace(dtype):
    for start, end, steps, base in [(0, 3, 4, 10.0), (-1, 2, 9, 2.0), (2, -2, 5, 3.0), (1, 1, 1, 10.0)]:
        expected = torch.logspace(start, end, steps, base=base, dtype=dtype)
        actual = torch.logspace(start, end, steps, base=base, dtype=dtype, device=TPU)
        assert actual.dtype == dtype
        tol = dict(rtol=1e-3, atol=1e-3) if dtype == torch.float16 else {}
        assert_close(actual.cpu(), expected, **tol)


def test_range_factories_keep_out_shape():
    # out= with the right number of elements keeps its shape (CPU fills a
    # 2x2 view); with the wrong number it is resized, arange warning as CPU.
    x = torch.zeros(2, 3, device=TPU)
    torch.arange(0, 4, out=x.narrow(1, 1, 2))
    assert torch.equal(x.cpu(), torch.tensor([[0., 0., 1.], [0., 2., 3.]]))
    y = torch.zeros(2, 2, device=TPU)
    torch.linspace(0, 3, 4, out=y)
    assert y.shape == (2, 2) and torch.equal(y.cpu(), torch.tensor([[0., 1.], [2., 3.]]))
    line = torch.zeros(1, 49, device=TPU)
    with pytest.warns(UserWarning, match="The out tensor will be resized"):
        torch.arange(-1, 1, 2. / 49, dtype=torch.float32, out=line)
    assert line.shape == (50,)
    assert_close(line.cpu(), torch.arange(-1, 1, 2. / 49, dtype=torch.float32))


def test_range_deprecated_inclusive():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for args, dt in [((0, 5, 0.5), torch.float32), ((3, -4, -2), torch.int64), ((1, 1, 1), torch.float64)]:
            assert torch.equal(torch.range(*args, dtype=dt, device=TPU).cpu(), torch.range(*args, dtype=dt))
        with pytest.raises(RuntimeError, match="upper bound and larger bound inconsistent with step sign"):
            torch.range(0, 5, -1, device=TPU)


# ------------------------------------------------ float -> integer casts --

@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool])
def test_float_to_int_matches_cpu_out_of_range(dtype):
    # Out-of-range values, infinities and NaN convert as PyTorch's CPU kernels
    # do on x86 (through int32 or int64, wrapping), not saturated.
    f = torch.finfo(torch.float32)
    vals = torch.tensor([f.min, -300.5, -2, -1.5, -.5, 0, .5, 1.5, 2, 200.7, 70000.2, 3e9, f.max,
                         float("inf"), float("-inf"), float("nan")])
    assert torch.equal(vals.to(TPU).to(dtype).cpu(), vals.to(dtype))
    assert torch.equal(vals.double().to(TPU).to(dtype).cpu(), vals.double().to(dtype))
