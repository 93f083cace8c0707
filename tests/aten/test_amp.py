"""Mixed precision on tpu: torch.autocast(device_type="tpu") with CUDA's cast
policy, and torch.amp.GradScaler("tpu") against the same scaler on CPU."""

import pytest
import torch
from torch import nn
from torch.testing import assert_close

TPU = torch.device("tpu")


def test_default_autocast_dtype_is_bfloat16():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.amp.is_autocast_available("tpu")
    assert torch.bfloat16 in torch.tpu.get_amp_supported_dtype()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cast_policy(dtype):
    a = torch.randn(8, 8, device=TPU)
    w = torch.randn(4, 3, 3, 3, device=TPU)
    img = torch.randn(2, 3, 8, 8, device=TPU)
    q = torch.randn(1, 2, 4, 8, device=TPU)
    with torch.autocast("tpu", dtype=dtype):
        assert torch.is_autocast_enabled("tpu") and torch.get_autocast_dtype("tpu") == dtype
        mm = a @ a
        assert mm.dtype == dtype
        assert torch.nn.functional.linear(a, a).dtype == dtype
        assert torch.nn.functional.conv2d(img, w).dtype == dtype
        assert torch.nn.functional.scaled_dot_product_attention(q, q, q).dtype == dtype
        # Reductions, norms, losses, softmax and transcendentals run in float32.
        assert mm.sum().dtype == torch.float32
        assert torch.softmax(mm, -1).dtype == torch.float32
        assert torch.nn.functional.layer_norm(mm, (8,)).dtype == torch.float32
        assert torch.nn.functional.mse_loss(mm, a).dtype == torch.float32
        assert mm.exp().dtype == torch.float32
        # Mixed inputs promote to the widest.
        assert torch.addcmul(a, mm, mm).dtype == torch.float32
        # Ops outside the lists keep their input dtype.
        assert (mm + 1).dtype == dtype and a.relu().dtype == torch.float32
    assert (a @ a).dtype == torch.float32


def test_autocast_matches_cpu_autocast_bfloat16():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    tpu = __import__("copy").deepcopy(model).to(TPU)
    x = torch.randn(8, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = model(x)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        got = tpu(x.to(TPU))
    assert got.dtype == want.dtype == torch.bfloat16
    assert_close(got.float().cpu(), want.float(), rtol=2e-2, atol=2e-2)


def test_binary_cross_entropy_is_refused_under_autocast():
    p = torch.rand(4, device=TPU)
    with torch.autocast("tpu"), pytest.raises(RuntimeError, match="unsafe to autocast"):
        torch.nn.functional.binary_cross_entropy(p, p)


def test_autocast_decorators_and_custom_fwd():
    class Square(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="tpu", cast_inputs=torch.float32)
        def forward(ctx, x):
            ctx.save_for_backward(x)
            assert not torch.is_autocast_enabled("tpu") and x.dtype == torch.float32
            return x * x

        @staticmethod
        @torch.amp.custom_bwd(device_type="tpu")
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = torch.randn(5, device=TPU, dtype=torch.bfloat16, requires_grad=True)

    @torch.autocast(device_type="tpu", dtype=torch.bfloat16)
    def run(x):
        return Square.apply(x)

    y = run(x)
    assert y.dtype == torch.float32
    y.sum().backward()
    assert_close(x.grad.float().cpu(), (2 * x.detach().float()).cpu())


def _scaler_run(device, grads_nonfinite_at, steps=6):
    torch.manual_seed(0)
    model = nn.Linear(4, 3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0 ** 8, growth_interval=2)
    scales, weights = [], []
    for step in range(steps):
        x = torch.randn(5, 4).to(device)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        if step in grads_nonfinite_at:
            model.weight.grad[0, 0] = float("inf") if step % 2 else float("nan")
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(model.weight.detach().cpu().clone())
    return scales, weights


def test_grad_scaler_matches_cpu(highest_matmul_precision):
    cpu = _scaler_run(torch.device("cpu"), {2, 3})
    tpu = _scaler_run(TPU, {2, 3})
    assert tpu[0] == cpu[0]  # the same backoffs and growths
    for a, b in zip(cpu[1], tpu[1]):
        assert_close(b, a, rtol=1e-5, atol=1e-6)


def test_unscale_and_update_kernels_directly():
    grads = [torch.randn(3, 4, device=TPU), torch.randn(5, device=TPU, dtype=torch.bfloat16)]
    found = torch.zeros(1, device=TPU)
    inv = torch.full((1,), 0.25, device=TPU)
    expected = [g.cpu().float() * 0.25 for g in grads]
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
    assert found.item() == 0
    for g, e in zip(grads, expected):
        assert_close(g.float().cpu(), e, rtol=1e-2, atol=1e-2)
    grads[1][2] = float("inf")
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
    assert found.item() == 1
    scale = torch.full((1,), 8.0, device=TPU)
    tracker = torch.zeros(1, dtype=torch.int32, device=TPU)
    torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 2)
    assert scale.item() == 4.0 and tracker.item() == 0
    found.zero_()
    for want_scale, want_tracker in [(4.0, 1), (8.0, 0), (8.0, 1)]:
        torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 2)
        assert (scale.item(), tracker.item()) == (want_scale, want_tracker)
    with pytest.raises(RuntimeError, match="found_inf must be a float tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found.long(), inv)
