"""Pooling on tpu against CPU: max pooling (values, indices, backward), average
pooling (padding, ceil_mode, count_include_pad, divisor_override), adaptive
average and max pooling, in 1-3 spatial dims, forward and backward."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# --------------------------------------------------------------- max pool --

@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0), dilation=(2, 1)),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, dilation=2),
])
def test_max_pool2d(kw):
    x = torch.randn(2, 3, 11, 10)
    compare_grad(lambda t: F.max_pool2d(t, return_indices=True, **kw), x)


def test_max_pool2d_unbatched_ties_and_bfloat16():
    # Ties (many equal values): the first index wins, as on CPU, and the
    # gradient goes to it.
    x = torch.randint(0, 3, (3, 8, 8)).float()
    compare_grad(lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True), x)
    xb = torch.randn(2, 4, 9, 9).bfloat16()
    compare_grad(lambda t: F.max_pool2d(t, 3, 2, return_indices=True), xb)


def test_max_pool2d_inf_and_nan():
    x = torch.randn(1, 2, 6, 6)
    x[0, 0, :3, :3] = float("-inf")
    x[0, 1, 1, 1] = float("nan")
    a, ia = F.max_pool2d(x, 3, 3, return_indices=True)
    b, ib = F.max_pool2d(x.to(TPU), 3, 3, return_indices=True)
    assert_close(b.cpu(), a, equal_nan=True)
    assert torch.equal(ib.cpu(), ia)


def test_max_pool1d_and_3d():
    x = torch.randn(2, 3, 17)
    compare_grad(lambda t: F.max_pool1d(t, 3, 2, 1, return_indices=True), x)
    x3 = torch.randn(2, 2, 6, 7, 5)
    compare_grad(lambda t: F.max_pool3d(t, 3, 2, 1, return_indices=True), x3)
    compare_grad(lambda t: F.max_pool3d(t, (2, 3, 2), ceil_mode=True, return_indices=True), x3)


def test_max_pool_module_without_indices():
    x = torch.randn(2, 4, 12, 12)
    compare_grad(lambda t: torch.nn.MaxPool2d(3, 2, 1)(t), x)


def test_max_pool_errors():
    x = torch.randn(1, 1, 4, 4, device=TPU)
    with pytest.raises(RuntimeError, match="pad should be"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError):
        F.max_pool2d(torch.randn(1, 1, 2, 2, device=TPU), 3)


# --------------------------------------------------------------- avg pool --

@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), divisor_override=5),
])
def test_avg_pool2d(kw):
    x = torch.randn(2, 3, 11, 10)
    compare_grad(lambda t: F.avg_pool2d(t, **kw), x, atol=1e-5, rtol=1e-5)


def test_avg_pool1d_3d_and_bfloat16():
    compare_grad(lambda t: F.avg_pool1d(t, 4, 3, 2, ceil_mode=True), torch.randn(2, 3, 15),
                 atol=1e-5, rtol=1e-5)
    x3 = torch.randn(2, 2, 7, 6, 5)
    compare_grad(lambda t: F.avg_pool3d(t, 3, 2, 1), x3, atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: F.avg_pool3d(t, 2, ceil_mode=True, count_include_pad=False), x3,
                 atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: F.avg_pool3d(t, 2, divisor_override=3), x3, atol=1e-5, rtol=1e-5)
    xb = torch.randn(2, 3, 8, 8).bfloat16()
    compare_grad(lambda t: F.avg_pool2d(t, 3, 2, 1), xb, atol=2e-2, rtol=2e-2)


def test_avg_pool_errors():
    x = torch.randn(1, 1, 4, 4, device=TPU)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(RuntimeError, match="pad should be"):
        F.avg_pool2d(x, 2, padding=3)


# ---------------------------------------------------------- adaptive pool --

@pytest.mark.parametrize("in_hw,out_hw", [((8, 8), (4, 4)), ((10, 7), (3, 4)), ((7, 7), (1, 1)),
                                          ((5, 6), (7, 6))])
def test_adaptive_avg_pool2d(in_hw, out_hw):
    x = torch.randn(2, 3, *in_hw)
    compare_grad(lambda t: F.adaptive_avg_pool2d(t, out_hw), x, atol=1e-5, rtol=1e-5)


def test_adaptive_avg_pool1d_3d_unbatched():
    compare_grad(lambda t: F.adaptive_avg_pool1d(t, 5), torch.randn(2, 3, 13), atol=1e-5,
                 rtol=1e-5)
    compare_grad(lambda t: F.adaptive_avg_pool3d(t, (2, 3, 4)), torch.randn(2, 2, 5, 7, 9),
                 atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: F.adaptive_avg_pool2d(t, (3, 2)), torch.randn(3, 9, 5), atol=1e-5,
                 rtol=1e-5)
    compare_grad(lambda t: F.adaptive_avg_pool2d(t, 2), torch.randn(2, 3, 6, 6).bfloat16(),
                 atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("in_hw,out_hw", [((8, 8), (4, 4)), ((10, 7), (3, 4)), ((7, 7), (1, 1)),
                                          ((5, 6), (7, 6))])
def test_adaptive_max_pool2d(in_hw, out_hw):
    x = torch.randn(2, 3, *in_hw)
    compare_grad(lambda t: F.adaptive_max_pool2d(t, out_hw, return_indices=True), x)


def test_adaptive_max_pool1d_3d():
    compare_grad(lambda t: F.adaptive_max_pool1d(t, 4, return_indices=True), torch.randn(2, 3, 11))
    compare_grad(lambda t: F.adaptive_max_pool3d(t, (2, 3, 2), return_indices=True),
                 torch.randn(2, 2, 5, 7, 4))


def test_adaptive_pool_errors():
    with pytest.raises(RuntimeError):
        F.adaptive_avg_pool2d(torch.randn(2, 3, 4, 4, device=TPU), (1, 2, 3))
    with pytest.raises(RuntimeError):
        F.adaptive_max_pool2d(torch.randn(2, 3, 4, 4, device=TPU), (1, 2, 3))


def test_pooling_cnn_block(highest_matmul_precision):
    """A small CNN block that uses every pooling kind, trained one step."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.AvgPool2d(3, 1, 1),
        torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(16, 2))
    import copy
    dev = copy.deepcopy(net).to(TPU)
    x = torch.randn(4, 3, 16, 16)
    net(x).square().sum().backward()
    dev(x.to(TPU)).square().sum().backward()
    for (n, pc), (_, pt) in zip(net.named_parameters(), dev.named_parameters()):
        assert_close(pt.grad.cpu(), pc.grad, atol=1e-3, rtol=1e-3, msg=n)


# ------------------------------------------------------------- max_unpool --

def test_max_unpool():
    x = torch.randn(2, 3, 8, 6)
    v, i = F.max_pool2d(x, 2, return_indices=True)
    compare_grad(lambda t: F.max_unpool2d(t, i.to(t.device), 2), v)
    compare_grad(lambda t: F.max_unpool2d(t, i.to(t.device), 2, output_size=(9, 7)), v)
    compare_grad(lambda t: F.max_unpool2d(t, i[0].to(t.device), 2), v[0])  # unbatched
    x3 = torch.randn(1, 2, 4, 6, 4)
    v3, i3 = F.max_pool3d(x3, 2, return_indices=True)
    compare_grad(lambda t: F.max_unpool3d(t, i3.to(t.device), 2), v3)
    v1, i1 = F.max_pool1d(torch.randn(2, 3, 10), 2, return_indices=True)
    compare_grad(lambda t: F.max_unpool1d(t, i1.to(t.device), 2), v1)
    with pytest.raises(RuntimeError, match="Shape of input must match"):
        F.max_unpool2d(v.to(TPU), i[:, :2].to(TPU), 2)


def test_max_unpool_alerts_under_deterministic_algorithms():
    x = torch.randn(1, 1, 7, device="tpu")
    idx = torch.zeros_like(x, dtype=torch.long)
    prev = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError, match="max_unpooling2d_forward_out does not have a deterministic"):
            torch.nn.MaxUnpool1d(3, 1)(x, idx)
    finally:
        torch.use_deterministic_algorithms(prev)
