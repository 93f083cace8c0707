"""The activations written as formulas of their input on tpu against CPU,
forward and backward: softplus, mish, hardswish, hardsigmoid, glu, xlogy."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


@pytest.mark.parametrize("fn", [
    lambda x: F.softplus(x), lambda x: F.softplus(x * 5, beta=2.0, threshold=4.0),
    F.mish, F.hardswish, F.hardsigmoid, lambda x: F.glu(x, dim=1), lambda x: F.glu(x, dim=-1),
], ids=["softplus", "softplus_beta", "mish", "hardswish", "hardsigmoid", "glu1", "glu_last"])
def test_activations(fn):
    x = torch.randn(4, 6, 8) * 4  # reaches both sides of every kink
    compare_grad(fn, x, rtol=1e-5, atol=1e-5)


def test_activation_in_place_and_out_forms():
    x = torch.randn(16) * 4
    for name in ("hardswish", "hardsigmoid", "mish"):
        xt = x.to(TPU)
        getattr(F, name)(xt, inplace=True)
        assert_close(xt.cpu(), getattr(F, name)(x))
    out = torch.empty(16, device=TPU)
    torch._C._nn.softplus(x.to(TPU), 1, 20, out=out)
    assert_close(out.cpu(), F.softplus(x))
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(torch.randn(3, 5, device=TPU))


def test_xlogy_special_values():
    x = torch.tensor([0.0, 0.0, 2.0, 1.5, 0.0, 3.0])
    y = torch.tensor([0.0, float("nan"), 0.0, 2.0, 5.0, float("inf")])
    assert_close(torch.xlogy(x.to(TPU), y.to(TPU)).cpu(), torch.xlogy(x, y), equal_nan=True)
    assert_close(torch.xlogy(x.to(TPU), 2.0).cpu(), torch.xlogy(x, 2.0))
    xi = torch.tensor([0, 1, 2])
    assert torch.xlogy(xi.to(TPU), xi.to(TPU)).dtype == torch.xlogy(xi, xi).dtype
    compare_grad(torch.xlogy, torch.rand(5) + 0.1, torch.rand(5) + 0.1)
