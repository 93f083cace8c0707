"""softshrink, hardshrink, threshold, logit, prelu, sinc, frac, erfc and
nan_to_num on tpu against CPU, forward and backward."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


@pytest.mark.parametrize("fn", [
    lambda t: F.softshrink(t, 1.0), lambda t: F.softshrink(t), lambda t: F.hardshrink(t, 0.7),
    lambda t: F.threshold(t, 0.5, -2.0), lambda t: torch.sinc(t), lambda t: torch.frac(t),
    lambda t: torch.erfc(t / 3), lambda t: F.relu6(t),
], ids=["softshrink1", "softshrink", "hardshrink", "threshold", "sinc", "frac", "erfc", "relu6"])
def test_unary_activation(fn):
    x = torch.randn(6, 7) * 4
    x[0, 0] = 0.0
    compare_grad(fn, x, atol=1e-6, rtol=1e-5)
    compare_grad(fn, x.bfloat16(), atol=1e-2, rtol=1e-2)


def test_logit():
    p = torch.rand(50) * 0.98 + 0.01
    compare_grad(torch.logit, p, atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: torch.logit(t, 0.2), torch.rand(50), atol=1e-5, rtol=1e-5)
    y = p.to(TPU)
    y.logit_()
    assert_close(y.cpu(), torch.logit(p), atol=1e-5, rtol=1e-5)
    assert_close(torch.logit(torch.tensor([0, 1, 2]).to(TPU)).cpu(),
                 torch.logit(torch.tensor([0, 1, 2])), equal_nan=True)


def test_prelu_and_inplace_forms():
    compare_grad(F.prelu, torch.randn(2, 3, 4, 5), torch.rand(3), atol=1e-6, rtol=1e-5)
    compare_grad(F.prelu, torch.randn(2, 3), torch.rand(1), atol=1e-6, rtol=1e-5)
    compare_grad(F.prelu, torch.randn(3, 4, 2), torch.rand(4), atol=1e-6, rtol=1e-5)
    x = torch.randn(10)
    y = x.to(TPU)
    F.threshold_(y, 0.1, 5.0)
    assert_close(y.cpu(), F.threshold(x, 0.1, 5.0))
    out = torch.empty(10, device=TPU)
    torch.sinc(x.to(TPU), out=out)
    assert_close(out.cpu(), torch.sinc(x))
    assert torch.equal(F.threshold(torch.arange(5).to(TPU), 2, 9).cpu(),
                       F.threshold(torch.arange(5), 2, 9))
    # CPU's check and message: lambda within [0, the dtype's largest value]
    with pytest.raises(RuntimeError, match=r"lambda must be in range \[0, 3.40282e\+38\] for input dtype Float, but found -1"):
        F.softshrink(x.to(TPU), -1.0)
    with pytest.raises(RuntimeError, match=r"lambda must be in range \[0, 65504\] for input dtype Half, but found 65507"):
        F.softshrink(x.half().to(TPU), 65507.0)
    # threshold_ may write an expanded tensor (it is idempotent), as on CPU
    e = torch.randn((1, 6), device=TPU).expand((6, 6))
    F.threshold_(e, 0.5, 0.5)


def test_nan_to_num():
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.5, -2.0])
    for args in [(), (0.5,), (0.0, 7.0, -7.0)]:
        assert_close(torch.nan_to_num(x.to(TPU), *args).cpu(), torch.nan_to_num(x, *args))
    xb = x.bfloat16()
    assert_close(torch.nan_to_num(xb.to(TPU)).cpu(), torch.nan_to_num(xb))
    y = x.to(TPU)
    y.nan_to_num_(1.0)
    assert_close(y.cpu(), torch.nan_to_num(x, 1.0))
    i = torch.tensor([1, 2, 3])
    assert torch.equal(torch.nan_to_num(i.to(TPU)).cpu(), i)


def test_channel_shuffle():
    x = torch.randn(2, 6, 3, 3)
    for g in [1, 2, 3]:
        compare_grad(lambda t: F.channel_shuffle(t, g), x)
    y = x.to(TPU)
    r = F.channel_shuffle(y, 1)
    r.add_(1)  # a fresh tensor: the input is unchanged
    assert_close(y.cpu(), x)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_weight_norm(dim):
    v = torch.randn(4, 5)
    g = torch.rand(4, 1) if dim == 0 else torch.rand(1, 5)
    compare_grad(lambda a, b: torch._weight_norm(a, b, dim), v, g, atol=1e-6, rtol=1e-5)
    lin = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 4))
    lt = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 4)).to(TPU)
    lt.load_state_dict(lin.state_dict())
    x = torch.randn(2, 3)
    assert_close(lt(x.to(TPU)).cpu(), lin(x), atol=1e-2, rtol=1e-2)  # matmul at TPU precision


def test_rrelu():
    y = torch.randn(2000, device=TPU, requires_grad=True)
    r = F.rrelu(y, 0.1, 0.3, training=True)
    ratio = (r / y).detach().cpu()
    neg = (y < 0).cpu()
    assert ratio[neg].min() >= 0.1 and ratio[neg].max() <= 0.3
    assert ratio[neg].std() > 0.03  # random slopes
    assert (ratio[~neg] == 1).all()
    r.sum().backward()
    assert_close(y.grad.cpu(), ratio)
    x = torch.randn(50)
    assert_close(F.rrelu(x.to(TPU), 0.1, 0.3).cpu(), F.rrelu(x, 0.1, 0.3))  # eval: fixed slope
    torch.manual_seed(3)
    a = F.rrelu(y.detach(), training=True).cpu()
    torch.manual_seed(3)
    assert torch.equal(F.rrelu(y.detach(), training=True).cpu(), a)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int64, torch.uint8])
def test_hardtanh_integer_types_as_cpu(dtype):
    x = torch.randint(0 if dtype == torch.uint8 else -50, 50, (37,), dtype=dtype)
    lo, hi = (2, 20) if dtype == torch.uint8 else (-7, 9)
    torch.testing.assert_close(torch.nn.functional.hardtanh(x.to("tpu"), lo, hi).cpu(),
                               torch.nn.functional.hardtanh(x, lo, hi))
    y = x.to("tpu")
    torch.nn.functional.hardtanh_(y, lo, hi)
    torch.testing.assert_close(y.cpu(), torch.nn.functional.hardtanh(x, lo, hi))
    with pytest.raises(RuntimeError, match="Bool inputs not supported for hardtanh"):
        torch.nn.functional.hardtanh(torch.ones(3, dtype=torch.bool, device="tpu"))
    if dtype == torch.uint8:
        with pytest.raises(RuntimeError, match="unsigned type with negative limits"):
            torch.nn.functional.hardtanh(x.to("tpu"))


def test_abs_of_unsigned():
    x = torch.randint(0, 256, (19,)).to(torch.uint8)
    torch.testing.assert_close(torch.abs(x.to("tpu")).cpu(), torch.abs(x))
    torch.testing.assert_close(torch._refs.abs(x.to("tpu")).cpu(), torch.abs(x))
    for dtype in (torch.bool, torch.uint16, torch.uint32, torch.uint64):  # CPU has none
        with pytest.raises(NotImplementedError, match="not implemented for"):
            torch.abs(torch.ones(3, dtype=dtype, device="tpu"))


@pytest.mark.parametrize("fn", [lambda a: a + 3, lambda a: a.round(), lambda a: a.clip(0, 1),
                                torch.relu, lambda a: torch.where(a > 0, a, a * 2),
                                lambda a: torch.addcmul(a, a, a), F.silu],
                         ids=["add", "round", "clip", "relu", "where", "addcmul", "silu"])
def test_elementwise_results_keep_the_input_layout(fn):
    # as TensorIterator on CPU: a channels-last or transposed input gives a
    # result of the same strides
    for x in (torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last),
              torch.randn(16, 8).t()):
        got, want = fn(x.to(TPU)), fn(x)
        assert got.stride() == want.stride()
        assert_close(got.cpu(), want)


def test_pow_scalar_base_out():
    e = torch.randn(10)
    out = torch.empty(0, device=TPU)
    torch.pow(2.5, e.to(TPU), out=out)
    assert_close(out.cpu(), torch.pow(2.5, e))
