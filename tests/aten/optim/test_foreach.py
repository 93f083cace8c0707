"""The _foreach_* list ops (optimizers, clip_grad_norm_): one launch per call
in Strict Eager, the per-tensor ops' values, and every mode's semantics."""

import copy

import pytest
import torch
import torch_tpu
from torch.testing import assert_close
from torch_tpu import EagerMode

SHAPES = [(3, 4), (17,), (2, 3, 5), (64, 64), (1,), (8, 1)]


def launches():
    return torch.tpu._get_cache_stats()["launches"]


def pair(shapes=SHAPES):
    cpu = [torch.randn(s) for s in shapes]
    return cpu, [t.to("tpu") for t in cpu]


@pytest.mark.parametrize("mode, expected", [(EagerMode.DEFER_NEVER, 1),
                                            (EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING, len(SHAPES))])
def test_an_in_place_foreach_op_is_one_launch_in_strict(mode, expected):
    cpu, tpu = pair()
    with torch_tpu.eager_mode(mode):
        torch.tpu.synchronize()
        before = launches()
        torch._foreach_add_(tpu, 1.5)
        assert launches() - before == expected  # Debug keeps launching op by op
        assert torch_tpu._C._pending_ops() == 0
    torch._foreach_add_(cpu, 1.5)
    for t, c in zip(tpu, cpu):
        assert_close(t.cpu(), c)


def test_out_of_place_foreach_ops_and_scalar_lists():
    cpu, tpu = pair()
    cpu2, tpu2 = pair()
    scalars = [0.5 * (i + 1) for i in range(len(SHAPES))]
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
        before = launches()
        out = torch._foreach_mul(tpu, scalars)
        norms = torch._foreach_norm(tpu2)
        torch._foreach_addcdiv_(tpu, tpu2, [t.abs() + 1 for t in tpu2], 0.3)
        # The norms and the addcdiv are one launch each; the abs() + 1 are
        # plain Strict ops, two launches per tensor.
        assert launches() - before == 3 + 2 * len(SHAPES)
    for t, c in zip(out, torch._foreach_mul(cpu, scalars)):
        assert_close(t.cpu(), c)
    for t, c in zip(norms, torch._foreach_norm(cpu2)):
        assert_close(t.cpu(), c)
    torch._foreach_addcdiv_(cpu, cpu2, [t.abs() + 1 for t in cpu2], 0.3)
    for t, c in zip(tpu, cpu):
        assert_close(t.cpu(), c)


def test_foreach_adamw_matches_cpu_with_a_few_launches_a_step(highest_matmul_precision):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    runs = {}
    for device in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1, foreach=True)
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0)).to(device)
        with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
            for step in range(3):
                m(x).square().mean().backward()
                if device == "tpu" and step == 2:
                    torch.tpu.synchronize()
                    before = launches()
                opt.step()
                if device == "tpu" and step == 2:
                    # 4 parameters, about ten foreach ops: a launch per op, not per tensor.
                    assert launches() - before <= 12
                opt.zero_grad()
        runs[device] = [p.detach().cpu() for p in m.parameters()]
    for t, c in zip(runs["tpu"], runs["cpu"]):
        assert_close(t, c, rtol=1e-5, atol=1e-6)


def test_a_failing_foreach_op_raises_and_leaves_strict_eager():
    cpu, tpu = pair()
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
        with pytest.raises(RuntimeError, match="same number of tensors"):
            torch._foreach_add_(tpu, tpu[:2])
        # The third tensor's shape does not broadcast: the first two are
        # updated before the error, as PyTorch's own list loop does on CPU.
        others = [torch.ones(s) for s in SHAPES]
        others[2] = torch.ones(7)
        with pytest.raises(RuntimeError, match="size of tensor a"):
            torch._foreach_add_(tpu, [o.to("tpu") for o in others])
        assert torch_tpu.get_eager_mode() == EagerMode.DEFER_NEVER
        y = tpu[0] * 2
        assert torch_tpu._C._pending_ops() == 0  # launched at once again
    with pytest.raises(RuntimeError, match="size of tensor a"):
        torch._foreach_add_(cpu, others)
    for t, c in zip(tpu, cpu):
        assert_close(t.cpu(), c)
    assert_close(y.cpu(), cpu[0] * 2)


def test_fused_eager_defers_foreach_ops_as_any_other():
    cpu, tpu = pair()
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
        torch._foreach_mul_(tpu, 3.0)
        assert torch_tpu._C._pending_ops() >= 1
        assert not torch_tpu.is_materialized(tpu[0])
        torch._foreach_mul_(cpu, 3.0)
        for t, c in zip(tpu, cpu):
            assert_close(t.cpu(), c)
