"""Complex tensors on tpu against CPU: creation and random fill,
view_as_real / view_as_complex as views of one storage, polar, abs/angle,
arithmetic and matmul, shape ops and indexing, and the rotary embedding that
Llama's reference code computes with them. Also view(dtype) across element
sizes, which reads a storage as another dtype the same way."""

import pytest
import torch
from torch.testing import assert_close

TPU = torch.device("tpu")
CDTYPES = [torch.complex64, torch.complex128]


@pytest.mark.parametrize("dtype", CDTYPES)
def test_creation_and_copies(dtype):
    z = torch.randn(3, 4, dtype=dtype)
    t = z.to(TPU)
    assert t.dtype == dtype and torch.equal(t.cpu(), z)
    assert torch.equal(torch.zeros(2, dtype=dtype, device=TPU).cpu(), torch.zeros(2, dtype=dtype))
    assert torch.equal(torch.full((2,), 1 + 2j, dtype=dtype, device=TPU).cpu(),
                       torch.full((2,), 1 + 2j, dtype=dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_random_fill(dtype):
    z = torch.randn(20000, dtype=dtype, device=TPU).cpu()
    # Each part has variance 1/2, so |z|^2 has mean 1, as on CPU.
    assert abs(z.real.var().item() - 0.5) < 0.03 and abs(z.imag.var().item() - 0.5) < 0.03
    assert abs(z.abs().pow(2).mean().item() - 1.0) < 0.05
    u = torch.rand(20000, dtype=dtype, device=TPU).cpu()
    assert 0 <= u.real.min().item() and u.real.max().item() < 1
    assert 0 <= u.imag.min().item() and u.imag.max().item() < 1


@pytest.mark.parametrize("dtype", CDTYPES)
def test_view_as_real_is_a_view(dtype):
    z = torch.randn(3, 4, dtype=dtype)
    t = z.to(TPU)
    r = torch.view_as_real(t)
    assert r.shape == (3, 4, 2) and r._is_view() and r._base is t
    assert torch.equal(r.cpu(), torch.view_as_real(z))
    # Writes through the real view show in the complex tensor.
    r[1, 2, 0] = 5.0
    r[..., 1].mul_(-1)
    z2 = z.clone()
    torch.view_as_real(z2)[1, 2, 0] = 5.0
    torch.view_as_real(z2)[..., 1].mul_(-1)
    assert torch.equal(t.cpu(), z2)
    # Strided complex views too.
    assert torch.equal(torch.view_as_real(t[:, 1::2]).cpu(), torch.view_as_real(z2[:, 1::2]))
    assert torch.equal(t.real.cpu(), z2.real) and torch.equal(t.imag.cpu(), z2.imag)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_view_as_complex_is_a_view(dtype):
    x = torch.randn(5, 3, 2, dtype=dtype)
    t = x.to(TPU)
    z = torch.view_as_complex(t)
    assert torch.equal(z.cpu(), torch.view_as_complex(x))
    z.mul_(1j)  # rotate: (a, b) -> (-b, a)
    assert torch.equal(t.cpu(), torch.stack([-x[..., 1], x[..., 0]], -1))
    with pytest.raises(RuntimeError, match="Tensor must have a last dimension of size 2"):
        torch.view_as_complex(torch.randn(3, 3, device=TPU))


def test_polar_complex_abs_angle():
    a, th = torch.rand(6) + 0.1, torch.randn(6)
    z = torch.polar(a, th)
    zt = torch.polar(a.to(TPU), th.to(TPU))
    assert zt.dtype == torch.complex64
    assert_close(zt.cpu(), z)
    assert_close(zt.abs().cpu(), z.abs())
    assert zt.abs().dtype == torch.float32 and zt.angle().dtype == torch.float32
    assert_close(zt.angle().cpu(), z.angle())
    assert_close(torch.complex(a.to(TPU), th.to(TPU)).cpu(), torch.complex(a, th))
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex tensors"):
        zt.abs_()


@pytest.mark.parametrize("dtype", CDTYPES)
def test_arithmetic_and_matmul(dtype, highest_matmul_precision):
    a, b = torch.randn(4, 4, dtype=dtype), torch.randn(4, 4, dtype=dtype)
    ta, tb = a.to(TPU), b.to(TPU)
    for f in (lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x / y, lambda x, y: x @ y,
              lambda x, y: x.conj() * y, lambda x, y: (x * 2 - y).sum(0),
              lambda x, y: x.exp(), lambda x, y: torch.where(x.real > 0, x, y)):
        assert_close(f(ta, tb).cpu(), f(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_shape_ops_and_indexing(dtype):
    z = torch.randn(3, 4, 5, dtype=dtype)
    t = z.to(TPU)
    idx = torch.tensor([2, 0])
    cases = [
        lambda x: x.flip(1), lambda x: x.rot90(1, (1, 2)), lambda x: x.transpose(0, 2).contiguous(),
        lambda x: x[:, 1:3, ::2], lambda x: x[idx.to(x.device)], lambda x: x.permute(2, 0, 1)[1],
        lambda x: torch.cat([x, x], 1), lambda x: x.reshape(12, 5).index_select(0, idx.to(x.device)),
        lambda x: x.roll(1, 2),
    ]
    for f in cases:
        assert torch.equal(f(t).cpu(), f(z))
    t2 = t.clone()
    z2 = z.clone()
    t2[idx.to(TPU)] = 0
    z2[idx] = 0
    assert torch.equal(t2.cpu(), z2)


def _rotary(xq, freqs):
    # Meta's Llama reference: rotary embeddings through complex numbers.
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    return torch.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq)


def test_llama_rotary_embedding_forward_and_backward():
    b, s, h, d = 2, 8, 2, 16
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    freqs = torch.outer(torch.arange(s).float(), inv)
    x = torch.randn(b, s, h, d)
    xc, xt = x.clone().requires_grad_(), x.to(TPU).requires_grad_()
    want, got = _rotary(xc, freqs), _rotary(xt, freqs.to(TPU))
    assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    g = torch.randn_like(want)
    want.backward(g)
    got.backward(g.to(TPU))
    assert_close(xt.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("src,dst", [
    (torch.float32, torch.int32), (torch.float32, torch.uint8), (torch.uint8, torch.float32),
    (torch.int64, torch.int16), (torch.bfloat16, torch.int32), (torch.float64, torch.complex64),
    (torch.complex64, torch.float32), (torch.bool, torch.uint8), (torch.float16, torch.bfloat16),
    (torch.int8, torch.bool),
])
def test_view_dtype_across_element_sizes(src, dst):
    x = (torch.randn(4, 8) * 50).to(src) if src != torch.bool else torch.rand(4, 8) > 0.5
    if dst == torch.bool:
        x = x.clamp(0, 1)
    t = x.to(TPU)
    assert torch.equal(t.view(dst).cpu(), x.view(dst))
    assert torch.equal(t[1:3].view(dst).cpu(), x[1:3].view(dst))
    # A write through the reinterpreted view lands in the original bytes.
    v, w = t.view(dst), x.view(dst)
    v[0, :2] = v[1, :2]
    w[0, :2] = w[1, :2]
    assert torch.equal(t.cpu(), x)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round"])
def test_real_only_rounding_refuses_complex(name):
    z = torch.ones(2, dtype=torch.complex64, device="tpu")
    with pytest.raises(RuntimeError, match=f"{name} is not supported for complex inputs"):
        getattr(torch, name)(z)
    with pytest.raises(RuntimeError, match=f"{name} is not supported for complex inputs"):
        getattr(torch, name)(z, out=torch.empty_like(z))
    with pytest.raises(RuntimeError, match="Please use torch.sgn instead"):
        torch.sign(z)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_sgn_complex(dtype):
    z = torch.randn(6, 5, dtype=dtype)
    z[0, :3] = 0
    z[1, 0] = complex(-2.5, 0)
    for fn in (torch.sgn, torch.Tensor.sgn):
        assert_close(fn(z.to(TPU)).cpu(), fn(z))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_asinh(dtype):
    z = torch.randn(64, dtype=dtype) * torch.logspace(-3, 3, 64)
    torch.testing.assert_close(torch.asinh(z.to("tpu")).cpu(), torch.asinh(z))


# ---- complex32 (torch.chalf): stored packed, computed in complex64 ----

def _chalf(*shape):
    return torch.complex(torch.randn(*shape), torch.randn(*shape)).to(torch.chalf)


def test_chalf_round_trip_and_views():
    z = _chalf(3, 5)
    t = z.to(TPU)
    assert t.dtype == torch.chalf and torch.equal(t.cpu().view(torch.int32), z.view(torch.int32))
    # views, slices and indexing move the values as they are
    assert torch.equal(t.t().contiguous().cpu().view(torch.int32), z.t().contiguous().view(torch.int32))
    assert torch.equal(t[1:, ::2].cpu().view(torch.int32), z[1:, ::2].view(torch.int32))
    idx = torch.tensor([2, 0, 2])
    assert torch.equal(t[idx].cpu().view(torch.int32), z[idx].view(torch.int32))
    assert torch.equal(torch.cat([t, t]).cpu().view(torch.int32), torch.cat([z, z]).view(torch.int32))
    # view_as_real is a view of the same storage: writes show through
    r = torch.view_as_real(t)
    assert r.dtype == torch.half and torch.equal(r.cpu(), torch.view_as_real(z))
    r[0, 0, 1] = 5.0
    assert t[0, 0].item() == complex(z[0, 0].real.item(), 5.0)
    assert torch.equal(t.view(torch.int32).cpu(), t.cpu().view(torch.int32))


def test_chalf_arithmetic_matches_cpu():
    a, b = _chalf(4, 6), _chalf(4, 6)
    ta, tb = a.to(TPU), b.to(TPU)
    for fn in (torch.add, torch.sub, torch.mul):
        assert torch.equal(fn(ta, tb).cpu().view(torch.int32), fn(a, b).view(torch.int32)), fn
    assert_close(ta.abs().cpu(), a.abs())
    assert_close((ta * 2).cpu(), a * 2)
    # conjugation: the lazy conj bit resolved on copy, and conj_physical
    bits = lambda z: z.view(torch.int32)  # CPU has no complex32 torch.equal
    assert torch.equal(bits(ta.conj().resolve_conj().cpu()), bits(a.conj().resolve_conj()))
    assert torch.equal(bits(torch.conj_physical(ta).cpu()), bits(torch.conj_physical(a)))
    assert torch.equal(torch.isfinite(ta).cpu(), torch.isfinite(a))
    # (CPU has no complex32 comparison: compared as complex64)
    assert torch.equal((ta == tb).cpu(), a.cfloat() == b.cfloat())
    assert torch.equal((ta == ta).cpu(), a.cfloat() == a.cfloat())


def test_chalf_conversions_round_like_cpu():
    x = torch.randn(1000, dtype=torch.float64) * 100
    tx = x.to(TPU)
    for src in (x, x.float(), torch.complex(x, -x)):
        got = src.to(TPU).to(torch.chalf).cpu()
        assert torch.equal(got.view(torch.int32), src.to(torch.chalf).view(torch.int32))
    c = _chalf(100)
    for dst in (torch.complex64, torch.complex128, torch.float32, torch.half):
        assert torch.equal(c.to(TPU).to(dst).cpu(), c.to(dst)), dst
    c2 = _chalf(100)
    assert torch.equal(c2.to(TPU).to(torch.chalf).cpu().view(torch.int32), c2.view(torch.int32))
    assert torch.equal(torch.complex(tx.half(), -tx.half()).cpu().view(torch.int32),
                       torch.complex(x.half(), -x.half()).view(torch.int32))
    assert torch.full((3,), 1.5 - 2j, dtype=torch.chalf, device=TPU).cpu().tolist() == [1.5 - 2j] * 3


def test_chalf_random_fill():
    z = torch.randn(20000, dtype=torch.chalf, device=TPU).cpu().to(torch.complex64)
    assert abs(z.real.var().item() - 0.5) < 0.03 and abs(z.imag.var().item() - 0.5) < 0.03


def test_chalf_unsupported_op_is_an_error_not_garbage():
    t = _chalf(3, 3).to(TPU)
    with pytest.raises(RuntimeError, match="complex32"):
        torch.mm(t, t).cpu()


def test_complex_sinc_and_ordered_ops():
    z = torch.complex(torch.randn(50), torch.randn(50))
    z[0] = 0
    assert_close(torch.sinc(z.to(TPU)).cpu(), torch.sinc(z))
    for fn in (torch.maximum, torch.minimum, torch.fmax, torch.fmin):
        with pytest.raises(RuntimeError, match="not implemented for complex tensors"):
            fn(z.to(TPU), z.to(TPU))
