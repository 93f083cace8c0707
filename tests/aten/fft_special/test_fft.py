"""torch.fft on tpu against CPU (forward): real-to-complex, complex-to-real
and complex-to-complex transforms in one and several dims, with every
normalization."""

import pytest
import torch
from torch.testing import assert_close

TPU = torch.device("tpu")


def check(fn, x, atol=1e-5, rtol=1e-5):
    expected = fn(x)
    actual = fn(x.to(TPU))
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert_close(actual.cpu(), expected, atol=atol, rtol=rtol)


@pytest.mark.parametrize("norm", [None, "ortho", "forward", "backward"])
def test_fft_real_and_complex(norm):
    x = torch.randn(4, 6, 8)
    check(lambda t: torch.fft.rfft(t, norm=norm), x)
    check(lambda t: torch.fft.rfft2(t, norm=norm), x)
    check(lambda t: torch.fft.fft(t, norm=norm), x)
    check(lambda t: torch.fft.rfft(t, n=5, dim=1, norm=norm), x)
    c = torch.fft.fft(x)
    check(lambda t: torch.fft.fftn(t, norm=norm), c, atol=5e-5)
    check(lambda t: torch.fft.ifft(t, dim=0, norm=norm), c)
    check(lambda t: torch.fft.ifft2(t, norm=norm), c, atol=5e-5)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_complex_to_real(norm):
    x = torch.randn(4, 6, 8)
    r = torch.fft.rfft(x)
    check(lambda t: torch.fft.irfft(t, norm=norm), r, atol=1e-4)
    check(lambda t: torch.fft.irfft(t, n=9, norm=norm), r, atol=1e-4)
    check(lambda t: torch.fft.irfft(t, n=4, norm=norm), r, atol=1e-4)
    check(lambda t: torch.fft.irfftn(t, s=(4, 6, 8), norm=norm), torch.fft.rfftn(x), atol=1e-4)
    check(lambda t: torch.fft.hfft(t, norm=norm), torch.fft.fft(x)[0, 0], atol=1e-4)


def test_fft_round_trip_double_and_errors():
    x = torch.randn(3, 10, dtype=torch.float64)
    y = torch.fft.irfft(torch.fft.rfft(x.to(TPU)), n=10)
    assert y.dtype == torch.float64
    assert_close(y.cpu(), x)
    check(lambda t: torch.fft.rfft(t), x, atol=1e-10, rtol=1e-10)
    with pytest.raises(RuntimeError):
        torch.fft.irfft(torch.fft.rfft(x.to(TPU)), n=0)
