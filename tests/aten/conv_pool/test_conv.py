"""Convolution forward and backward against CPU: 1d/2d/3d, stride, padding,
dilation, groups, bias, transposed with output_padding."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

TPU = torch.device("tpu")

CASES = [
    # (dims, in_ch, out_ch, kernel, stride, padding, dilation, groups, bias, input size)
    (1, 3, 4, 3, 1, 0, 1, 1, True, 10),
    (1, 4, 6, 5, 2, 2, 1, 2, False, 17),
    (2, 3, 8, 3, 1, 1, 1, 1, True, 9),
    (2, 4, 4, 3, 2, 1, 2, 4, True, 11),   # depthwise, dilated, strided
    (2, 6, 4, 2, 3, 0, 1, 2, False, 10),  # stride leaves a remainder
    (3, 2, 3, 2, 1, 1, 1, 1, True, 5),
]


def _run(conv, x, w, b, kw, device):
    x = x.to(device).requires_grad_()
    w = w.to(device).requires_grad_()
    b = b.to(device).requires_grad_() if b is not None else None
    y = conv(x, w, b, **kw)
    g = torch.linspace(-1, 1, y.numel()).reshape(y.shape).to(device)
    (y * g).sum().backward()
    grads = [x.grad, w.grad] + ([b.grad] if b is not None else [])
    return [y.detach().cpu()] + [t.cpu() for t in grads]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}d-g{c[7]}-s{c[4]}")
def test_conv_forward_backward(case, highest_matmul_precision):
    dims, cin, cout, k, s, p, d, g, bias, size = case
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[dims]
    x = torch.randn(2, cin, *([size] * dims))
    w = torch.randn(cout, cin // g, *([k] * dims))
    b = torch.randn(cout) if bias else None
    kw = dict(stride=s, padding=p, dilation=d, groups=g)
    for got, want in zip(_run(conv, x, w, b, kw, TPU), _run(conv, x, w, b, kw, "cpu")):
        assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", CASES[:5], ids=lambda c: f"{c[0]}d-g{c[7]}-s{c[4]}")
def test_conv_transpose_forward_backward(case, highest_matmul_precision):
    dims, cin, cout, k, s, p, d, g, bias, size = case
    conv = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
    x = torch.randn(2, cin, *([size // 2] * dims))
    w = torch.randn(cin, cout // g, *([k] * dims))
    b = torch.randn(cout) if bias else None
    kw = dict(stride=s, padding=min(p, k - 1), dilation=d, groups=g,
              output_padding=s - 1 if s > 1 else 0)
    if kw["output_padding"] >= max(s, d):
        kw["output_padding"] = 0
    for got, want in zip(_run(conv, x, w, b, kw, TPU), _run(conv, x, w, b, kw, "cpu")):
        assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_conv_module_training_step_matches_cpu(highest_matmul_precision):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 8, 3, stride=2, groups=2), torch.nn.Flatten(),
                              torch.nn.LazyLinear(5))
    x = torch.randn(4, 3, 12, 12)
    net(x)
    net_t = __import__("copy").deepcopy(net).to(TPU)
    for model, inp in ((net, x), (net_t, x.to(TPU))):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = model(inp).square().mean()
        loss.backward()
        opt.step()
    for p_c, p_t in zip(net.parameters(), net_t.parameters()):
        assert_close(p_t.detach().cpu(), p_c.detach(), rtol=1e-4, atol=1e-5)


def test_conv_errors_match_cpu():
    x = torch.randn(1, 3, 8, 8, device=TPU)
    w = torch.randn(4, 2, 3, 3, device=TPU)
    with pytest.raises(RuntimeError, match="expected input"):
        F.conv2d(x, w)
    with pytest.raises(RuntimeError, match="Kernel size can't be greater"):
        F.conv2d(torch.randn(1, 3, 2, 2, device=TPU), torch.randn(4, 3, 3, 3, device=TPU))
