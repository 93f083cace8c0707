"""torch.special on tpu against CPU: orthogonal polynomials, Bessel
functions, the error-function family and the incomplete gamma functions."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- ctc_loss --

@pytest.mark.parametrize("fn", [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
    "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"])
def test_orthogonal_polynomials(fn):
    f = getattr(torch.special, fn)
    x = torch.rand(6, 7) * 2.4 - 1.2
    x[0, :3] = torch.tensor([1.0, -1.0, 0.0])
    n = torch.randint(-2, 9, (7,)).float()
    assert_close(f(x.to(TPU), n.to(TPU)).cpu(), f(x, n), rtol=1e-4, atol=1e-4)
    assert_close(f(x.to(TPU), 5).cpu(), f(x, 5), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fn", ["i0", "special.i0e", "special.i1", "special.i1e",
                                "special.modified_bessel_i0", "special.modified_bessel_i1"])
def test_bessel_i(fn):
    f = torch.i0 if fn == "i0" else getattr(torch.special, fn.split(".")[1])
    x = torch.cat([torch.randn(50) * 5, torch.tensor([0.0, 40.0, -60.0, 29.9, 30.1])])
    if fn in ("i0", "special.i1", "special.modified_bessel_i0", "special.modified_bessel_i1"):
        x = x.clamp(-80, 80)
    assert_close(f(x.to(TPU)).cpu(), f(x), rtol=1e-4, atol=1e-5)
    if fn in ("i0", "special.i0e", "special.i1", "special.i1e"):
        compare_grad(f, torch.randn(20) * 3, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fn", ["spherical_bessel_j0", "ndtri", "log_ndtr", "erfcx"])
def test_error_function_family(fn):
    f = getattr(torch.special, fn)
    if fn == "ndtri":
        x = torch.rand(100) * 0.98 + 0.01
    else:
        x = torch.cat([torch.randn(100) * 4, torch.tensor([0.0, 0.3, -0.3, 7.0, 30.0, -5.0])])
    assert_close(f(x.to(TPU)).cpu(), f(x), rtol=1e-4, atol=1e-5)
    if fn != "spherical_bessel_j0":
        compare_grad(f, x[:20].clone(), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------- margin losses, mode --

@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac])
def test_igamma(fn):
    a = torch.cat([torch.rand(200) * 9 + 0.01, torch.tensor([0.0, 1.0, -1.0, 2.0, float("inf")])])
    x = torch.cat([torch.rand(200) * 12, torch.tensor([1.0, 0.0, 1.0, float("inf"), 3.0])])
    assert_close(fn(a.to(TPU), x.to(TPU)).cpu(), fn(a, x), atol=2e-5, rtol=1e-4, equal_nan=True)


@pytest.mark.parametrize("fn", [torch.special.bessel_j0, torch.special.bessel_j1])
def test_bessel_j(fn):
    x = torch.cat([torch.randn(200) * 6, torch.tensor([0.0, 7.99, 8.0, 8.01, -12.0, 30.0])])
    assert_close(fn(x.to(TPU)).cpu(), fn(x), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("fn", ["modified_bessel_k0", "modified_bessel_k1",
                                "scaled_modified_bessel_k0", "scaled_modified_bessel_k1"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_bessel_k(fn, dtype):
    # each of the three regimes (series below 1/2, integral, Hankel's
    # expansion above 25) and their borders, the special values
    f = getattr(torch.special, fn)
    x = torch.cat([torch.rand(100) * 40, torch.rand(50) * 0.6,
                   torch.tensor([1e-6, 0.4999, 0.5, 0.5001, 24.99, 25.0, 25.01, 80.0, 1e4,
                                 0.0, -1.0, float("inf"), float("nan")])]).to(dtype)
    want = f(x.double())
    got = f(x.to(TPU)).cpu()
    assert got.dtype == dtype
    tol = 1e-12 if dtype == torch.float64 else 2e-6
    # (float32's subnormal range: K0(100) is 5e-45)
    assert_close(got.double(), want, rtol=tol, atol=1e-300 if dtype == torch.float64 else 1e-37,
                 equal_nan=True)


@pytest.mark.parametrize("fn", ["bessel_y0", "bessel_y1"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_bessel_y(fn, dtype):
    # against CPU; CPU's own Y0/Y1 err by up to 1e-5 (Y0) and 1e-4 (Y1)
    # relative near their zeros, where ours (a float64 series below 20,
    # Hankel's expansion above) is closer to the true values
    f = getattr(torch.special, fn)
    x = torch.cat([torch.rand(200) * 40, torch.tensor([1e-6, 0.3, 19.99, 20.0, 20.01, 500.0,
                                                        0.0, -2.0, float("inf"), float("nan")])])
    x = x.to(dtype)
    assert_close(f(x.to(TPU)).cpu(), f(x), rtol=2e-4, atol=2e-6, equal_nan=True)
    # the values at a few points to 1e-9 (float64)
    if dtype == torch.float64:
        pts = torch.tensor([1.0, 3.0, 10.0, 30.0], dtype=dtype)
        ref = {"bessel_y0": [0.08825696421567696, 0.3768500100127904, 0.055671167283599395,
                             -0.11729573168666403],
               "bessel_y1": [-0.7812128213002887, 0.3246744247918, 0.24901542420695388,
                             0.08442557066174723]}[fn]
        assert_close(f(pts.to(TPU)).cpu(), torch.tensor(ref, dtype=dtype), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_airy_ai(dtype):
    # every regime (asymptotic below -8, series to 2, K_1/3 above, 0 past
    # 103.892) and its borders; CPU's own Ai errs by up to 2e-6 absolute
    x = torch.cat([torch.linspace(-30, 12, 300, dtype=torch.float64),
                   torch.tensor([-8.0, -7.999, 2.0, 2.001, 8.3, 8.4, 50.0, 103.0, 110.0,
                                 float("inf"), -float("inf"), float("nan")], dtype=torch.float64)])
    x = x.to(dtype)
    got = torch.special.airy_ai(x.to(TPU)).cpu()
    assert got.dtype == dtype
    assert_close(got, torch.special.airy_ai(x), rtol=1e-5, atol=5e-6, equal_nan=True)
