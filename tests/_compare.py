"""The comparison the op test files share: an op on tpu against CPU,
forward and backward."""

import torch
from torch.testing import assert_close

TPU = torch.device("tpu")


def compare_grad(fn, *inputs, grad_of=None, rtol=None, atol=None, equal_nan=False):
    """fn(*inputs) -> tensor or tuple: every output, and the gradients of the
    inputs listed in grad_of (all by default) through the first output, tpu
    against CPU, with fresh random upstream gradients."""
    grad_of = range(len(inputs)) if grad_of is None else grad_of
    cpu = [x.clone().requires_grad_(i in grad_of) for i, x in enumerate(inputs)]
    tpu = [x.to(TPU).requires_grad_(i in grad_of) for i, x in enumerate(inputs)]
    out_c, out_t = fn(*cpu), fn(*tpu)
    if not isinstance(out_c, tuple):
        out_c, out_t = (out_c,), (out_t,)
    for c, t in zip(out_c, out_t):
        assert t.dtype == c.dtype and t.shape == c.shape, (t.dtype, t.shape, c.dtype, c.shape)
        assert_close(t.detach().cpu(), c.detach(), rtol=rtol, atol=atol, equal_nan=equal_nan)
    g = torch.randn_like(out_c[0])
    out_c[0].backward(g)
    out_t[0].backward(g.to(TPU))
    for i in grad_of:
        if cpu[i].grad is None:  # no gradient flows (e.g. the 0-"norm")
            assert tpu[i].grad is None
            continue
        assert_close(tpu[i].grad.cpu(), cpu[i].grad, rtol=rtol, atol=atol, equal_nan=equal_nan)
