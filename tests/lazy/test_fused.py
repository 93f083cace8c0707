"""Fused Eager: deferral, materialization points, fusion, and cutting the
op stream where it repeats."""

import inspect
import sys

import pytest
import torch
import torch.nn.functional as F
import torch_tpu
from torch_tpu import EagerMode


def test_ops_defer_until_a_value_is_needed():
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
        xc = torch.randn(6, 5)
        x = xc.to("tpu")
        y = (x * 2 + 1).tanh().sum(1)
        assert not torch_tpu.is_materialized(y)
        assert torch_tpu._C._pending_ops() >= 4
        torch.testing.assert_close(y.cpu(), (xc * 2 + 1).tanh().sum(1))
        assert torch_tpu.is_materialized(y)
        assert torch_tpu._C._pending_ops() == 0


def test_materialization_points():
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
        x = torch.arange(6.0).to("tpu") * 3
        assert x.sum().item() == 45.0                       # item
        assert (x > 4).tolist() == [False, False, True, True, True, True]  # tolist
        y = x + 1
        torch_tpu.synchronize([y])                          # explicit
        assert torch_tpu.is_materialized(y)
        z = x - 1
        torch.tpu.synchronize()                             # device-wide
        assert torch_tpu.is_materialized(z)
        w = x * 0
        assert "0." in str(w.cpu())
        if bool((x > 100).any().cpu()):                     # data-dependent control flow
            raise AssertionError


def test_one_program_for_a_chain_and_intermediates_not_kept():
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
        x = torch.randn(16, 16).to("tpu")
        s0 = torch.tpu._get_cache_stats()
        y = x
        for _ in range(20):
            y = torch.relu(y * 0.9 + 0.1)
        out = y.cpu()
        s1 = torch.tpu._get_cache_stats()
        assert s1["launches"] - s0["launches"] == 1
        ref = x.cpu()
        for _ in range(20):
            ref = torch.relu(ref * 0.9 + 0.1)
        torch.testing.assert_close(out, ref)


def test_in_place_and_views_inside_a_fused_program():
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
        base_c = torch.randn(4, 6)
        base = base_c.to("tpu")
        v = base[:, 1:4]
        v.mul_(2)
        base[0].add_(10)
        base_c[:, 1:4].mul_(2)
        base_c[0].add_(10)
        torch.testing.assert_close(base.cpu(), base_c)


def test_training_loop_without_reads_cuts_at_the_step_and_hits_the_cache(highest_matmul_precision):
    torch.manual_seed(0)
    model_c = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model.load_state_dict(model_c.state_dict())
    model = model.to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(model_c.parameters(), lr=0.1)
    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
    xt, yt = x.to("tpu"), y.to("tpu")
    torch_tpu._C._set_max_pending_ops(200)
    try:
        with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
            for step in range(60):
                loss = F.cross_entropy(model(xt), yt)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if step == 30:
                    s_mid = torch.tpu._get_cache_stats()
            final = loss.item()
            s_end = torch.tpu._get_cache_stats()
    finally:
        torch_tpu._C._set_max_pending_ops(2048)
    for _ in range(60):
        loss_c = F.cross_entropy(model_c(x), y)
        opt_c.zero_grad()
        loss_c.backward()
        opt_c.step()
    torch.testing.assert_close(final, loss_c.item(), rtol=1e-4, atol=1e-5)
    # After the period is found, every batch has the same structure: the
    # second half of the loop compiles nothing new.
    assert s_end["launches"] > s_mid["launches"]
    assert s_end["requests"] - s_end["hits"] <= s_mid["requests"] - s_mid["hits"] + 1


def test_scoped_mode_covers_backward_and_backward_end_flushes():
    # backward() runs on autograd's device thread: the `with` block's mode
    # must hold there too, and the end of backward() flushes.
    seen = []
    x = torch.randn(32, 32, device="tpu", requires_grad=True)
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
        y = (x.sin() * 2).cos()
        y.register_hook(lambda g: seen.append((torch_tpu.get_eager_mode(), torch_tpu._C._pending_ops())))
        y.sum().backward()
        assert torch_tpu._C._pending_ops() == 0
        assert seen[0][0] == EagerMode.DEFER_AND_FUSE and seen[0][1] > 1  # deferred inside
    torch.testing.assert_close(x.grad.cpu(), (-torch.sin(2 * x.sin()) * 2 * x.cos()).detach().cpu(),
                               rtol=1e-5, atol=1e-5)


def test_backward_launches_the_forward_graph_first(highest_matmul_precision):
    # The first op of a backward pass launches what was recorded before it:
    # the forward runs while the backward is traced, as its own program.
    xc = torch.randn(48, 48)
    x = xc.to("tpu").requires_grad_()
    seen = []
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
        h = (x @ x).tanh()
        h.register_hook(lambda g: seen.append(torch_tpu.is_materialized(h)))
        loss = (h * h).sum()
        assert not torch_tpu.is_materialized(h)
        before = torch.tpu._get_cache_stats()["launches"]
        loss.backward()
        launches = torch.tpu._get_cache_stats()["launches"] - before
        assert torch_tpu._C._pending_ops() == 0
    assert seen == [True]
    assert launches == 2  # the forward, then the backward
    xr = xc.clone().requires_grad_()
    (torch.tanh(xr @ xr) ** 2).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), xr.grad, rtol=1e-4, atol=1e-4)


def test_scoped_precision_covers_backward():
    a = torch.randn(16, 512)
    w = torch.randn(512, 8)
    grads = {}
    for p in (torch_tpu.Precision.DEFAULT, torch_tpu.Precision.HIGHEST):
        at = a.to("tpu").requires_grad_()
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch_tpu.precision(p):
                (at @ w.to("tpu")).sum().backward()  # grad = ones @ w.T: a matmul in backward
        grads[p] = at.grad.cpu()
    ref = torch.ones(16, 8).double() @ w.double().t()
    err = {p: ((g.double() - ref).abs().max() / ref.abs().max()).item() for p, g in grads.items()}
    assert err[torch_tpu.Precision.HIGHEST] < 1e-6 < err[torch_tpu.Precision.DEFAULT]


def _line_of(marker):
    src = inspect.getsource(sys.modules[__name__])
    lines = [i for i, l in enumerate(src.splitlines(), 1) if marker in l and "_line_of" not in l]
    return lines[0]


def test_deferred_failure_names_the_op_and_the_users_line():
    # A program that fails when the deferred batch compiles, at a later line
    # (the read): the error names the op and the line that issued it.
    x = torch.ones(3, device="tpu")
    with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE):
        y = x + 1
        z = torch_tpu._C._debug_failing_op(y)  # FAILS-HERE
        w = z * 2
        with pytest.raises(RuntimeError) as e:
            w.cpu()
    where = f"test_fused.py:{_line_of('# FAILS-HERE')}"
    assert f"torch_tpu::_debug_failing_op at " in str(e.value) and where in str(e.value), str(e.value)
    # Reading the failed value again raises the same error.
    with pytest.raises(RuntimeError, match="_debug_failing_op at .*test_fused.py"):
        z.cpu()


def test_deferred_failure_names_lines_of_torch_ops():
    # torch's own ops run with the GIL released; their lines are found too.
    x = torch.ones(3, device="tpu")
    with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE):
        y = x + 1  # ADD-HERE
        z = torch_tpu._C._debug_failing_op(y)
        with pytest.raises(RuntimeError) as e:
            z.cpu()
    assert f"aten::add at {__file__}:{_line_of('# ADD-HERE')}" in str(e.value), str(e.value)


def test_strict_failure_raises_on_the_call_that_issued_it():
    x = torch.ones(3, device="tpu")
    with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_NEVER):
        with pytest.raises(RuntimeError, match="_debug_failing_op"):
            torch_tpu._C._debug_failing_op(x)


def test_a_growing_tensor_recompiles_only_the_ops_that_read_it(highest_matmul_precision):
    # Decoding with a static cache: the attention mask grows by a column per
    # step while the rest of each step keeps its shapes. The rest must keep
    # its program; only the few ops whose shapes change compile anew.
    import re

    import torch_tpu.metrics as tm

    def steps(device, n=8):
        g = torch.Generator().manual_seed(0)
        w = (torch.randn(32, 32, generator=g) / 6).to(device)
        x = torch.randn(4, 32, generator=g).to(device)
        mask = torch.ones(4, 3, device=device)
        sizes = []
        for step in range(n):
            if step == 3 and device == "tpu":
                tm.reset()
            h = x
            for _ in range(12):
                h = torch.tanh(h @ w)
            h = h * mask.sum(-1, keepdim=True) / mask.shape[1]
            mask = torch.cat([mask, torch.ones(4, 1, device=device)], dim=1)
            x = h
            sizes.append(x.sum().item())  # a read per step, as generate's stopping check
        return x.cpu(), sizes

    ref, _ = steps("cpu")
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
        got, _ = steps("tpu")
        recompiled = [name for _, name in tm.metrics()["recent_recompiles"]]
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    ops = [int(m.group(1)) if (m := re.match(r"fused\((\d+) ops", name)) else 1 for name in recompiled]
    assert recompiled and max(ops) <= 4, recompiled
