"""torch.optim.Adam/AdamW/SGD(fused=True) on tpu against the CPU's fused kernel:
one program for the whole step, every option."""

import copy

import pytest
import torch
from torch import nn


def run(opt_cls, device, steps=3, dtype=torch.float32, **kw):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3)).to(dtype)
    model = copy.deepcopy(model).to(device)
    opt = opt_cls(model.parameters(), fused=True, **kw)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(5, 6, generator=g).to(dtype).to(device)
        model(x).float().square().mean().backward()
        opt.step()
        opt.zero_grad()
    return [p.detach().float().cpu() for p in model.parameters()]


@pytest.mark.parametrize("opt_cls", [torch.optim.Adam, torch.optim.AdamW])
@pytest.mark.parametrize("kw", [{}, {"weight_decay": 0.1}, {"amsgrad": True}, {"maximize": True},
                                {"lr": torch.tensor(0.01)}],
                         ids=["plain", "weight_decay", "amsgrad", "maximize", "tensor_lr"])
def test_fused_adam_matches_cpu(opt_cls, kw, highest_matmul_precision):
    kw = dict(kw)
    if "lr" not in kw:
        kw["lr"] = 0.01
    got = run(opt_cls, "tpu", **kw)
    ref = run(opt_cls, "cpu", **{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()})
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_fused_adamw_bf16_params(highest_matmul_precision):
    got = run(torch.optim.AdamW, "tpu", dtype=torch.bfloat16, lr=0.01)
    ref = run(torch.optim.AdamW, "cpu", dtype=torch.bfloat16, lr=0.01)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2)


def test_fused_adam_skips_step_on_found_inf():
    p = torch.randn(4, device="tpu")
    before = p.cpu().clone()
    m, v = torch.zeros(4, device="tpu"), torch.zeros(4, device="tpu")
    step = torch.ones((), device="tpu")
    g = torch.randn(4, device="tpu")
    torch._fused_adam_([p], [g], [m], [v], [], [step], lr=0.1, beta1=0.9, beta2=0.999,
                       weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False,
                       grad_scale=torch.tensor(2.0, device="tpu"), found_inf=torch.tensor(1.0, device="tpu"))
    assert torch.equal(p.cpu(), before) and m.abs().sum().item() == 0


@pytest.mark.parametrize("kw", [{}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True},
                                {"momentum": 0.9, "dampening": 0.3, "weight_decay": 0.1},
                                {"maximize": True, "weight_decay": 0.05},
                                {"momentum": 0.5, "lr": torch.tensor(0.05)}],
                         ids=["plain", "momentum", "nesterov", "dampening_wd", "maximize",
                              "tensor_lr"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_sgd_matches_cpu(kw, dtype, highest_matmul_precision):
    kw = dict(kw)
    kw.setdefault("lr", 0.05)
    got = run(torch.optim.SGD, "tpu", dtype=dtype, **kw)
    ref = run(torch.optim.SGD, "cpu", dtype=dtype,
              **{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()})
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_fused_sgd_skips_step_on_found_inf():
    p = torch.randn(4, device="tpu")
    buf = torch.randn(4, device="tpu")
    before, buf_before = p.cpu().clone(), buf.cpu().clone()
    torch._fused_sgd_([p], [torch.randn(4, device="tpu")], [buf], weight_decay=0.0,
                      momentum=0.9, lr=0.1, dampening=0.0, nesterov=False, maximize=False,
                      is_first_step=False, grad_scale=torch.tensor(2.0, device="tpu"),
                      found_inf=torch.tensor(1.0, device="tpu"))
    assert torch.equal(p.cpu(), before) and torch.equal(buf.cpu(), buf_before)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_fused_steps_leave_gradients_unscaled(opt):
    # as CPU's and CUDA's fused kernels: with a grad_scale the gradients are
    # divided in place (and left alone when found_inf is set)
    for inf in (0.0, 1.0):
        p = torch.randn(4, device="tpu")
        g = torch.full((4,), 8.0, device="tpu")
        kw = dict(grad_scale=torch.tensor(4.0, device="tpu"),
                  found_inf=torch.tensor(inf, device="tpu"))
        if opt == "sgd":
            torch._fused_sgd_([p], [g], [], weight_decay=0.0, momentum=0.0, lr=0.1,
                              dampening=0.0, nesterov=False, maximize=False,
                              is_first_step=True, **kw)
        else:
            m, v = torch.zeros(4, device="tpu"), torch.zeros(4, device="tpu")
            torch._fused_adam_([p], [g], [m], [v], [], [torch.ones((), device="tpu")], lr=0.1,
                               beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8,
                               amsgrad=False, maximize=False, **kw)
        assert g.cpu().tolist() == ([2.0] * 4 if inf == 0 else [8.0] * 4)
