"""Shape and ordering ops on tpu against CPU: cat, pad, flip, roll, tril/triu,
clamp, sort/topk, cumsum/cumprod."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

TPU = torch.device("tpu")


def compare(fn, *args, rtol=None, atol=None):
    """fn on CPU args and on tpu copies: equal values, dtypes and shapes."""
    expected = fn(*args)
    actual = fn(*[a.to(TPU) if isinstance(a, torch.Tensor) else a for a in args])
    if isinstance(expected, torch.Tensor):
        expected, actual = (expected,), (actual,)
    for e, a in zip(expected, actual):
        assert a.device.type == "tpu"
        assert_close(a.cpu(), e, rtol=rtol, atol=atol, equal_nan=True)


def compare_grad(fn, *inputs, rtol=None, atol=None):
    """Forward and the gradients of every input, tpu against CPU."""
    cpu = [x.clone().requires_grad_() for x in inputs]
    dev = [x.to(TPU).requires_grad_() for x in inputs]
    out_c, out_t = fn(*cpu), fn(*dev)
    assert_close(out_t.detach().cpu(), out_c.detach(), rtol=rtol, atol=atol)
    g = torch.randn_like(out_c)
    out_c.backward(g)
    out_t.backward(g.to(TPU))
    for c, t in zip(cpu, dev):
        assert_close(t.grad.cpu(), c.grad, rtol=rtol, atol=atol)


# ------------------------------------------------------------------ cat --

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_grad(dim):
    a, b = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    compare_grad(lambda x, y: torch.cat([x, y, x], dim), a, b)


def test_cat_type_promotion_and_legacy_empty():
    a = torch.randn(2, 3)
    b = torch.randint(-5, 5, (4, 3), dtype=torch.int32)
    compare(lambda x, y: torch.cat([x, y, torch.empty(0, device=x.device)]), a, b)
    compare(lambda x, y: torch.cat([y, y.to(torch.int64)], 1), a, b)
    compare(lambda x: torch.cat([x.bfloat16(), x.bfloat16()]), a)


def test_cat_out_and_stack():
    a = torch.randn(3, 2)
    out = torch.empty(0, device=TPU)
    torch.cat([a.to(TPU), a.to(TPU)], 1, out=out)
    assert_close(out.cpu(), torch.cat([a, a], 1))
    compare(lambda x: torch.stack([x, 2 * x, 3 * x], 1), a)


def test_cat_errors():
    a, b = torch.randn(2, 3), torch.randn(2, 4)
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        torch.cat([a.to(TPU), b.to(TPU)], 0)
    with pytest.raises(IndexError):
        torch.cat([a.to(TPU)], 5)


# -------------------------------------------------------- pad, flip, roll --

@pytest.mark.parametrize("pad", [(1, 2), (1, -1, 2, 0), (0, 0, -1, -1, 2, 1)])
def test_constant_pad_nd(pad):
    x = torch.randn(3, 4, 5)
    compare_grad(lambda t: F.pad(t, pad, value=1.5), x)
    compare(lambda t: F.pad(t, pad, value=7), torch.randint(0, 9, (3, 4, 5)))


def test_constant_pad_negative_size_error():
    with pytest.raises(RuntimeError):
        F.pad(torch.randn(2, 3, device=TPU), (-2, -2))


@pytest.mark.parametrize("dims", [(0,), (1, 2), (-1, 0)])
def test_flip(dims):
    compare_grad(lambda t: t.flip(dims), torch.randn(3, 4, 5))


def test_flip_duplicate_dims_error():
    with pytest.raises(RuntimeError, match="appears multiple times"):
        torch.randn(3, 4, device=TPU).flip(0, 0)


@pytest.mark.parametrize("shifts,dims", [(2, None), (-7, None), ((1, -2), (0, 1)), (5, 2)])
def test_roll(shifts, dims):
    compare_grad(lambda t: t.roll(shifts, dims), torch.randn(3, 4, 5))
    compare(lambda t: t.roll(shifts, dims), torch.arange(60).view(3, 4, 5))


def test_roll_mismatch_error():
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        torch.randn(3, 4, device=TPU).roll((1, 2), (0,))


# ------------------------------------------------------------ tril/triu --

@pytest.mark.parametrize("k", [-2, 0, 1, 4])
@pytest.mark.parametrize("op", ["tril", "triu"])
def test_tril_triu(op, k):
    x = torch.randn(2, 4, 5)
    compare_grad(lambda t: getattr(t, op)(k), x)
    compare(lambda t: getattr(t.clone(), op + "_")(k), torch.randint(-9, 9, (4, 5)))
    out = torch.empty(0, device=TPU)
    getattr(torch, op)(x.to(TPU), k, out=out)
    assert_close(out.cpu(), getattr(torch, op)(x, k))


def test_tril_1d_error():
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.randn(3, device=TPU).tril()


# --------------------------------------------------------------- clamp --

def test_clamp_scalar_forms():
    x = torch.randn(4, 5)
    x[0, 0] = float("nan")
    compare_grad(lambda t: t.clamp(-0.5, 0.5), torch.randn(4, 5))
    compare(lambda t: t.clamp(-0.5, 0.5), x)
    compare(lambda t: t.clamp(min=0.1), x)
    compare(lambda t: t.clamp(max=0.1), x)
    compare(lambda t: t.clamp(0.5, -0.5), x)  # min > max gives max
    compare(lambda t: t.clone().clamp_(-0.2, 0.3), x)
    compare(lambda t: t.clamp_min(0.0), x)
    compare(lambda t: t.clone().clamp_max_(0.0), x)
    compare(lambda t: t.bfloat16().clamp(-1, 1), x)


def test_clamp_int_promotion():
    i = torch.randint(-10, 10, (6,))
    compare(lambda t: t.clamp(-3, 4), i)
    compare(lambda t: t.clamp(0.5), i)  # promotes to float, as on CPU


def test_clamp_tensor_forms():
    x, lo, hi = torch.randn(4, 5), torch.randn(5) - 1, torch.randn(4, 1) + 1
    compare_grad(lambda t, a, b: t.clamp(a, b), x, lo, hi)
    compare(lambda t, a: t.clamp(min=a), x, lo)
    compare(lambda t, b: torch.clamp_max(t, b), x, hi)
    compare(lambda t, a: t.clone().clamp_min_(a), x, lo)


def test_clamp_out_and_errors():
    x = torch.randn(4, 5)
    out = torch.empty(0, device=TPU)
    torch.clamp(x.to(TPU), -0.1, 0.1, out=out)
    assert_close(out.cpu(), x.clamp(-0.1, 0.1))
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        x.to(TPU).clamp()
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.randint(0, 5, (3,)).to(TPU).clamp_(0.5)


# ------------------------------------------------------------ sort/topk --

@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable(dim, descending):
    x = torch.randint(0, 4, (6, 7)).float()  # many ties: stability matters
    x[1, 2] = float("nan")
    compare(lambda t: torch.sort(t, dim=dim, descending=descending, stable=True), x)
    compare(lambda t: torch.sort(t, dim=dim, descending=descending, stable=True),
            torch.randint(-50, 50, (6, 7)))


def test_sort_grad_and_out():
    compare_grad(lambda t: torch.sort(t, 1)[0], torch.randn(3, 8))
    x = torch.randn(5, 4)
    v, i = torch.empty(0, device=TPU), torch.empty(0, dtype=torch.long, device=TPU)
    torch.sort(x.to(TPU), 0, out=(v, i))
    ev, ei = torch.sort(x, 0)
    assert_close(v.cpu(), ev)
    assert_close(i.cpu(), ei)
    compare(lambda t: torch.sort(t.bfloat16(), stable=True), x)
    compare(lambda t: torch.argsort(t, dim=0), x)


@pytest.mark.parametrize("largest", [True, False])
def test_topk(largest):
    x = torch.randn(4, 10)
    compare(lambda t: torch.topk(t, 3, dim=1, largest=largest), x)
    compare(lambda t: torch.topk(t, 2, dim=0, largest=largest), x)
    compare_grad(lambda t: torch.topk(t, 3, largest=largest)[0], x)
    vals = torch.topk(x.to(TPU), 4, sorted=False, largest=largest)[0].cpu()
    assert_close(vals.sort(1)[0], torch.topk(x, 4, largest=largest)[0].sort(1)[0])


def test_topk_errors():
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        torch.topk(torch.randn(3, device=TPU), 5)


# ------------------------------------------------------ cumsum/cumprod --

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(dim):
    x = torch.randn(5, 6, 3)
    compare_grad(lambda t: t.cumsum(dim), x, atol=1e-5, rtol=1e-5)
    compare(lambda t: t.cumsum(dim), torch.randint(-9, 9, (5, 6, 3), dtype=torch.int32))
    compare(lambda t: t.cumsum(dim, dtype=torch.float64), x)
    compare(lambda t: t.clone().cumsum_(dim), x, atol=1e-5, rtol=1e-5)


def test_cumsum_bool_bf16_scalar_and_out():
    compare(lambda t: (t > 0).cumsum(0), torch.randn(20))
    compare(lambda t: t.bfloat16().cumsum(0), torch.randn(20), atol=0.1, rtol=0.02)
    compare(lambda t: t.cumsum(0), torch.tensor(3.0))
    x = torch.randn(4, 5)
    out = torch.empty(0, device=TPU)
    torch.cumsum(x.to(TPU), 1, out=out)
    assert_close(out.cpu(), x.cumsum(1))


def test_cumprod():
    x = torch.rand(4, 6) + 0.5
    compare(lambda t: t.cumprod(1), x)
    compare(lambda t: t.cumprod(0), torch.randint(-3, 4, (5, 3)))
    compare_grad(lambda t: t.cumprod(1), x, atol=1e-5, rtol=1e-4)


def test_cat_out_dtype_rules_as_cpu():
    a, b = torch.randn(3), torch.randint(0, 9, (2,))
    out = torch.empty(5, dtype=torch.float64, device="tpu")
    torch.cat([a.to("tpu"), b.to("tpu")], out=out)
    torch.testing.assert_close(out.cpu(), torch.cat([a, b]).double())
    for dtype in (torch.uint8, torch.int32):
        with pytest.raises(TypeError, match="input types can't be cast to the desired output type"):
            torch.cat([a.to("tpu"), b.to("tpu")], out=torch.empty(5, dtype=dtype, device="tpu"))


def test_cat_result_keeps_the_inputs_common_memory_format():
    # as CPU: channels-last inputs give a channels-last result; mixed
    # layouts give a contiguous one; legacy empty 1-d inputs do not vote
    a = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    b = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    for dim in (0, 1, 3):
        want = torch.cat([a, b], dim)
        got = torch.cat([a.to("tpu"), b.to("tpu")], dim)
        assert got.stride() == want.stride(), (dim, got.stride(), want.stride())
        torch.testing.assert_close(got.cpu(), want)
    mixed = torch.cat([a.to("tpu"), b.contiguous().to("tpu")], 1)
    assert mixed.is_contiguous() and torch.cat([a, b.contiguous()], 1).is_contiguous()
    legacy = torch.cat([torch.empty(0, device="tpu"), a.to("tpu")], 0)
    assert legacy.is_contiguous(memory_format=torch.channels_last)
