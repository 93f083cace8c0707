"""ctc_loss (both length forms, zero_infinity, unbatched, errors) and the
multi-margin losses on tpu against CPU, forward and backward."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- ctc_loss --

def _ctc_inputs(T=12, N=4, C=6, S=5, concat=False, zero_len=False, impossible=False):
    logits = torch.randn(T, N, C)
    lp = logits.log_softmax(2)
    targets = torch.randint(1, C, (N, S))
    if impossible:
        targets[0, :3] = 2  # repeats need blanks between them: 3 + 2 > T for T = 4
    il = torch.randint(max(T // 2, 1), T + 1, (N,))
    il[0] = T
    tl = torch.randint(1, S + 1, (N,))
    tl[min(1, N - 1)] = S
    if zero_len:
        tl[min(2, N - 1)] = 0
    if impossible:
        tl[0] = 3
    # Every other sample has an alignment: a target with r adjacent repeats
    # needs at least length + r input frames (a blank between repeats).
    for i in range(1 if impossible else 0, N):
        t = targets[i, :tl[i]]
        il[i] = min(T, max(int(il[i]), int(tl[i]) + int((t[1:] == t[:-1]).sum())))
    if concat:
        targets = torch.cat([targets[i, :tl[i]] for i in range(N)])
    return lp, targets, il, tl


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("concat", [False, True], ids=["padded", "concat"])
def test_ctc_loss(reduction, concat):
    lp, targets, il, tl = _ctc_inputs(concat=concat, zero_len=True)
    compare_grad(lambda x: F.ctc_loss(x, targets.to(x.device), il.to(x.device), tl.to(x.device),
                                      reduction=reduction), lp, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_zero_infinity(zero_infinity):
    lp, targets, il, tl = _ctc_inputs(T=4, S=3, impossible=True)
    il[0] = 4

    def fn(x):
        return F.ctc_loss(x, targets.to(x.device), il.to(x.device), tl.to(x.device),
                          reduction="sum" if zero_infinity else "none", zero_infinity=zero_infinity)
    if zero_infinity:
        compare_grad(fn, lp, atol=1e-4, rtol=1e-4)
    else:  # the impossible element's loss is inf (its gradient NaN, as on CPU)
        c, t = fn(lp), fn(lp.to(TPU))
        assert torch.isinf(c[0]) and torch.isinf(t[0].cpu())
        assert_close(t.cpu(), c)


def test_ctc_loss_int_list_lengths_blank_and_cpu_lengths():
    lp, targets, il, tl = _ctc_inputs(T=10, N=3, C=5, S=4)
    blank = 4
    targets = torch.where(targets == blank, 0, targets)
    compare_grad(lambda x: F.ctc_loss(x, targets.to(x.device), il.tolist(), tl.tolist(),
                                      blank=blank), lp, atol=1e-4, rtol=1e-4)
    # lengths left on the CPU, log_probs on tpu
    x = lp.to(TPU).requires_grad_()
    out = F.ctc_loss(x, targets.to(TPU), il, tl, blank=blank)
    assert_close(out.cpu(), F.ctc_loss(lp, targets, il, tl, blank=blank), atol=1e-4, rtol=1e-4)


def test_ctc_loss_unbatched_and_raw():
    lp, targets, il, tl = _ctc_inputs(N=1)
    compare_grad(lambda x: F.ctc_loss(x[:, 0], targets[0].to(x.device), il[0].to(x.device),
                                      tl[0].to(x.device)), lp, atol=1e-4, rtol=1e-4)
    nll_c, _ = torch._ctc_loss(lp, targets, il.tolist(), tl.tolist())
    nll_t, alpha_t = torch._ctc_loss(lp.to(TPU), targets.to(TPU), il.tolist(), tl.tolist())
    assert alpha_t.shape == (1, lp.shape[0], 2 * int(tl.max()) + 1)
    assert_close(nll_t.cpu(), nll_c, atol=1e-4, rtol=1e-4)


def test_ctc_loss_errors():
    lp, targets, il, tl = _ctc_inputs()
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(lp.to(TPU), targets.to(TPU), il.tolist(), tl.tolist(), blank=6)
    with pytest.raises(RuntimeError, match="input_lengths must be of size batch_size"):
        torch._ctc_loss(lp.to(TPU), targets.to(TPU), il.tolist()[:2], tl.tolist())


# ------------------------------------------------------------ small ops --

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(reduction, p):
    x, t, w = torch.randn(5, 4), torch.randint(0, 4, (5,)), torch.rand(4)
    compare_grad(lambda a: F.multi_margin_loss(a, t.to(a.device), p=p, margin=0.7,
                                               weight=w.to(a.device), reduction=reduction), x)
    compare_grad(lambda a: F.multi_margin_loss(a, t[0].to(a.device), reduction=reduction), x[0])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    x = torch.randn(4, 5)
    t = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 2, 3, 4], [4, 4, 1, -1, 0]])
    compare_grad(lambda a: F.multilabel_margin_loss(a, t.to(a.device), reduction=reduction), x)
