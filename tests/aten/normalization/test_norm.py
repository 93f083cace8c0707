"""Normalization ops on tpu against CPU: layer/batch/group norm forward and
backward, var/std and their _mean forms."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


def compare_module(module, x, rtol=None, atol=None):
    """Runs a module and a tpu copy; compares output, input and parameter
    gradients and buffers (running stats)."""
    dev = copy.deepcopy(module).to(TPU)
    xc, xt = x.clone().requires_grad_(), x.to(TPU).requires_grad_()
    yc, yt = module(xc), dev(xt)
    assert_close(yt.detach().cpu(), yc.detach(), rtol=rtol, atol=atol)
    g = torch.randn_like(yc)
    yc.backward(g)
    yt.backward(g.to(TPU))
    assert_close(xt.grad.cpu(), xc.grad, rtol=rtol, atol=atol)
    for (name, pc), (_, pt) in zip(module.named_parameters(), dev.named_parameters()):
        assert_close(pt.grad.cpu(), pc.grad, rtol=rtol, atol=atol, msg=name)
    for (name, bc), (_, bt) in zip(module.named_buffers(), dev.named_buffers()):
        assert_close(bt.cpu(), bc, rtol=rtol, atol=atol, msg=name)


def randomize(module):
    with torch.no_grad():
        for p in module.parameters():
            p.normal_()
    return module


# ----------------------------------------------------------- layer norm --

@pytest.mark.parametrize("shape,normalized", [((3, 7), (7,)), ((2, 3, 4, 5), (4, 5)),
                                              ((6,), (6,))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(shape, normalized, affine):
    m = nn.LayerNorm(normalized, elementwise_affine=affine)
    compare_module(randomize(m), torch.randn(shape), atol=1e-5, rtol=1e-4)


def test_layer_norm_weight_only_and_stats():
    x, w = torch.randn(4, 6), torch.randn(6)
    compare_grad(lambda t, ww: F.layer_norm(t, (6,), ww, None, 1e-3), x, w, atol=1e-5, rtol=1e-4)
    for dtype in [torch.float32, torch.bfloat16]:
        xe = torch.randn(2, 3, 8).to(dtype)
        expected = torch.native_layer_norm(xe, [8], None, None, 1e-5)
        actual = torch.native_layer_norm(xe.to(TPU), [8], None, None, 1e-5)
        for e, a in zip(expected, actual):
            assert a.shape == e.shape and a.dtype == e.dtype
            assert_close(a.cpu(), e, atol=2e-2, rtol=2e-2)


def test_layer_norm_errors():
    x = torch.randn(4, 6, device=TPU)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(x, (5,))
    with pytest.raises(RuntimeError):
        F.layer_norm(x, (6,), torch.ones(5, device=TPU))


# ------------------------------------------------------------ var / std --

@pytest.mark.parametrize("dim", [None, 0, (0, 2), -1])
@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_std(dim, correction, keepdim):
    x = torch.randn(4, 5, 6)
    for fn in (torch.var, torch.std):
        compare_grad(lambda t: fn(t, dim, correction=correction, keepdim=keepdim), x,
                     atol=1e-5, rtol=1e-4)
    for fn in (torch.var_mean, torch.std_mean):
        e = fn(x, dim, correction=correction, keepdim=keepdim)
        a = fn(x.to(TPU), dim, correction=correction, keepdim=keepdim)
        assert_close(a[0].cpu(), e[0], atol=1e-5, rtol=1e-4)
        assert_close(a[1].cpu(), e[1], atol=1e-5, rtol=1e-4)


def test_var_edge_cases_and_out():
    x = torch.randn(3, 1)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        assert_close(x.to(TPU).var(1).cpu(), x.var(1), equal_nan=True)  # N - correction == 0
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        assert_close(x.to(TPU).var(0, correction=5).cpu(), x.var(0, correction=5))
    xb = torch.randn(8, 8).bfloat16()
    assert_close(xb.to(TPU).std(1).cpu(), xb.std(1), atol=1e-2, rtol=1e-2)
    out = torch.empty(0, device=TPU)
    torch.var(x.to(TPU), 0, out=out)
    assert_close(out.cpu(), x.var(0))
    with pytest.raises(RuntimeError):
        torch.arange(4).to(TPU).var()


# ----------------------------------------------------------- batch norm --

@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(shape, training):
    cls = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d}[len(shape)]
    m = randomize(cls(3, momentum=0.3))
    with torch.no_grad():
        m.running_mean.normal_()
        m.running_var.uniform_(0.5, 2.0)
    m.train(training)
    compare_module(m, torch.randn(shape), atol=1e-5, rtol=1e-4)


def test_batch_norm_no_affine_no_stats():
    x = torch.randn(5, 4, 3)
    compare_grad(lambda t: F.batch_norm(t, None, None, training=True), x, atol=1e-5, rtol=1e-4)
    compare_module(nn.BatchNorm1d(4, affine=False, track_running_stats=False), x,
                   atol=1e-5, rtol=1e-4)


def test_batch_norm_running_stats_update_in_place():
    m = nn.BatchNorm1d(3).to(TPU)
    rm = m.running_mean
    x = torch.randn(8, 3)
    m(x.to(TPU))
    assert m.running_mean is rm
    assert_close(rm.cpu(), 0.1 * x.mean(0))
    assert m.num_batches_tracked.item() == 1


def test_batch_norm_mixed_half_stats():
    x = torch.randn(4, 3, 2).bfloat16()
    args = (torch.ones(3), torch.zeros(3), torch.zeros(3), torch.ones(3), True, 0.1, 1e-5)
    expected = torch.native_batch_norm(x, *args)
    actual = torch.native_batch_norm(x.to(TPU), *[a.to(TPU) if isinstance(a, torch.Tensor)
                                                  else a for a in args])
    for e, a in zip(expected, actual):
        assert a.dtype == e.dtype and a.shape == e.shape
        assert_close(a.cpu(), e, atol=2e-2, rtol=2e-2)


# ----------------------------------------------------------- group norm --

@pytest.mark.parametrize("groups,shape", [(2, (3, 4, 5)), (3, (2, 6, 4, 4)), (1, (2, 4))])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(groups, shape, affine):
    m = nn.GroupNorm(groups, shape[1], affine=affine)
    compare_module(randomize(m), torch.randn(shape), atol=1e-5, rtol=1e-4)


def test_group_norm_errors():
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(torch.randn(2, 6, 3, device=TPU), 4)
