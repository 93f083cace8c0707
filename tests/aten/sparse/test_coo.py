"""Sparse COO tensors on tpu against CPU: construction, conversion, coalesce,
arithmetic with CPU's type promotion and errors, and the shared generic
kernels (pointwise on values, sum, transpose)."""

import pytest
import torch
from torch.testing import assert_close

TPU = torch.device("tpu")


def _random_sparse(shape, nnz, dtype=torch.float32, dense_dims=0, gen=None):
    """An uncoalesced COO tensor (duplicate indices likely) made on CPU."""
    sparse_shape = shape[:len(shape) - dense_dims]
    idx = torch.stack([torch.randint(0, s, (nnz,), generator=gen) for s in sparse_shape])
    vals = torch.randn((nnz,) + tuple(shape[len(sparse_shape):]), generator=gen).to(dtype)
    return torch.sparse_coo_tensor(idx, vals, shape)


def _same(t, c, **kw):
    assert t.device.type == "tpu"
    assert t.layout == c.layout and t.dtype == c.dtype and t.shape == c.shape
    if c.is_sparse:  # CPU's and tpu's entry lists may differ (duplicates, explicit zeros)
        assert t.sparse_dim() == c.sparse_dim()
        t, c = t.to_dense(), c.to_dense()
    assert_close(t.cpu(), c, **kw)


@pytest.mark.parametrize("dense_dims", [0, 1])
def test_construct_and_to_dense(dense_dims):
    s = _random_sparse((5, 6, 3), 12, dense_dims=dense_dims)
    t = s.to(TPU)
    assert t.is_sparse and t.sparse_dim() == s.sparse_dim() and t._nnz() == 12
    _same(t, s)
    direct = torch.sparse_coo_tensor(s._indices().to(TPU), s._values().to(TPU), s.shape)
    _same(direct, s)
    back = t.cpu()
    assert back.is_sparse and back.device.type == "cpu"
    assert_close(back.to_dense(), s.to_dense())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.complex64])
def test_dense_to_sparse(dtype):
    d = (torch.randn(4, 7) > 0.3).to(dtype) if dtype == torch.bool else \
        (torch.randn(4, 7) * (torch.rand(4, 7) > 0.5)).to(dtype)
    _same(d.to(TPU).to_sparse(), d.to_sparse())
    _same(d.to(TPU).to_sparse(1), d.to_sparse(1))


@pytest.mark.parametrize("dense_dims", [0, 1])
def test_coalesce(dense_dims):
    s = _random_sparse((4, 5, 2), 30, dense_dims=dense_dims)
    c, t = s.coalesce(), s.to(TPU).coalesce()
    assert t.is_coalesced()
    assert torch.equal(t._indices().cpu(), c._indices())
    assert_close(t._values().cpu(), c._values())


def test_add_sub():
    a, b = _random_sparse((6, 5), 10), _random_sparse((6, 5), 9)
    ta, tb = a.to(TPU), b.to(TPU)
    _same(ta + tb, a + b)
    _same(torch.add(ta, tb, alpha=2.5), torch.add(a, b, alpha=2.5))
    _same(ta - tb, a - b)
    d = torch.randn(6, 5)
    _same(d.to(TPU) + tb, d + b)
    _same(torch.add(d.to(TPU), tb, alpha=-3), torch.add(d, b, alpha=-3))
    x, y = d.clone(), d.to(TPU)
    x.add_(b)
    y.add_(tb)
    _same(y, x)


def test_promotion_and_errors():
    a = _random_sparse((3, 4), 5)
    b = _random_sparse((3, 4), 5, dtype=torch.int64)
    _same(a.to(TPU) + b.to(TPU), a + b)
    _same(b.to(TPU) * a.to(TPU), b * a)
    with pytest.raises(RuntimeError, match="add\\(sparse, dense\\) is not supported"):
        a.to(TPU) + torch.ones(3, 4, device=TPU)
    with pytest.raises(RuntimeError, match="Can't convert result type Float to output Long"):
        b.to(TPU).add_(a.to(TPU))
    with pytest.raises(RuntimeError, match="Can't convert result type Float to output Long"):
        torch.ones(3, 4, dtype=torch.long, device=TPU).add_(a.to(TPU))
    with pytest.raises(RuntimeError, match="expected sizes of 'self' and 'other' to match"):
        a.to(TPU) + _random_sparse((4, 4), 3).to(TPU)
    with pytest.raises(RuntimeError, match="Sparse division requires a scalar"):
        a.to(TPU) / torch.ones(3, 4, device=TPU)


def test_mul_div():
    a, b = _random_sparse((7, 6), 25), _random_sparse((7, 6), 25)
    ta, tb = a.to(TPU), b.to(TPU)
    _same(ta * tb, a * b)
    _same(ta * 2.5, a * 2.5)
    _same(ta * torch.tensor(3, device=TPU), a * torch.tensor(3))
    row = torch.randn(6)
    _same(ta * row.to(TPU), a * row)
    full = torch.randn(7, 6)
    _same(full.to(TPU) * ta, full * a)
    _same(ta / 4, a / 4)
    _same(torch.div(ta, 3, rounding_mode="floor"), torch.div(a, 3, rounding_mode="floor"))
    empty = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (7, 6))
    _same(ta * empty.to(TPU), a * empty)


def test_generic_kernels():
    s = _random_sparse((5, 4), 12)
    t = s.to(TPU)
    for fn in (torch.sin, torch.neg, torch.abs, torch.sqrt, torch.tanh, torch.trunc):
        _same(fn(t.abs()), fn(s.abs()), equal_nan=True)
    assert_close(torch.sparse.sum(t).cpu(), torch.sparse.sum(s))
    _same(torch.sparse.sum(t, dim=1), torch.sparse.sum(s, dim=1))
    _same(t.t().coalesce(), s.t().coalesce())
    _same(t.unsqueeze(0), s.unsqueeze(0))
    _same(torch.cat([t, t]), torch.cat([s, s]))
    _same(t.pow(2), s.pow(2))
    _same(t.clone(), s.clone())
    z = t.clone()
    z.zero_()
    assert z._nnz() == 0
