"""Dropout and Bernoulli sampling on the tpu generator: statistics, scaling,
the backward pass, and reproducibility under torch.manual_seed (values are
not expected to equal CPU's, which uses another generator)."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

TPU = torch.device("tpu")


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_statistics_and_scaling(p, dtype):
    x = (torch.rand(200, 250) + 0.5).to(dtype)
    y = F.dropout(x.to(TPU), p, training=True).cpu()
    kept = y != 0
    frac = kept.float().mean().item()
    assert abs(frac - (1 - p)) < 0.01, frac
    expected = (x.float() / (1 - p)).to(dtype)
    assert_close(y[kept], expected[kept])
    assert y.dtype == dtype


def test_dropout_reproducible_with_manual_seed():
    x = torch.randn(64, 33, device=TPU)
    torch.manual_seed(123)
    a = F.dropout(x, 0.4, training=True).cpu()
    b = F.dropout(x, 0.4, training=True).cpu()
    torch.manual_seed(123)
    c = F.dropout(x, 0.4, training=True).cpu()
    assert torch.equal(a, c)
    assert not torch.equal(a, b)


def test_native_dropout_mask_and_backward():
    x = torch.randn(40, 50, device=TPU, requires_grad=True)
    out, mask = torch.native_dropout(x, 0.3, True)
    assert mask.dtype == torch.bool and mask.shape == x.shape
    g = torch.randn(40, 50)
    out.backward(g.to(TPU))
    m = mask.cpu()
    assert_close(out.detach().cpu(), x.detach().cpu() * m / 0.7)
    assert_close(x.grad.cpu(), g * m / 0.7)
    gb = torch.ops.aten.native_dropout_backward(g.to(TPU), mask, 2.0)
    assert_close(gb.cpu(), g * m * 2.0)


def test_dropout_edge_cases():
    x = torch.randn(10, 10, device=TPU)
    assert torch.equal(F.dropout(x, 0.0, training=True).cpu(), x.cpu())
    assert F.dropout(x, 1.0, training=True).abs().sum().item() == 0
    assert torch.equal(F.dropout(x, 0.5, training=False).cpu(), x.cpu())
    out, mask = torch.native_dropout(x, 0.5, False)
    assert torch.equal(out.cpu(), x.cpu()) and bool(mask.all())
    with pytest.raises(RuntimeError, match="dropout probability"):
        torch.native_dropout(x, 1.5, True)
    # Module form in training, with gradients flowing.
    m = torch.nn.Sequential(torch.nn.Linear(10, 10), torch.nn.Dropout(0.2)).to(TPU).train()
    m(x).sum().backward()
    assert m[0].weight.grad is not None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_bernoulli_float_p(dtype):
    t = torch.empty(100000, device=TPU, dtype=dtype).bernoulli_(0.3)
    v = t.cpu().double()
    assert set(v.unique().tolist()) <= {0.0, 1.0}
    assert abs(v.mean().item() - 0.3) < 0.01
    assert torch.empty(5, device=TPU).bernoulli_(0.0).sum().item() == 0
    assert torch.empty(5, device=TPU).bernoulli_(1.0).sum().item() == 5
    with pytest.raises(RuntimeError):
        torch.empty(5, device=TPU).bernoulli_(1.5)


def test_bernoulli_tensor_p_and_functional():
    p = torch.rand(50)
    draws = torch.bernoulli(p.to(TPU).expand(4000, 50)).cpu()
    assert (draws.mean(0) - p).abs().max().item() < 0.05
    t = torch.empty(4000, 50, device=TPU, dtype=torch.float64).bernoulli_(p.to(TPU))
    assert (t.cpu().mean(0) - p.double()).abs().max().item() < 0.05
    assert torch.bernoulli(torch.ones(3, device=TPU)).cpu().tolist() == [1, 1, 1]
    assert torch.bernoulli(torch.zeros(3, device=TPU), 1.0).cpu().tolist() == [1, 1, 1]
    torch.manual_seed(7)
    a = torch.bernoulli(torch.full((100,), 0.5, device=TPU)).cpu()
    torch.manual_seed(7)
    b = torch.bernoulli(torch.full((100,), 0.5, device=TPU)).cpu()
    assert torch.equal(a, b)


# ----------------------------------------------------- multinomial, randperm --

def test_multinomial_with_replacement():
    p = torch.tensor([0.1, 0.0, 0.3, 0.6])
    s = torch.multinomial(p.to(TPU) * 5, 40000, replacement=True).cpu()  # unnormalized weights
    assert s.dtype == torch.long and s.shape == (40000,)
    freq = torch.bincount(s, minlength=4).double() / s.numel()
    assert_close(freq, p.double(), atol=0.01, rtol=0)
    s2 = torch.multinomial(torch.rand(3, 7).to(TPU), 5, replacement=True)
    assert s2.shape == (3, 5) and int(s2.max()) < 7


def test_multinomial_without_replacement():
    p = torch.tensor([0.1, 0.0, 0.3, 0.6])
    s = torch.multinomial(p.to(TPU).expand(8000, 4).contiguous(), 2).cpu()
    assert (s[:, 0] != s[:, 1]).all() and (s != 1).all()
    first = torch.bincount(s[:, 0], minlength=4).double() / 8000
    assert_close(first, p.double(), atol=0.02, rtol=0)
    perm = torch.multinomial(torch.ones(6, device=TPU), 6).cpu()
    assert torch.equal(perm.sort().values, torch.arange(6))
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(torch.ones(3, device=TPU), 4)
    torch.manual_seed(5)
    a = torch.multinomial(torch.rand(10, device=TPU), 3).cpu()
    torch.manual_seed(5)
    b = torch.multinomial(torch.rand(10, device=TPU), 3).cpu()
    assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
def test_randperm(dtype):
    r = torch.randperm(1000, device=TPU, dtype=dtype).cpu()
    assert r.dtype == dtype
    assert torch.equal(r.sort().values, torch.arange(1000, dtype=dtype))
    assert not torch.equal(r, torch.arange(1000, dtype=dtype))
    torch.manual_seed(11)
    a = torch.randperm(50, device=TPU).cpu()
    torch.manual_seed(11)
    assert torch.equal(a, torch.randperm(50, device=TPU).cpu())
    assert torch.randperm(0, device=TPU).shape == (0,)
    with pytest.raises(RuntimeError, match="too large"):
        torch.randperm(300, dtype=torch.int8, device=TPU)


# ------------------------------------------------- random_ bounds and checks --

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                                   torch.uint16, torch.uint32, torch.bool])
def test_random_default_range(dtype):
    # random_(): [0, 2^digits] for floating types, [0, max] for integers.
    if dtype.is_floating_point:
        hi = {torch.float32: 2 ** 24, torch.float64: 2 ** 53, torch.float16: 2 ** 11,
              torch.bfloat16: 2 ** 8}[dtype]
    elif dtype == torch.bool:
        hi = 1
    else:
        hi = torch.iinfo(dtype).max
    t = torch.empty(4000, dtype=dtype, device="tpu")
    t.random_()
    v = t.cpu().double()
    assert 0 <= v.min() < 0.1 * hi + 1 and 0.9 * hi - 1 < v.max() <= hi


def test_random_from_to_exact_64_bit():
    # from + (r mod range) in 64-bit integers: exact at the ends of int64.
    t = torch.empty(4000, dtype=torch.int64, device="tpu")
    t.random_(torch.iinfo(torch.int64).min, None)
    v = t.cpu()
    assert v.min() < -(2 ** 62) and v.max() > 2 ** 62
    big = torch.iinfo(torch.int64).max
    t.random_(big - 3, big)
    assert set(t.cpu().tolist()) == {big - 3, big - 2, big - 1}
    t.random_(-5, 5)
    assert set(t.cpu().tolist()) == set(range(-5, 5))


def test_random_bounds_errors_and_warnings():
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got from=3 >= to=3"):
        torch.empty(3, device="tpu").random_(3, 3)
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds for signed char"):
        torch.empty(3, dtype=torch.int8, device="tpu").random_(0, 300)
    with pytest.raises(RuntimeError, match="from is out of bounds for unsigned char"):
        torch.empty(3, dtype=torch.uint8, device="tpu").random_(-1, 3)
    with pytest.warns(UserWarning, match=r"to - 1 is out of bounds \[-\(2\^24\), 2\^24\]"):
        torch.empty(3, device="tpu").random_(0, 2 ** 30)
    with pytest.raises(RuntimeError, match="uniform_ expects to-from"):
        torch.empty(3, device="tpu").uniform_(-3e38, 3e38)
    with pytest.raises(RuntimeError, match="n cannot be greater than 2049 for Half type"):
        torch.randperm(2 ** 11 + 2, dtype=torch.half, device="tpu")
    std = torch.tensor([1.0, -1.0], device="tpu")
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        torch.normal(torch.zeros(2, device="tpu"), std)


def test_bernoulli_out():
    p = torch.rand(64, 64, device="tpu")
    out = torch.full((3,), 5.0, device="tpu")
    torch.bernoulli(p, out=out)
    o = out.cpu()
    assert o.shape == (64, 64) and ((o == 0) | (o == 1)).all()
    torch.bernoulli(torch.tensor([0.0, 1.0, 1.0, 0.0], device="tpu"), out=out)
    assert out.cpu().tolist() == [0.0, 1.0, 1.0, 0.0]
