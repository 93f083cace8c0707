"""Out-of-range indices raise the exception CPU raises, never a clamped
value: at the op in Debug Eager and for host indices, at the next read of a
tpu value otherwise (like a CUDA device-side assert), naming the op and the
line that issued it."""

import re

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

TPU = torch.device("tpu")


def _cases():
    x = lambda: torch.randn(4, 5)
    return {
        "getitem": lambda d: x().to(d)[torch.tensor([1, 4], device=d)],
        "getitem_neg": lambda d: x().to(d)[torch.tensor([-5], device=d)],
        "getitem_dim1": lambda d: x().to(d)[:, torch.tensor([0, 7], device=d)],
        "index_select": lambda d: x().to(d).index_select(0, torch.tensor([0, 9], device=d)),
        "index_select_neg": lambda d: x().to(d).index_select(1, torch.tensor([-1], device=d)),
        "embedding": lambda d: F.embedding(torch.tensor([[1, 6]], device=d), x().to(d)),
        "gather": lambda d: x().to(d).gather(1, torch.tensor([[0], [5], [1], [2]], device=d)),
        "scatter": lambda d: torch.zeros(3, device=d).scatter(0, torch.tensor([3], device=d),
                                                               torch.ones(1, device=d)),
        "scatter_add": lambda d: torch.zeros(3, device=d).scatter_add(
            0, torch.tensor([0, -1], device=d), torch.ones(2, device=d)),
        "index_put": lambda d: x().to(d).index_put_((torch.tensor([4], device=d),),
                                                    torch.ones(5, device=d)),
        "index_add": lambda d: x().to(d).index_add(0, torch.tensor([4], device=d),
                                                   torch.ones(1, 5, device=d)),
        "index_copy": lambda d: x().to(d).index_copy(0, torch.tensor([8], device=d),
                                                     torch.ones(1, 5, device=d)),
        "index_fill": lambda d: x().to(d).index_fill(1, torch.tensor([5], device=d), 0.0),
        "take": lambda d: x().to(d).take(torch.tensor([20], device=d)),
        "put": lambda d: x().to(d).put_(torch.tensor([-21], device=d), torch.ones(1, device=d)),
        "nll_loss": lambda d: F.nll_loss(torch.randn(3, 4).to(d), torch.tensor([0, 4, 1], device=d)),
        "cross_entropy": lambda d: F.cross_entropy(torch.randn(2, 3).to(d),
                                                   torch.tensor([3, 0], device=d)),
        "cross_entropy_neg": lambda d: F.cross_entropy(torch.randn(2, 3).to(d),
                                                       torch.tensor([-1, 0], device=d)),
        "one_hot": lambda d: F.one_hot(torch.tensor([0, 3], device=d), 3),
        "index_reduce": lambda d: x().to(d).index_reduce(0, torch.tensor([5], device=d),
                                                         torch.ones(1, 5, device=d), "amax"),
    }


CASES = _cases()


def _cpu_error(fn):
    with pytest.raises(Exception) as e:
        fn(torch.device("cpu"))
    return e.value


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_of_range_raises_like_cpu(name):
    fn = CASES[name]
    want = _cpu_error(fn)
    with pytest.raises(Exception) as got:
        out = fn(TPU)
        out.cpu()  # Strict and Fused raise at the read, Debug at the op
    # The same exception type as CPU (IndexError or RuntimeError). CPU's
    # index_select along a later dim of a 2-D tensor raises from another
    # kernel ("INDICES element is out of DATA bounds"); tpu raises what the
    # common path raises.
    want_type = IndexError if name == "index_select_neg" else type(want)
    assert isinstance(got.value, want_type), (type(got.value), want_type, got.value)
    msg = str(got.value)
    assert "test_index_checks.py" in msg, msg  # the user's line
    if name not in ("one_hot", "index_select_neg"):  # (one_hot: CPU checks on the host)
        assert str(want).split("\n")[0] in msg or _same_kind(str(want), msg), (str(want), msg)
    # The device stays usable and later reads are not poisoned.
    y = torch.arange(4.0, device=TPU)
    assert y.sum().item() == 6.0


def _same_kind(want: str, got: str) -> bool:
    # CPU names the first bad index it meets, tpu the largest: compare the
    # message with the numbers taken out.
    strip = lambda s: re.sub(r"-?\d+", "N", s.split("\n")[0])
    return strip(want) in strip(got)


def test_valid_indices_do_not_raise():
    x = torch.randn(4, 5, device=TPU)
    i = torch.tensor([0, 3, -4], device=TPU)
    assert torch.equal(x[i].cpu(), x.cpu()[i.cpu()])
    assert torch.equal(x.gather(1, torch.tensor([[4]] * 4, device=TPU)).cpu(), x.cpu()[:, 4:])
    loss = F.cross_entropy(torch.randn(3, 4, device=TPU), torch.tensor([0, -100, 3], device=TPU))
    assert torch.isfinite(loss).item()  # ignore_index (-100) is not out of range
    assert F.one_hot(torch.tensor([0, 2], device=TPU), 3).sum().item() == 2


def test_error_is_raised_once_at_the_next_read():
    if torch_tpu.get_eager_mode() == torch_tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING:
        pytest.skip("Debug Eager raises at the op")
    x = torch.randn(3, device=TPU)
    y = x[torch.tensor([3], device=TPU)]  # no error yet: nothing read
    z = x * 2
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for dimension 0 with size 3"):
        z.sum().item()  # any read surfaces it
    assert torch.equal(z.cpu(), x.cpu() * 2)  # and only once
    del y


def test_synchronize_surfaces_the_error():
    x = torch.randn(3, device=TPU)
    with pytest.raises(IndexError, match=r"aten::index_select"):
        x.index_select(0, torch.tensor([7], device=TPU))
        torch.tpu.synchronize()


def test_debug_eager_raises_at_the_op():
    x = torch.randn(3, device=TPU)
    idx = torch.tensor([5], device=TPU)
    with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING):
        with pytest.raises(IndexError, match="index out of range in self"):
            x.index_select(0, idx)


def test_host_indices_raise_at_the_op_in_every_mode():
    x = torch.randn(3, device=TPU)
    with pytest.raises(IndexError, match="index 4 is out of bounds"):
        x[torch.tensor([4])]


_CHECKS_OFF = (
    "import torch\n"
    "x = torch.arange(3.0, device='tpu')\n"
    "print(x[torch.tensor([1], device='tpu')].item())\n"
    "x.index_select(0, torch.tensor([9], device='tpu')).cpu()\n"
    "print('no error')\n"
)


@pytest.mark.subprocesses(off=(_CHECKS_OFF, {"TORCH_TPU_INDEX_CHECKS": "0"}),
                          on=(_CHECKS_OFF, {}))
def test_checks_can_be_turned_off(subprocess_results):
    off, on = subprocess_results["off"], subprocess_results["on"]
    assert off.returncode == 0, off.stderr
    assert off.stdout.split() == ["1.0", "no", "error"], off.stdout
    assert on.returncode != 0 and "IndexError: index out of range in self" in on.stderr, on.stderr


def test_checks_inside_compiled_graphs():
    # A captured graph carries its checks: each replay updates the device
    # record and the error surfaces at the next read, as in eager mode.
    import torch._dynamo

    emb = torch.nn.Embedding(10, 4).to(TPU)

    def f(idx, tgt):
        logits = emb(idx) @ emb.weight.t()
        return F.cross_entropy(logits, tgt)

    torch._dynamo.reset()
    g = torch.compile(f, backend="tpu")
    ok_idx, ok_tgt = torch.tensor([1, 2, 3], device=TPU), torch.tensor([0, 9, 4], device=TPU)
    want = f(ok_idx, ok_tgt).item()
    assert abs(g(ok_idx, ok_tgt).item() - want) < 1e-4  # capture
    assert abs(g(ok_idx, ok_tgt).item() - want) < 1e-4  # replay
    with pytest.raises(IndexError, match="index out of range in self"):
        g(torch.tensor([1, 12, 3], device=TPU), ok_tgt).item()
    assert abs(g(ok_idx, ok_tgt).item() - want) < 1e-4  # later replays are clean
    with pytest.raises(IndexError, match="Target 10 is out of bounds"):
        g(ok_idx, torch.tensor([0, 10, 4], device=TPU)).item()
    y = torch.arange(3.0, device=TPU)
    assert y.sum().item() == 3.0
