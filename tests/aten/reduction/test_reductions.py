"""Reductions on tpu against CPU: complex var/std/norm, the empty-slice and
dim-limit rules, the out= and multi-dim forms of all/any, mode's out= form."""

import pytest
import torch
from torch.testing import assert_close

TPU = torch.device("tpu")


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("dim", [None, 0, (0, 2)])
def test_complex_var_std_and_means(dtype, dim):
    z = torch.randn(4, 3, 5, dtype=dtype)
    zt = z.to(TPU)
    for correction in (0, 1):
        for fn in (torch.var, torch.std):
            r = fn(zt, dim=dim, correction=correction)
            assert r.dtype == z.real.dtype
            assert_close(r.cpu(), fn(z, dim=dim, correction=correction))
        for fn in (torch.var_mean, torch.std_mean):
            (v, m), (ev, em) = fn(zt, dim=dim, correction=correction), fn(z, dim=dim, correction=correction)
            assert m.dtype == dtype
            assert_close(v.cpu(), ev)
            assert_close(m.cpu(), em)


def test_complex_var_backward():
    z = torch.randn(6, 4, dtype=torch.complex64, requires_grad=True)
    zt = z.detach().to(TPU).requires_grad_()
    torch.var(z, dim=1).sum().backward()
    torch.var(zt, dim=1).sum().backward()
    assert_close(zt.grad.cpu(), z.grad)


@pytest.mark.parametrize("ord", [1, 2, 3, float("inf"), 0])
def test_complex_vector_norm(ord):
    z = torch.randn(5, 7, dtype=torch.complex64)
    r = torch.linalg.vector_norm(z.to(TPU), ord, dim=1)
    assert r.dtype == torch.float32
    assert_close(r.cpu(), torch.linalg.vector_norm(z, ord, dim=1))


def test_amax_amin_on_empty_tensors():
    t = torch.randn(0, 2, 3)
    for fn in (torch.amax, torch.amin):
        assert fn(t.to(TPU), dim=1).shape == fn(t, dim=1).shape == (0, 3)
        assert fn(t.to(TPU), dim=(1, 2)).shape == (0,)
        with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
            fn(t.to(TPU), dim=0)
        with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
            fn(t.to(TPU))


def test_reduction_dim_limit():
    t = torch.randn([1] * 65, device=TPU)
    for fn in (torch.sum, torch.mean, torch.amax, torch.argmax, torch.any, torch.var):
        with pytest.raises(RuntimeError, match="only tensors with up to 64 dims are supported"):
            fn(t, dim=0)
    assert torch.sum(t).item() == torch.sum(t.cpu()).item()  # dim=None is fine


def test_all_any_forms():
    x = torch.randn(3, 4, 5) > 0
    xt = x.to(TPU)
    for name in ("all", "any"):
        fn = getattr(torch, name)
        assert torch.equal(fn(xt, dim=(0, 2)).cpu(), fn(x, dim=(0, 2)))
        for out_dtype in (torch.bool, torch.uint8):
            o = torch.empty(0, dtype=out_dtype, device=TPU)
            fn(xt, dim=1, out=o)
            assert o.dtype == out_dtype and torch.equal(o.cpu(), fn(x, dim=1).to(out_dtype))
            o = torch.empty(0, dtype=out_dtype, device=TPU)
            fn(xt, out=o)
            assert o.shape == () and o.item() == fn(x).item()
        with pytest.raises(RuntimeError, match=f"{name} only supports bool tensor for result, got: Float"):
            fn(xt, out=torch.empty(0, device=TPU))


def test_mode_out():
    x = torch.tensor([[1, 2, 2, 3], [4, 4, 1, 1]])
    v = torch.empty(0, dtype=torch.long, device=TPU)
    i = torch.empty(0, dtype=torch.long, device=TPU)
    torch.mode(x.to(TPU), 1, out=(v, i))
    assert torch.equal(v.cpu(), torch.mode(x, 1).values)
    with pytest.raises(RuntimeError, match="expected scalar type Long but got Float for values"):
        torch.mode(x.to(TPU), 1, out=(torch.empty(0, device=TPU), i))


def test_bucketize_searchsorted_out():
    b = torch.tensor([1.0, 3.0, 5.0, 7.0])
    x = torch.tensor([0.5, 3.0, 6.0, 9.0])
    o = torch.empty(0, dtype=torch.long, device=TPU)
    torch.bucketize(x.to(TPU), b.to(TPU), out=o)
    assert torch.equal(o.cpu(), torch.bucketize(x, b))
    o = torch.empty(0, dtype=torch.int32, device=TPU)
    torch.searchsorted(b.to(TPU), x.to(TPU), right=True, out_int32=True, out=o)
    assert torch.equal(o.cpu(), torch.searchsorted(b, x, right=True, out_int32=True))


def test_all_any_empty_dim_list_reduces_nothing():
    x = torch.randn(2, 3) > 0
    u = torch.tensor([[0, 3], [1, 0]], dtype=torch.uint8)
    for fn in (torch.all, torch.any):
        for t in (x, u):
            r = fn(t.to(TPU), dim=[])
            assert r.dtype == fn(t, dim=[]).dtype and torch.equal(r.cpu(), fn(t, dim=[]))
        o = torch.empty(0, dtype=torch.bool, device=TPU)
        fn(x.to(TPU), dim=[], out=o)
        assert torch.equal(o.cpu(), fn(x, dim=[]))


def test_histc_range_checked_on_the_data():
    # min == max: the range is the data's, and an infinite or NaN one is refused.
    for v in ([float("inf")], [1.0, float("-inf")], [float("nan")]):
        with pytest.raises(RuntimeError, match=r"torch.histc: range of \[.*\] is not finite"):
            torch.histc(torch.tensor(v, device=TPU))
    x = torch.tensor([1.0, 2.0, float("inf")])
    assert torch.equal(torch.histc(x.to(TPU), bins=4, max=3).cpu(), torch.histc(x, bins=4, max=3))


def test_kthvalue_on_empty_tensors():
    t = torch.randn(2, 0, 4)
    r = torch.kthvalue(t.to(TPU), 1, dim=2)
    assert r.values.shape == (2, 0) and r.indices.shape == (2, 0)
    assert torch.kthvalue(t.to(TPU), 1, dim=-1, keepdim=True).values.shape == (2, 0, 1)
    with pytest.raises(IndexError, match="kthvalue\\(\\): Expected reduction dim 1 to have non-zero size"):
        torch.kthvalue(t.to(TPU), 1, dim=1)


def test_hash_tensor_dim_checks():
    x = torch.randint(0, 100, (3, 4), device=TPU)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        torch.hash_tensor(x, dim=(0, 0))
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        torch.hash_tensor(torch.empty(0, 2, dtype=torch.long, device=TPU), dim=0)
    with pytest.raises(RuntimeError, match="only tensors with up to 64 dims are supported"):
        torch.hash_tensor(torch.zeros([1] * 65, dtype=torch.long, device=TPU), dim=0)
    assert torch.equal(torch.hash_tensor(x, dim=1).cpu(), torch.hash_tensor(x.cpu(), dim=1))


@pytest.mark.parametrize("n", [7, 100, 257])
@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
def test_cummax_cummin_long_scans(op, n):
    # ties keep the last index and NaN, once seen, stays (as CPU)
    x = torch.randint(0, 5, (3, n)).float()
    x[1, n // 2] = float("nan")
    x[2, 1] = float("inf")
    for d in (0, 1):
        v, i = op(x.to("tpu"), d)
        wv, wi = op(x, d)
        assert_close(v.cpu(), wv, equal_nan=True)
        assert torch.equal(i.cpu(), wi)
    b = torch.rand(4, n) > 0.5
    v, i = op(b.to("tpu"), 1)
    assert torch.equal(v.cpu(), op(b, 1)[0]) and torch.equal(i.cpu(), op(b, 1)[1])
