"""Losses on tpu against CPU, forward and backward: mse / smooth_l1 / huber /
binary_cross_entropy (every reduction, weights, broadcasting), and
binary_cross_entropy_with_logits and kl_div, which are built from them."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("loss,kw", [
    (F.mse_loss, {}), (F.l1_loss, {}),
    (F.smooth_l1_loss, {"beta": 0.5}), (F.smooth_l1_loss, {"beta": 0.0}),
    (F.huber_loss, {"delta": 0.7}),
], ids=["mse", "l1", "smooth_l1", "smooth_l1_beta0", "huber"])
def test_regression_losses(loss, kw, reduction):
    x, t = torch.randn(6, 5), torch.randn(6, 5)
    compare_grad(lambda a, b: loss(a, b, reduction=reduction, **kw), x, t)


def test_mse_broadcasting_target_and_bf16():
    x, t = torch.randn(4, 3), torch.randn(3)
    with pytest.warns(UserWarning, match="target size"):
        compare_grad(lambda a, b: F.mse_loss(a, b), x, t, rtol=1e-5, atol=1e-5)
    xb, tb = torch.randn(8, 8).bfloat16(), torch.randn(8, 8).bfloat16()
    compare_grad(lambda a, b: F.mse_loss(a, b, reduction="sum"), xb, tb, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(reduction, weighted):
    x = torch.rand(5, 7).clamp(0.01, 0.99)
    t = torch.rand(5, 7)
    w = torch.rand(5, 7) if weighted else None
    compare_grad(lambda a, b: F.binary_cross_entropy(a, b, weight=w if w is None else w.to(a.device),
                                                     reduction=reduction), x, t, grad_of=[0])


def test_binary_cross_entropy_log_clamp_and_errors():
    x = torch.tensor([0.0, 1.0, 0.5])
    t = torch.tensor([1.0, 0.0, 0.5])
    assert_close(F.binary_cross_entropy(x.to(TPU), t.to(TPU), reduction="none").cpu(),
                 F.binary_cross_entropy(x, t, reduction="none"))  # log clamped at -100
    with pytest.raises(ValueError, match="target size"):
        F.binary_cross_entropy(torch.rand(3, device=TPU), torch.rand(4, device=TPU))


def test_bce_with_logits_and_kl_div():
    x, p = torch.randn(4, 6), torch.rand(4, 6)
    pw = torch.rand(6) + 0.5
    compare_grad(lambda a, b: F.binary_cross_entropy_with_logits(a, b, pos_weight=pw.to(a.device)),
                 x, p, grad_of=[0])
    compare_grad(lambda a, b: F.kl_div(a.log_softmax(-1), b.softmax(-1), reduction="batchmean"), x, p)
    compare_grad(lambda a, b: F.kl_div(a.log_softmax(-1), b.log_softmax(-1), reduction="sum",
                                       log_target=True), x, p)


def test_loss_argument_errors_as_cpu():
    with pytest.raises(ValueError, match="For 1D input, 1D target must have size 1"):
        F.nll_loss(torch.randn(10, device="tpu"), torch.randint(0, 10, (3,), device="tpu"))
    e = torch.tensor([], dtype=torch.long, device="tpu")
    with pytest.raises(RuntimeError, match="log_probs tensor must not be empty"):
        F.ctc_loss(torch.rand(0, 0, 4, device="tpu"), e, e, e, reduction="none")


def test_hardswish_grad_at_the_corners():
    x = torch.tensor([-3.0, 3.0], requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    F.hardswish(x).sum().backward()
    F.hardswish(xt).sum().backward()
    assert xt.grad.cpu().tolist() == x.grad.tolist() == [0.0, 1.0]
