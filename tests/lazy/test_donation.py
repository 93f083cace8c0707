"""Buffer donation: a program that updates a tensor in place (an optimizer
step, add_, x[i] = v) reuses the memory of the tensor's old value when
nothing else holds it, in every eager mode, and never when something does:
values always match CPU."""

import contextlib
import copy

import pytest
import torch

import torch_tpu
import torch_tpu.metrics as tm
from torch_tpu import EagerMode

TPU = torch.device("tpu")

MODES = {"strict": EagerMode.DEFER_NEVER, "fused": EagerMode.DEFER_AND_FUSE}


@contextlib.contextmanager
def donation(on):
    prev = torch_tpu._C._donation()
    torch_tpu._C._set_donation(on)
    try:
        yield
    finally:
        torch_tpu._C._set_donation(prev)


def donated():
    torch.tpu.synchronize()
    return tm.metrics()["buffers_donated"]


@pytest.mark.parametrize("mode", MODES)
def test_in_place_update_reuses_the_old_buffer(mode):
    p_cpu, g_cpu = torch.randn(256, 512), torch.randn(256, 512)
    with torch_tpu.eager_mode(MODES[mode]):
        p, g = p_cpu.to(TPU), g_cpu.to(TPU)
        torch.tpu.synchronize()
        tm.reset()
        before = torch.tpu.memory_allocated()
        torch.tpu.reset_peak_memory_stats()
        for _ in range(3):
            p.add_(g, alpha=-0.5)
        assert donated() >= 1
        # The old values' memory went to the new ones: nothing grew (but
        # alpha's 0-d value), and no moment held two copies of p.
        assert torch.tpu.memory_allocated() < before + 64
        assert torch.tpu.max_memory_allocated() < before + p.nbytes // 2
        torch.testing.assert_close(p.cpu(), p_cpu - 1.5 * g_cpu)


@pytest.mark.parametrize("mode", MODES)
def test_partial_write_donates_the_storage(mode):
    x_cpu, v_cpu = torch.randn(64, 128), torch.randn(8, 128)
    with torch_tpu.eager_mode(MODES[mode]):
        x = x_cpu.to(TPU)
        torch.tpu.synchronize()
        tm.reset()
        x[3:11] = v_cpu.to(TPU)
        x[:, 5] += 1
        assert donated() >= 1
        x_cpu[3:11] = v_cpu
        x_cpu[:, 5] += 1
        torch.testing.assert_close(x.cpu(), x_cpu)


def test_a_value_still_held_is_never_donated(highest_matmul_precision):
    # Programs launched earlier still read p's old value when add_ runs
    # (Strict Eager launches asynchronously): the plugin orders the donation
    # after those reads. A clone that shares p's old value keeps it.
    a_cpu = torch.randn(768, 768) / 28
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
        p = a_cpu.to(TPU)
        torch.tpu.synchronize()
        tm.reset()
        y = p @ p @ p @ p  # in flight while p is overwritten
        p.add_(1.0)
        assert tm.metrics()["buffers_donated"] == 1
        z = p.detach().clone()
        p.mul_(2.0)
    ref = a_cpu @ a_cpu @ a_cpu @ a_cpu
    assert (y.cpu() - ref).abs().max() <= 1e-5 * ref.abs().max()
    torch.testing.assert_close(z.cpu(), a_cpu + 1.0)
    torch.testing.assert_close(p.cpu(), (a_cpu + 1.0) * 2.0)


def test_small_constants_are_not_donated():
    # 0-d values may come from the runtime's cache of scalars: an in-place
    # update of one must never change what the next zeros() reads.
    for _ in range(3):
        a = torch.zeros((), device=TPU)
        a.add_(1.0)
        b = torch.zeros((), device=TPU)
        c = torch.full((), 2.0, device=TPU)
        c.mul_(3.0)
        assert a.item() == 1.0 and b.item() == 0.0 and c.item() == 6.0
        assert torch.full((), 2.0, device=TPU).item() == 2.0


def _adamw_peak(mode, donate, model_cpu, x_cpu):
    with torch_tpu.eager_mode(MODES[mode]), donation(donate):
        model = copy.deepcopy(model_cpu).to(TPU)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        x = x_cpu.to(TPU)
        losses = []
        for step in range(3):
            if step == 2:  # the state exists: measure a steady step
                torch.tpu.synchronize()
                torch.tpu.reset_peak_memory_stats()
                tm.reset()
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        n = donated()
        return losses, torch.tpu.max_memory_allocated(), n, [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("mode", MODES)
def test_optimizer_step_peak_memory_drops(mode, highest_matmul_precision):
    model_cpu = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 256))
    x_cpu = torch.randn(16, 256)
    on_losses, on_peak, on_n, on_params = _adamw_peak(mode, True, model_cpu, x_cpu)
    off_losses, off_peak, off_n, off_params = _adamw_peak(mode, False, model_cpu, x_cpu)
    assert off_n == 0 and on_n >= 4, (on_n, off_n)
    param_bytes = sum(p.nbytes for p in model_cpu.parameters())
    # Without donation each updated parameter and state tensor briefly
    # exists twice; with it, at least the parameters' size less.
    assert on_peak <= off_peak - param_bytes, (on_peak, off_peak, param_bytes)
    # Same values as CPU, with and without.
    ref = copy.deepcopy(model_cpu)
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    ref_losses = []
    for _ in range(3):
        loss = ref(x_cpu).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        ref_losses.append(loss.item())
    assert on_losses == pytest.approx(ref_losses, rel=1e-4)
    assert off_losses == pytest.approx(ref_losses, rel=1e-4)
    # Adam divides by sqrt(v): where a gradient is near 0, a rounding
    # difference moves the update by a visible fraction of lr (1e-2).
    for a, b, c in zip(on_params, off_params, ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(a, c.detach(), rtol=1e-3, atol=2e-4)


def test_a_compiled_graph_updating_its_own_constant_replays_right():
    # A graph that makes a tensor and updates it in place replays with the
    # values of its first run (a capture's first run donates nothing: its
    # arguments become the replays' constants).
    def f(x):
        t = torch.tensor([1.0, 2.0, 3.0], device=x.device)
        t.add_(x)
        return t * 2

    cf = torch.compile(f, backend="tpu")
    for _ in range(4):
        x = torch.randn(3)
        torch.testing.assert_close(cf(x.to(TPU)).cpu(), f(x))


def _loop_peak(mode, model_cpu, x_cpu, y_cpu, sync_each_step):
    model = copy.deepcopy(model_cpu).to(TPU)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = x_cpu.to(TPU), y_cpu.to(TPU)
    losses = []
    with torch_tpu.eager_mode(MODES[mode]):
        for step in range(6):
            if step == 2:
                torch.tpu.synchronize()
                torch.tpu.reset_peak_memory_stats()
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())  # waits for the forward only
            if sync_each_step:
                torch.tpu.synchronize()
        torch.tpu.synchronize()
    return torch.tpu.max_memory_allocated(), losses


@pytest.mark.parametrize("mode", MODES)
def test_a_loop_running_ahead_of_the_device_peaks_no_higher_than_a_waiting_one(
        mode, highest_matmul_precision):
    # The host records step n+1 while the device still runs step n's backward;
    # the buffers only that program still holds (its activations) must be
    # released before step n+1's programs allocate theirs, or the loop holds
    # two steps' activations (the GPT step's Fused peak was 289 MiB against
    # 131 synchronized).
    torch.manual_seed(0)
    model_cpu = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                    torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                    torch.nn.Linear(1024, 256))
    x_cpu, y_cpu = torch.randn(512, 256), torch.randn(512, 256)
    ahead_peak, ahead_losses = _loop_peak(mode, model_cpu, x_cpu, y_cpu, sync_each_step=False)
    waiting_peak, waiting_losses = _loop_peak(mode, model_cpu, x_cpu, y_cpu, sync_each_step=True)
    activations = 512 * (1024 + 1024) * 4 * 2  # two hidden layers, before and after ReLU
    assert ahead_peak < waiting_peak + activations // 4, (ahead_peak, waiting_peak)
    ref = copy.deepcopy(model_cpu)
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-3)
    ref_losses = []
    for _ in range(6):
        loss = torch.nn.functional.mse_loss(ref(x_cpu), y_cpu)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ref_losses.append(loss.item())
    assert ahead_losses == pytest.approx(ref_losses, rel=1e-4)
    assert waiting_losses == pytest.approx(ref_losses, rel=1e-4)
