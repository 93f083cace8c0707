"""Operators on tpu compared against the same operators on CPU."""

import copy

import pytest
import torch
import torch_tpu
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

TPU = torch.device("tpu")


# ---------------------------------------------------------------- helpers --

def to_tpu(x):
    if isinstance(x, torch.Tensor):
        return x.to(TPU)
    if isinstance(x, (list, tuple)):
        return type(x)(to_tpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_tpu(v) for k, v in x.items()}
    return x


def to_cpu(x):
    if isinstance(x, torch.Tensor):
        assert x.device.type == "tpu", f"result on {x.device}, expected tpu"
        return x.cpu()
    if isinstance(x, (list, tuple)):
        return tuple(to_cpu(v) for v in x)
    return x


def _plain(x):
    if isinstance(x, (list, tuple)):
        return tuple(_plain(v) for v in x)
    return x


def compare(fn, *args, rtol=None, atol=None, **kwargs):
    """Runs fn on CPU args and on tpu copies; asserts equal values and dtypes."""
    expected = fn(*args, **kwargs)
    actual = fn(*to_tpu(args), **to_tpu(kwargs))
    assert_close(to_cpu(actual), _plain(expected), rtol=rtol, atol=atol, equal_nan=True)
    return actual


def rand_int(shape, dtype=torch.int64, lo=-20, hi=20):
    return torch.randint(lo, hi, shape, dtype=dtype)


def nonzero_int(shape, dtype=torch.int64, lo=-20, hi=20):
    x = rand_int(shape, dtype, lo, hi)
    return torch.where(x == 0, torch.ones_like(x), x)


def nonzero_float(shape, dtype=torch.float32):
    x = torch.randn(shape, dtype=dtype)
    return torch.where(x.abs() < 0.1, torch.full_like(x, 0.5), x)


# --------------------------------------------------------------- binary ops --

FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INT_DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]


def make(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape) < 0.5
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    lo = 0 if dtype == torch.uint8 else -20
    return rand_int(shape, dtype, lo, 20)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.uint8],
                         ids=str)
@pytest.mark.parametrize("op", ["add", "sub"])
def test_add_sub_alpha(op, dtype):
    f = getattr(torch, op)
    a, b = make((4, 5), dtype), make((4, 5), dtype)
    compare(f, a, b)
    alpha = 3 if not dtype.is_floating_point else 0.75
    # CPU rounds alpha * b to the 16-bit type before adding; tpu keeps it in
    # float32, so allow an ulp of the operands' magnitude after cancellation.
    tol = dict(rtol=1e-3, atol=2e-3) if dtype == torch.float16 else {}
    compare(lambda x, y: f(x, y, alpha=alpha), a, b, **tol)
    if dtype in (torch.float32, torch.int64):
        compare(lambda x: f(x, 2), a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32,
                                   torch.int64, torch.uint8, torch.bool], ids=str)
def test_mul(dtype):
    a, b = make((3, 7), dtype), make((3, 7), dtype)
    compare(torch.mul, a, b)
    compare(lambda x: x * 3, a)


def test_add_bool():
    a, b = make((10,), torch.bool), make((10,), torch.bool)
    compare(torch.add, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div_float(mode, dtype):
    a = (torch.randn(6, 5) * 10).to(dtype)
    b = nonzero_float((6, 5), dtype)
    if mode is not None and dtype in (torch.float16, torch.bfloat16):
        # CPU rounds the quotient to the 16-bit type before truncating or
        # flooring; tpu rounds the float32 quotient (as CUDA does). Compare
        # with that float32 reference.
        for x, y in [(a, b), (a, torch.tensor(-2.5, dtype=dtype))]:
            ref = torch.div(x.float(), y.float(), rounding_mode=mode).to(dtype)
            out = torch.div(x.to(TPU), y.to(TPU), rounding_mode=mode)
            assert out.dtype == dtype
            assert_close(out.cpu(), ref)
        return
    compare(lambda x, y: torch.div(x, y, rounding_mode=mode), a, b)
    compare(lambda x: torch.div(x, -2.5, rounding_mode=mode), a)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div_int(mode, dtype):
    a = rand_int((6, 5), dtype, -50, 50)
    b = nonzero_int((6, 5), dtype, -7, 7)
    out = compare(lambda x, y: torch.div(x, y, rounding_mode=mode), a, b)
    assert out.dtype == (torch.float32 if mode is None else dtype)
    compare(lambda x: torch.div(x, 3, rounding_mode=mode), a)
    compare(lambda x: torch.div(x, -3, rounding_mode=mode), a)


def test_div_operators():
    a, b = torch.randn(5, 4), nonzero_float((5, 4))
    compare(lambda x, y: x / y, a, b)
    a_int, b_int = rand_int((5, 4)), nonzero_int((5, 4))
    compare(lambda x, y: x / y, a_int, b_int)
    compare(lambda x: 1 / x, b)
    compare(lambda x: x / 4, a_int)


def test_pow():
    base = torch.rand(4, 6) * 3 + 0.1
    exp = torch.randn(4, 6)
    compare(torch.pow, base, exp, rtol=1e-5, atol=1e-5)
    compare(lambda x: x ** 2, torch.randn(4, 6))
    compare(lambda x: x ** 3, torch.randn(4, 6))
    compare(lambda x: x ** 0.5, base)
    compare(lambda x: x ** -1, base)
    compare(lambda x: 2.0 ** x, exp, rtol=1e-5, atol=1e-5)
    b_int = rand_int((10,), torch.int64, -5, 5)
    ei = rand_int((10,), torch.int64, 0, 5)
    compare(torch.pow, b_int, ei)
    compare(lambda x: x ** 3, b_int)
    compare(lambda x: 2 ** x, ei)
    compare(lambda x: x ** 2.0, b_int)  # int ** float -> float


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int64,
                                   torch.uint8], ids=str)
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum(op, dtype):
    a, b = make((5, 5), dtype), make((5, 5), dtype)
    compare(getattr(torch, op), a, b)


def test_maximum_nan_propagates():
    a = torch.tensor([1.0, float("nan"), 3.0, float("nan")])
    b = torch.tensor([float("nan"), 2.0, 1.0, float("nan")])
    compare(torch.maximum, a, b)
    compare(torch.minimum, a, b)


@pytest.mark.parametrize("op", ["remainder", "fmod"])
def test_remainder_fmod_float(op):
    f = getattr(torch, op)
    a = torch.randn(8, 8) * 10
    b = nonzero_float((8, 8)) * 3
    compare(f, a, b, rtol=1e-5, atol=1e-5)
    compare(lambda x: f(x, 2.5), a, rtol=1e-5, atol=1e-5)
    compare(lambda x: f(x, -2.5), a, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("op", ["remainder", "fmod"])
def test_remainder_fmod_int(op, dtype):
    f = getattr(torch, op)
    a = rand_int((8, 8), dtype, -50, 50)
    b = nonzero_int((8, 8), dtype, -9, 9)
    compare(f, a, b)
    compare(lambda x: f(x, 3), a)
    compare(lambda x: f(x, -3), a)
    compare(lambda x, y: x % y, a, b)


@pytest.mark.parametrize("op,dtype", [
    (op, dtype) for op in ("eq", "ne", "lt", "le", "gt", "ge")
    for dtype in (torch.float32, torch.int64, torch.bool)
    if dtype != torch.bool or op in ("eq", "ne")
], ids=str)
def test_comparisons(op, dtype):
    f = getattr(torch, op)
    if dtype == torch.bool:
        a, b = make((6, 6), dtype), make((6, 6), dtype)
    else:
        # Small integer values so equality actually happens.
        a = rand_int((6, 6), torch.int64, -3, 3).to(dtype)
        b = rand_int((6, 6), torch.int64, -3, 3).to(dtype)
    out = compare(f, a, b)
    assert out.dtype == torch.bool
    if dtype == torch.float32:
        compare(lambda x, y: f(x[:, :1], 1 + y), a, b)  # broadcast, python scalar
    elif dtype == torch.int64:
        compare(lambda x: f(x, 0.5), a)  # int tensor vs float scalar


def test_comparison_operators():
    a = rand_int((5, 5), torch.int64, -2, 2).float()
    b = rand_int((5, 5), torch.int64, -2, 2).float()
    compare(lambda x, y: (x == y, x != y, x < y, x <= y, x > y, x >= y), a, b)
    compare(lambda x: (x == 1, x < 0, 0 < x), a)


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int32], ids=str)
def test_logical(op, dtype):
    f = getattr(torch, op)
    a = (rand_int((4, 6), torch.int64, 0, 2)).to(dtype)
    b = (rand_int((4, 6), torch.int64, 0, 2) * 3).to(dtype)
    out = compare(f, a, b)
    assert out.dtype == torch.bool


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int32], ids=str)
def test_bitwise(dtype):
    a, b = make((5, 7), dtype), make((5, 7), dtype)
    if dtype != torch.bool:
        a = torch.randint(0 if dtype == torch.uint8 else -100, 100, (5, 7)).to(dtype)
        b = torch.randint(0 if dtype == torch.uint8 else -100, 100, (5, 7)).to(dtype)
    compare(torch.bitwise_and, a, b)
    compare(torch.bitwise_or, a, b)
    compare(torch.bitwise_xor, a, b)
    compare(torch.bitwise_not, a)
    compare(lambda x, y: (x & y, x | y, x ^ y, ~x), a, b)


def test_bitwise_float_raises():
    a = torch.randn(3).to(TPU)
    with pytest.raises(RuntimeError):
        torch.bitwise_and(a, a)


def test_where():
    c = torch.rand(4, 5) < 0.5
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    compare(torch.where, c, a, b)
    compare(torch.where, c, a, b[0])          # broadcast
    compare(torch.where, c[:, :1], a, b)      # broadcast condition
    compare(lambda cc, x: torch.where(cc, x, 0.0), c, a)
    compare(lambda cc, x: torch.where(cc, 1.5, x), c, a)
    a_int = rand_int((4, 5))
    compare(torch.where, c, a_int, a)         # promotion int/float
    compare(torch.where, c, a.half(), a)      # promotion half/float


def test_masked_fill():
    x = torch.randn(4, 6)
    m = torch.rand(4, 6) < 0.3
    compare(lambda t, mm: t.masked_fill(mm, -1e9), x, m)
    compare(lambda t, mm: t.masked_fill(mm, float("-inf")), x, m)
    compare(lambda t, mm: t.masked_fill(mm[:1], 2.5), x, m)  # broadcast mask
    compare(lambda t, mm: t.masked_fill(mm, torch.tensor(7.0)), x, m)
    xi = rand_int((4, 6))
    compare(lambda t, mm: t.masked_fill(mm, 3), xi, m)

    def inplace(t, mm):
        t = t.clone()
        t.masked_fill_(mm, 0.25)
        return t
    compare(inplace, x, m)


# ------------------------------------------- broadcasting and promotion --

def test_broadcasting():
    compare(torch.add, torch.randn(4, 1, 3), torch.randn(5, 1))
    compare(torch.mul, torch.randn(1, 6), torch.randn(7, 1))
    compare(torch.sub, torch.randn(2, 3, 4), torch.randn(4))
    compare(torch.add, torch.randn(()), torch.randn(3, 2))
    compare(torch.maximum, torch.randn(3, 1, 2), torch.randn(1, 4, 1))


def test_broadcast_shape_mismatch_raises():
    a = torch.randn(3, 4).to(TPU)
    b = torch.randn(5).to(TPU)
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.add(a, b)


@pytest.mark.parametrize("a_dtype,b_dtype", [
    (torch.int64, torch.float32),
    (torch.int32, torch.float64),
    (torch.float16, torch.float32),
    (torch.bfloat16, torch.float16),
    (torch.int8, torch.int64),
    (torch.uint8, torch.int8),
    (torch.bool, torch.int32),
    (torch.bool, torch.float16),
    (torch.int16, torch.bfloat16),
], ids=str)
def test_type_promotion_tensor_tensor(a_dtype, b_dtype):
    a, b = make((3, 4), a_dtype), make((3, 4), b_dtype)
    for f in (torch.add, torch.mul):
        out = compare(f, a, b)
        assert out.dtype == torch.result_type(a, b)


def test_type_promotion_python_scalar():
    xi = rand_int((3, 4), torch.int32)
    xh = torch.randn(3, 4).half()
    xb = torch.rand(3, 4) < 0.5
    assert compare(lambda x: x + 2.5, xi).dtype == torch.float32
    assert compare(lambda x: x * 3, xi).dtype == torch.int32
    assert compare(lambda x: x + 2.5, xh).dtype == torch.float16
    assert compare(lambda x: x + 1, xb).dtype == torch.int64
    assert compare(lambda x: x * 1.5, xb).dtype == torch.float32
    assert compare(lambda x: 10 - x, xi).dtype == torch.int32
    assert compare(lambda x: x / 2, xi).dtype == torch.float32
    assert compare(lambda x: x + True, xi).dtype == torch.int32


def test_zero_dim_cpu_tensor_with_tpu_tensor():
    x = torch.randn(3, 4)
    xt = x.to(TPU)
    s = torch.tensor(2.5)
    for r, e in [(xt + s, x + s), (s + xt, s + x), (xt * s, x * s), (s - xt, s - x),
                 (torch.maximum(xt, s), torch.maximum(x, s))]:
        assert r.device.type == "tpu"
        assert_close(r.cpu(), e)
    # 0-d tensors do not promote a dimensioned tensor within the same category.
    xh = x.half()
    r = xh.to(TPU) + torch.tensor(2.5, dtype=torch.float64)
    assert r.dtype == torch.float16
    assert_close(r.cpu(), xh + torch.tensor(2.5, dtype=torch.float64))
    xi = rand_int((3, 4), torch.int32)
    r = xi.to(TPU) * torch.tensor(3)
    assert r.dtype == torch.int32
    assert torch.equal(r.cpu(), xi * torch.tensor(3))
    # ...but do across categories (to the 0-d tensor's dtype).
    e = xi * torch.tensor(0.5, dtype=torch.float64)
    r = xi.to(TPU) * torch.tensor(0.5, dtype=torch.float64)
    assert r.dtype == e.dtype == torch.float64
    assert_close(r.cpu(), e)


def test_zero_dim_tpu_tensor_with_tpu_tensor():
    x = torch.randn(5).half()
    s = torch.tensor(3.0, dtype=torch.float64)
    out = compare(torch.add, x, s)
    assert out.dtype == torch.float16
    compare(torch.mul, torch.randn(()), torch.randn(()))


# ------------------------------------------------- in-place and out= --

@pytest.mark.parametrize("method,arg", [
    ("add_", 1.5), ("sub_", 2.0), ("mul_", -3.0), ("div_", 4.0), ("pow_", 2.0),
    ("remainder_", 1.5), ("fmod_", 1.5),
])
def test_inplace_scalar(method, arg):
    def fn(x):
        y = x.clone()
        r = getattr(y, method)(arg)
        assert r is y
        return y
    compare(fn, torch.randn(4, 5), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", ["add_", "sub_", "mul_", "div_", "maximum", "minimum"])
def test_inplace_tensor_broadcast(method):
    def fn(x, o):
        y = x.clone()
        if method in ("maximum", "minimum"):
            getattr(torch, method)(y, o, out=y)
        else:
            r = getattr(y, method)(o)
            assert r is y
        return y
    compare(fn, torch.randn(4, 5), nonzero_float((5,)))


def test_inplace_alpha_and_modes():
    def fn(x, o):
        a = x.clone().add_(o, alpha=-2)
        b = x.clone().sub_(o, alpha=0.5)
        c = x.clone().div_(o, rounding_mode="floor")
        d = x.clone().div_(o, rounding_mode="trunc")
        return a, b, c, d
    compare(fn, torch.randn(3, 4) * 5, nonzero_float((3, 4)))


def test_inplace_int_and_bool():
    def fn(x, o):
        a = x.clone().add_(o)
        b = x.clone().mul_(3)
        c = x.clone().bitwise_and_(o)
        return a, b, c
    compare(fn, rand_int((3, 4)), rand_int((3, 4)))


def test_inplace_float_into_int_raises_like_cpu():
    x = rand_int((3,))
    with pytest.raises(RuntimeError, match="can't be cast"):
        x.clone().add_(1.5)
    with pytest.raises(RuntimeError, match="can't be cast"):
        x.to(TPU).add_(1.5)
    with pytest.raises(RuntimeError):
        x.to(TPU).div_(2)


def test_inplace_broadcast_output_shape_raises():
    x = torch.randn(4).to(TPU)
    with pytest.raises(RuntimeError):
        x.add_(torch.randn(3, 4).to(TPU))


def test_inplace_lower_precision_self():
    def fn(x, o):
        y = x.clone()
        y.add_(o)  # float16 self, float32 other: result cast to float16
        return y
    out = compare(fn, torch.randn(6).half(), torch.randn(6))
    assert out.dtype == torch.float16


def test_inplace_unary():
    def fn(x):
        outs = []
        for m in ("neg_", "abs_", "exp_", "tanh_", "sigmoid_", "relu_", "floor_", "sqrt_"):
            y = x.clone().abs() if m == "sqrt_" else x.clone()
            r = getattr(y, m)()
            assert r is y
            outs.append(y)
        return outs
    compare(fn, torch.randn(3, 5))


def test_out_variants():
    a, b = torch.randn(3, 4), torch.randn(3, 4)

    def fn(x, y):
        o1 = torch.empty_like(x)
        torch.add(x, y, alpha=2, out=o1)
        o2 = torch.empty(0, dtype=x.dtype, device=x.device)  # resized
        torch.mul(x, y, out=o2)
        o3 = torch.empty(3, 4, dtype=torch.float64, device=x.device)  # wider dtype
        torch.sub(x, y, out=o3)
        o4 = torch.empty(3, 4, dtype=torch.bool, device=x.device)
        torch.lt(x, 0.5, out=o4)
        o5 = torch.empty_like(x)
        torch.exp(x, out=o5)
        o6 = torch.empty(0, device=x.device)
        torch.div(x, y, rounding_mode="floor", out=o6)
        o7 = torch.empty(0, device=x.device)
        torch.where(x > 0, x, y, out=o7)
        o8 = torch.empty(0, device=x.device)
        torch.pow(x, 2, out=o8)
        return o1, o2, o3, o4, o5, o6, o7, o8
    compare(fn, a, b)


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge", "fmod", "remainder",
                                "bitwise_and", "bitwise_or", "bitwise_xor"])
def test_out_variants_tensor_tensor(op):
    f = getattr(torch, op)
    a = rand_int((3, 4), torch.int32, -9, 9)
    b = nonzero_int((3, 4), torch.int32, -9, 9)
    a[0] = b[0]  # some equal elements for the comparisons (b has no zeros)

    dtype = a.dtype if op.startswith(("fmod", "remainder", "bitwise")) else torch.bool

    def fn(x, y):
        o = torch.empty(0, dtype=dtype, device=x.device)
        r = f(x, y, out=o)
        assert r is o
        return o
    compare(fn, a, b)


def test_out_into_view():
    a, b = torch.randn(4, 3), torch.randn(4, 3)

    def fn(x, y):
        base = torch.zeros(4, 6, dtype=x.dtype, device=x.device)
        torch.add(x, y, out=base[:, 1:4])
        torch.mul(x, y, out=base[:, ::2])
        return base
    compare(fn, a, b)


def test_out_wrong_dtype_raises_like_cpu():
    a = torch.randn(3)
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.add(a, a, out=torch.empty(3, dtype=torch.int64))
    at = a.to(TPU)
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.add(at, at, out=torch.empty(3, dtype=torch.int64, device=TPU))


# ---------------------------------------------------------------- unary --

UNARY = {
    "neg": (torch.neg, "any"),
    "abs": (torch.abs, "any"),
    "exp": (torch.exp, "any"),
    "log": (torch.log, "pos"),
    "sqrt": (torch.sqrt, "pos"),
    "rsqrt": (torch.rsqrt, "pos"),
    "tanh": (torch.tanh, "any"),
    "sigmoid": (torch.sigmoid, "any"),
    "relu": (torch.relu, "any"),
    "gelu_none": (lambda x: F.gelu(x, approximate="none"), "any"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), "any"),
    "silu": (F.silu, "any"),
    "sin": (torch.sin, "any"),
    "cos": (torch.cos, "any"),
    "erf": (torch.erf, "wide"),
    "floor": (torch.floor, "wide"),
    "ceil": (torch.ceil, "wide"),
    "round": (torch.round, "wide"),
    "trunc": (torch.trunc, "wide"),
    "sign": (torch.sign, "any"),
    "reciprocal": (torch.reciprocal, "nonzero"),
    "expm1": (torch.expm1, "any"),
    "log1p": (torch.log1p, "pos"),
    "log2": (torch.log2, "pos"),
    "log10": (torch.log10, "pos"),
}


def unary_input(kind, shape, dtype):
    x = torch.randn(shape)
    if kind == "pos":
        x = x.abs() + 0.05
    elif kind == "wide":
        x = x * 4
    elif kind == "nonzero":
        x = torch.where(x.abs() < 0.1, torch.full_like(x, 0.7), x)
    return x.to(dtype)


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name):
    fn, kind = UNARY[name]
    compare(fn, unary_input(kind, (7, 9), torch.float32), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["neg", "exp", "log", "rsqrt", "tanh", "sigmoid", "gelu_none",
                                  "gelu_tanh", "silu", "erf", "round", "reciprocal"])
def test_unary_float16(name):
    fn, kind = UNARY[name]
    compare(fn, unary_input(kind, (7, 9), torch.float16))


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "gelu_none", "gelu_tanh", "silu",
                                  "erf", "rsqrt", "round"])
def test_unary_bfloat16(name):
    fn, kind = UNARY[name]
    compare(fn, unary_input(kind, (7, 9), torch.bfloat16))


@pytest.mark.parametrize("name", ["exp", "log", "relu", "gelu_none", "floor", "sign"])
def test_unary_noncontiguous(name):
    fn, kind = UNARY[name]
    compare(fn, unary_input(kind, (9, 7), torch.float32).t(), rtol=1e-5, atol=1e-6)
    compare(fn, unary_input(kind, (6, 14), torch.float32)[1::2, ::3], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["exp", "tanh", "erf", "gelu_none"])
def test_unary_float64(name):
    fn, kind = UNARY[name]
    compare(fn, unary_input(kind, (7, 9), torch.float64), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["exp", "sqrt", "sin", "tanh", "sigmoid", "log", "erf",
                                  "reciprocal", "rsqrt"])
def test_unary_int_promotes_to_float(name):
    fn, _ = UNARY[name]
    x = torch.randint(1, 9, (10,))
    out = compare(fn, x, rtol=1e-5, atol=1e-6)
    assert out.dtype == torch.float32


@pytest.mark.parametrize("name", ["neg", "abs", "sign", "floor", "ceil", "round", "trunc",
                                  "relu"])
@pytest.mark.parametrize("dtype", [torch.int64], ids=str)
def test_unary_int_keeps_dtype(name, dtype):
    fn, _ = UNARY[name]
    x = rand_int((12,), dtype, -50, 50)
    out = compare(fn, x)
    assert out.dtype == dtype


def test_round_half_to_even():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.5, -3.5, 1e7 + 0.5])
    compare(torch.round, x)


SPECIAL = [0.0, -0.0, float("inf"), float("-inf"), 1e-30, -1e30, 1e30]


@pytest.mark.parametrize("name", ["neg", "abs", "exp", "tanh", "sigmoid", "relu", "sign",
                                  "floor", "ceil", "sin", "erf", "silu", "log", "sqrt",
                                  "rsqrt", "reciprocal"])
def test_unary_special_values(name):
    x = torch.tensor(SPECIAL + [float("nan"), 2.0, -3.0])
    if name in ("log", "sqrt", "rsqrt"):
        x = x.abs()
    compare(UNARY[name][0], x)


def test_erf_saturates_at_one():
    # |erf(x)| <= 1 everywhere, and erf is exactly +-1 in float32 for |x| >= 4.
    x = torch.tensor([-1e30, -100.0, -10.0, -5.0, -4.0, 4.0, 5.0, 10.0, 100.0, 1e30])
    out = compare(torch.erf, x)
    assert (out.abs() <= 1).all()


def test_gelu_large_magnitude():
    # gelu(x) -> 0 for x -> -inf and -> x for x -> +inf.
    x = torch.tensor([-1e30, -1e4, -100.0, -20.0, -10.0, 10.0, 20.0, 100.0, 1e4])
    compare(lambda t: F.gelu(t), x, rtol=1e-6, atol=1e-6)
    compare(lambda t: F.gelu(t, approximate="tanh"), x, rtol=1e-6, atol=1e-6)


def test_isnan():
    x = torch.tensor([0.0, float("nan"), float("inf"), -1.0, float("nan")])
    compare(torch.isnan, x)


# ------------------------------------------------------------ reductions --

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32,
                                   torch.bool], ids=str)
def test_sum(dtype):
    x = make((4, 5, 6), dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else {}
    compare(torch.sum, x, **tol)
    compare(lambda t: t.sum((0, 2)), x, **tol)
    compare(lambda t: t.sum(1, keepdim=True), x, **tol)
    if dtype == torch.float32:
        compare(lambda t: t.sum(0), x, **tol)
        compare(lambda t: t.sum(-1), x, **tol)
        compare(lambda t: t.sum((0, 1, 2), keepdim=True), x, **tol)


def test_sum_dtype_arg():
    x = make((5, 6), torch.int32)
    assert compare(lambda t: t.sum(dtype=torch.float64), x).dtype == torch.float64
    assert compare(lambda t: t.sum(1, dtype=torch.int32), x).dtype == torch.int32
    xh = torch.randn(5, 6).half()
    assert compare(lambda t: t.sum(0, dtype=torch.float32), xh).dtype == torch.float32


def test_sum_accumulates_half_in_float():
    # 4096 ones in float16 sum exactly to 4096 when accumulated in float32.
    x = torch.ones(4096, dtype=torch.float16)
    compare(torch.sum, x)
    x = torch.full((2048,), 0.1, dtype=torch.bfloat16)
    compare(torch.sum, x)


def test_sum_noncontiguous_and_empty():
    x = torch.randn(6, 8)
    compare(lambda t: t.t()[::2].sum(1), x, rtol=1e-5, atol=1e-5)
    compare(lambda t: t.sum(0), torch.randn(0, 3))
    compare(torch.sum, torch.randn(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
def test_mean(dtype):
    x = torch.randn(4, 5, 6).to(dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else {}
    compare(torch.mean, x, **tol)
    compare(lambda t: t.mean(1), x, **tol)
    compare(lambda t: t.mean((0, -1), keepdim=True), x, **tol)
    compare(lambda t: t.mean(dtype=torch.float64), x)


def test_mean_int_raises_like_cpu():
    with pytest.raises(RuntimeError, match="mean"):
        torch.arange(4).mean()
    with pytest.raises(RuntimeError, match="mean"):
        torch.arange(4, device=TPU).mean()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_amax_amin(dtype):
    x = make((4, 5, 6), dtype)
    for f in (torch.amax, torch.amin):
        compare(f, x)
        compare(lambda t: f(t, 1), x)
        compare(lambda t: f(t, (0, 2), keepdim=True), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bfloat16], ids=str)
def test_max_min_all(dtype):
    x = make((5, 7), dtype)
    compare(torch.max, x)
    compare(torch.min, x)
    compare(lambda t: t.t().max(), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_max_min_dim_with_ties(dtype):
    # Few distinct values: many ties, where CPU returns the first index.
    x = torch.randint(0, 3, (6, 9)).to(dtype)
    for f in (torch.max, torch.min):
        for dim in (0, -1):
            compare(lambda t: f(t, dim, keepdim=dim == 0), x)
    compare(lambda t: torch.max(t.t(), 1), x)


def test_max_dim_nan():
    x = torch.tensor([[1.0, float("nan"), 3.0], [2.0, 0.0, float("nan")]])
    compare(lambda t: torch.max(t, 1), x)
    compare(lambda t: torch.min(t, 1), x)
    compare(torch.max, x)


@pytest.mark.parametrize("f", ["argmax", "argmin"])
def test_argmax_argmin(f):
    fn = getattr(torch, f)
    x = torch.randint(0, 4, (5, 8)).float()  # ties
    compare(fn, x)
    compare(lambda t: fn(t, 0), x)
    compare(lambda t: fn(t, 1), x)
    compare(lambda t: fn(t, 1, keepdim=True), x)
    compare(lambda t: fn(t, keepdim=True), x)
    compare(fn, torch.randn(17))
    compare(fn, torch.randint(-5, 5, (4, 4)))


def test_max_dim_out():
    x = torch.randn(4, 6)

    def fn(t):
        v = torch.empty(0, device=t.device)
        i = torch.empty(0, dtype=torch.long, device=t.device)
        torch.max(t, 1, out=(v, i))
        return v, i
    compare(fn, x)


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.uint8], ids=str)
def test_any_all(dtype):
    x = (torch.rand(5, 6) < 0.3).to(dtype)
    if dtype != torch.bool:
        x = x * 7
    for f in (torch.any, torch.all):
        compare(f, x)
        if dtype == torch.bool:
            compare(lambda t: f(t, 1, keepdim=True), x)
            compare(lambda t: f(t.t(), 0), x)
    compare(torch.all, torch.ones(3, 3, dtype=dtype))
    compare(torch.any, torch.zeros(3, 3, dtype=dtype))


# ---------------------------------------------------------------- matmul --

MM_TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("highest_matmul_precision")
class TestMatmul:
    def test_mm(self):
        compare(torch.mm, torch.randn(8, 16), torch.randn(16, 12), **MM_TOL)
        compare(torch.mm, torch.randn(16, 8).t(), torch.randn(12, 16).t(), **MM_TOL)
        compare(torch.mm, torch.randn(1, 5), torch.randn(5, 1), **MM_TOL)
        compare(lambda a, b: a @ b, torch.randn(3, 4), torch.randn(4, 2), **MM_TOL)

    def test_mm_float64_and_ints(self):
        compare(torch.mm, torch.randn(6, 7, dtype=torch.float64),
                torch.randn(7, 5, dtype=torch.float64))
        compare(torch.mm, rand_int((4, 5), torch.int64, -5, 5),
                rand_int((5, 3), torch.int64, -5, 5))

    def test_mm_half(self):
        compare(torch.mm, torch.randn(8, 16).half(), torch.randn(16, 4).half(),
                rtol=1e-2, atol=1e-2)
        compare(torch.mm, torch.randn(8, 16).bfloat16(), torch.randn(16, 4).bfloat16(),
                rtol=2e-2, atol=2e-2)

    def test_mm_out(self):
        def fn(a, b):
            o = torch.empty(0, device=a.device)
            torch.mm(a, b, out=o)
            return o
        compare(fn, torch.randn(5, 6), torch.randn(6, 7), **MM_TOL)

    @pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1), (0, 3.0), (2, 0)])
    def test_addmm(self, beta, alpha):
        m1, m2 = torch.randn(6, 8), torch.randn(8, 5)
        for bias in (torch.randn(6, 5), torch.randn(5), torch.randn(1, 5), torch.randn(6, 1)):
            compare(lambda c, a, b: torch.addmm(c, a, b, beta=beta, alpha=alpha), bias, m1, m2,
                    **MM_TOL)

    def test_addmm_beta_zero_ignores_nan(self):
        bias = torch.full((4, 3), float("nan"))
        compare(lambda c, a, b: torch.addmm(c, a, b, beta=0), bias, torch.randn(4, 5),
                torch.randn(5, 3), **MM_TOL)

    def test_addmm_inplace_and_out(self):
        def fn(c, a, b):
            c1 = c.clone()
            c1.addmm_(a, b, beta=0.5, alpha=-1)
            o = torch.empty(0, device=a.device)
            torch.addmm(c, a, b, out=o)
            return c1, o
        compare(fn, torch.randn(3, 4), torch.randn(3, 6), torch.randn(6, 4), **MM_TOL)

    def test_bmm(self):
        compare(torch.bmm, torch.randn(3, 4, 5), torch.randn(3, 5, 6), **MM_TOL)
        compare(torch.bmm, torch.randn(3, 5, 4).transpose(1, 2), torch.randn(3, 5, 6), **MM_TOL)

    @pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -1.5), (0, 2.0)])
    def test_baddbmm(self, beta, alpha):
        compare(lambda c, a, b: torch.baddbmm(c, a, b, beta=beta, alpha=alpha),
                torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 5, 4), **MM_TOL)
        compare(lambda c, a, b: torch.baddbmm(c, a, b, beta=beta, alpha=alpha),
                torch.randn(3, 4), torch.randn(2, 3, 5), torch.randn(2, 5, 4), **MM_TOL)

    def test_baddbmm_inplace(self):
        def fn(c, a, b):
            c = c.clone()
            c.baddbmm_(a, b, alpha=0.5)
            return c
        compare(fn, torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 5, 4), **MM_TOL)

    @pytest.mark.parametrize("sa,sb", [
        ((2, 3, 5), (5, 4)),
        ((2, 3, 5), (2, 5, 4)),
        ((2, 1, 3, 5), (4, 5, 6)),
        ((3, 5), (2, 5, 4)),
        ((1, 3, 5), (2, 1, 5, 4)),
    ], ids=str)
    def test_matmul(self, sa, sb):
        compare(torch.matmul, torch.randn(sa), torch.randn(sb), **MM_TOL)

    def test_linear(self):
        w, b = torch.randn(6, 8), torch.randn(6)
        compare(F.linear, torch.randn(4, 8), w, b, **MM_TOL)
        compare(F.linear, torch.randn(4, 8), w, **MM_TOL)
        compare(F.linear, torch.randn(2, 3, 8), w, b, **MM_TOL)

    def test_linear_backward(self):
        x, w, b = torch.randn(5, 8), torch.randn(3, 8), torch.randn(3)
        check_grads(lambda xx, ww, bb: F.linear(xx, ww, bb), x, w, b, **MM_TOL)


def test_default_precision_is_close():
    # DEFAULT (one bf16 pass, tpu's default): close to CPU at bf16 level.
    with torch_tpu.precision(torch_tpu.Precision.DEFAULT):
        compare(torch.mm, torch.randn(16, 32), torch.randn(32, 8), rtol=3e-2, atol=3e-2)


def test_mm_shape_mismatch_raises():
    a = torch.randn(3, 4).to(TPU)
    b = torch.randn(5, 6).to(TPU)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(a, b)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        a @ b
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        F.linear(a, torch.randn(2, 5).to(TPU))


def test_bmm_batch_mismatch_raises():
    with pytest.raises(RuntimeError):
        torch.bmm(torch.randn(2, 3, 4).to(TPU), torch.randn(3, 4, 5).to(TPU))


# ------------------------------------------------ softmax and losses --

def check_grads(fn, *inputs, rtol=None, atol=None, grad_out=None):
    """fn on CPU and tpu with autograd; compares outputs and every input's grad."""
    xs_c = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    xs_t = [x.detach().to(TPU).requires_grad_(x.is_floating_point()) for x in inputs]
    out_c = fn(*xs_c)
    out_t = fn(*xs_t)
    assert out_t.device.type == "tpu"
    assert_close(out_t.detach().cpu(), out_c.detach(), rtol=rtol, atol=atol)
    g = torch.randn_like(out_c) if grad_out is None else grad_out
    out_c.backward(g)
    out_t.backward(g.to(TPU))
    for xc, xt in zip(xs_c, xs_t):
        if xc.requires_grad:
            assert xt.grad is not None
            assert xt.grad.device.type == "tpu"
            assert_close(xt.grad.cpu(), xc.grad, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax(log, dim):
    f = F.log_softmax if log else F.softmax
    x = torch.randn(3, 4, 5) * 3
    compare(lambda t: f(t, dim=dim), x, rtol=1e-5, atol=1e-6)
    check_grads(lambda t: f(t, dim=dim), x, rtol=1e-5, atol=1e-6)


def test_softmax_extreme_values():
    x = torch.tensor([[1000.0, 0.0, -1000.0], [float("-inf"), 0.0, 1.0]])
    compare(lambda t: F.softmax(t, 1), x)
    compare(lambda t: F.log_softmax(t, 1), x)


def test_softmax_half_and_dtype():
    x = torch.randn(4, 7)
    compare(lambda t: F.softmax(t.half(), dim=1), x)
    compare(lambda t: F.softmax(t.half(), dim=1, dtype=torch.float32), x, rtol=1e-3, atol=1e-3)
    compare(lambda t: F.log_softmax(t.bfloat16(), dim=0), x)
    compare(lambda t: torch.softmax(t, 0, dtype=torch.float64), x)


def test_softmax_0d_and_1d():
    compare(lambda t: F.softmax(t, 0), torch.randn(()))
    compare(lambda t: F.log_softmax(t, 0), torch.randn(9), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("use_weight", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_cross_entropy(reduction, use_weight, ignore_index):
    n, c = 8, 5
    logits = torch.randn(n, c) * 2
    target = torch.randint(0, c, (n,))
    target[0] = 2  # ignore_index=2 always ignores something
    if ignore_index == -100:
        target[1] = -100
    weight = torch.rand(c) + 0.5 if use_weight else None

    def fn(x):
        w = None if weight is None else weight.to(x.device)
        return F.cross_entropy(x, target.to(x.device), weight=w, reduction=reduction,
                               ignore_index=ignore_index)
    check_grads(fn, logits, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("use_weight", [False, True])
def test_nll_loss(reduction, use_weight):
    n, c = 6, 4
    logp = F.log_softmax(torch.randn(n, c), 1)
    target = torch.randint(0, c, (n,))
    target[3] = 1
    weight = torch.rand(c) + 0.5 if use_weight else None

    def fn(x):
        w = None if weight is None else weight.to(x.device)
        return F.nll_loss(x, target.to(x.device), weight=w, reduction=reduction,
                          ignore_index=1)
    check_grads(fn, logp, rtol=1e-5, atol=1e-6)


def test_nll_loss_no_batch_dim():
    logp = F.log_softmax(torch.randn(5), 0)
    target = torch.tensor(3)

    def fn(x):
        return F.nll_loss(x, target.to(x.device))
    check_grads(fn, logp, rtol=1e-5, atol=1e-6)


def test_nll_loss_all_ignored_mean_is_nan():
    logp = F.log_softmax(torch.randn(3, 4), 1)
    target = torch.full((3,), -100)
    compare(lambda x, t: F.nll_loss(x, t), logp, target)


@pytest.mark.parametrize("name", ["relu", "gelu_none", "gelu_tanh", "tanh", "sigmoid", "silu"])
def test_activation_backward(name):
    fn = UNARY[name][0]
    x = torch.randn(6, 7) * 2
    x[0, :3] = 0.0  # relu's kink: CPU's gradient at 0 is 0
    check_grads(fn, x, rtol=1e-5, atol=1e-5)


def test_activation_backward_half():
    x = torch.randn(4, 8)
    for name in ("gelu_none", "sigmoid"):
        check_grads(lambda t: UNARY[name][0](t.half()).float(), x, rtol=1e-2, atol=1e-2)


def test_composite_autograd_graph():
    a, b = torch.randn(4, 5), torch.randn(4, 5)

    def fn(x, y):
        z = (x * y).sigmoid() + torch.exp(-x * x) / (1 + y ** 2)
        return torch.where(z > 0.7, z * 2, z - x).sum(1)
    check_grads(fn, a, b, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------- training --

def _mlp():
    return nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4))


def _train(model, opt, x, y, steps):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def _compare_models(model_c, model_t, rtol, atol):
    for (name, pc), pt in zip(model_c.named_parameters(), model_t.parameters()):
        assert pt.device.type == "tpu"
        assert_close(pt.detach().cpu(), pc.detach(), rtol=rtol, atol=atol, msg=name)


@pytest.mark.usefixtures("highest_matmul_precision")
def test_mlp_forward_backward_sgd():
    model_c = _mlp()
    model_t = copy.deepcopy(model_c).to(TPU)
    x, y = torch.randn(12, 10), torch.randint(0, 4, (12,))
    xt, yt = x.to(TPU), y.to(TPU)
    # Forward and gradients.
    out_c, out_t = model_c(x), model_t(xt)
    assert_close(out_t.detach().cpu(), out_c.detach(), rtol=1e-5, atol=1e-5)
    F.cross_entropy(out_c, y).backward()
    F.cross_entropy(out_t, yt).backward()
    for pc, pt in zip(model_c.parameters(), model_t.parameters()):
        assert_close(pt.grad.cpu(), pc.grad, rtol=1e-5, atol=1e-5)
    # Training steps.
    opt_c = torch.optim.SGD(model_c.parameters(), lr=0.1, momentum=0.9)
    opt_t = torch.optim.SGD(model_t.parameters(), lr=0.1, momentum=0.9)
    lc = _train(model_c, opt_c, x, y, 3)
    lt = _train(model_t, opt_t, xt, yt, 3)
    assert_close([v.cpu() for v in lt], lc, rtol=1e-5, atol=1e-5)
    _compare_models(model_c, model_t, rtol=1e-5, atol=1e-5)
    assert lc[-1] < lc[0]


@pytest.mark.usefixtures("highest_matmul_precision")
def test_mlp_adamw_step():
    model_c = _mlp()
    model_t = copy.deepcopy(model_c).to(TPU)
    x, y = torch.randn(12, 10), torch.randint(0, 4, (12,))
    opt_c = torch.optim.AdamW(model_c.parameters(), lr=1e-2, weight_decay=0.1)
    opt_t = torch.optim.AdamW(model_t.parameters(), lr=1e-2, weight_decay=0.1)
    lc = _train(model_c, opt_c, x, y, 2)
    lt = _train(model_t, opt_t, x.to(TPU), y.to(TPU), 2)
    assert_close([v.cpu() for v in lt], lc, rtol=1e-5, atol=1e-5)
    _compare_models(model_c, model_t, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------- errors --

def test_cpu_non_scalar_with_tpu_raises():
    a = torch.randn(3, 4).to(TPU)
    b = torch.randn(3, 4)
    with pytest.raises(RuntimeError, match="device"):
        a + b
    with pytest.raises(RuntimeError, match="device"):
        b + a
    with pytest.raises(RuntimeError, match="device"):
        torch.mm(a, b.t())
    with pytest.raises(RuntimeError, match="device"):
        torch.where(a > 0, a, b)
    # Still usable.
    assert_close((a + 1).cpu(), a.cpu() + 1)


@pytest.mark.parametrize("call,opname", [
    (lambda x: torch.linalg.ldl_factor(x + x.mT), "aten::linalg_ldl_factor_ex"),
    (lambda x: torch.histogramdd(x, bins=3), "aten::_histogramdd_bin_edges"),
], ids=["ldl_factor", "histogramdd"])
def test_unsupported_op_raises_not_implemented(call, opname):
    x = torch.randn(4, 4).to(TPU)
    with pytest.raises(NotImplementedError) as info:
        call(x)
    msg = str(info.value)
    assert "aten::" in msg
    assert opname in msg
    assert "tpu" in msg
    # The process stays usable afterwards, and x is unharmed.
    y = torch.randn(4, 4)
    assert_close((x.cpu() * 2 + y), (x * 2 + y.to(TPU)).cpu())
    torch.tpu.synchronize()


# ------------------------------------------- vector products, floor division --

def test_dot_mv_addmv_match_cpu(highest_matmul_precision):
    a, b, m = torch.randn(7), torch.randn(7), torch.randn(4, 7)
    c = torch.randn(4)
    assert_close(torch.dot(a.to(TPU), b.to(TPU)).cpu(), torch.dot(a, b))
    assert_close((m.to(TPU) @ a.to(TPU)).cpu(), m @ a)
    assert_close((a.to(TPU) @ m.t().to(TPU)).cpu(), a @ m.t())
    assert_close(torch.addmv(c.to(TPU), m.to(TPU), a.to(TPU), beta=0.5, alpha=-2).cpu(),
                 torch.addmv(c, m, a, beta=0.5, alpha=-2))
    with pytest.raises(RuntimeError, match="1D tensors expected"):
        torch.dot(m.to(TPU), a.to(TPU))


def test_floor_divide_logical_not_sgn_match_cpu():
    x = torch.randint(-20, 20, (32,))
    y = torch.randint(1, 6, (32,)) * (torch.randint(0, 2, (32,)) * 2 - 1)
    assert torch.equal((x.to(TPU) // y.to(TPU)).cpu(), x // y)
    f = torch.randn(32) * 5
    assert_close((f.to(TPU) // 0.7).cpu(), f // 0.7)
    assert torch.equal(torch.logical_not(x.to(TPU)).cpu(), torch.logical_not(x))
    assert torch.equal(torch.sgn(f.to(TPU)).cpu(), torch.sgn(f))
    g = f.clone().requires_grad_()
    gt = f.to(TPU).requires_grad_()
    g.abs().sum().backward()
    gt.abs().sum().backward()
    assert_close(gt.grad.cpu(), g.grad)


# ------------------------------------ trigonometry, hyperbolic, products --

@pytest.mark.parametrize("name,lo,hi", [
    ("tan", -1.4, 1.4), ("atan", -20, 20), ("asin", -0.999, 0.999), ("acos", -0.999, 0.999),
    ("sinh", -8, 8), ("cosh", -8, 8), ("asinh", -50, 50), ("acosh", 1.0, 50),
    ("atanh", -0.999, 0.999),
])
def test_inverse_and_hyperbolic_trig_match_cpu(name, lo, hi):
    x = torch.empty(4096).uniform_(lo, hi)
    x[:4] = torch.tensor([1e-7, -1e-7, 1e-3, -1e-3]).clamp(lo, hi)
    fn = getattr(torch, name)
    assert_close(fn(x.to(TPU)).cpu(), fn(x), rtol=2e-5, atol=1e-6)
    xg = x[:64].clone().requires_grad_()
    xt = x[:64].clone().to(TPU).requires_grad_()
    fn(xg).sum().backward()
    fn(xt).sum().backward()
    assert_close(xt.grad.cpu(), xg.grad, rtol=1e-4, atol=1e-5)
    # integer input promotes to float, as on CPU
    assert fn(torch.ones(3, dtype=torch.int32, device=TPU) * (1 if name != "acosh" else 2)).dtype == torch.float32


def test_prod_matches_cpu():
    x = torch.rand(4, 6) + 0.5
    assert_close(torch.prod(x.to(TPU)).cpu(), torch.prod(x))
    assert_close(torch.prod(x.to(TPU), 1).cpu(), torch.prod(x, 1))
    assert_close(torch.prod(x.to(TPU), 0, keepdim=True).cpu(), torch.prod(x, 0, keepdim=True))
    i = torch.randint(1, 4, (5,), dtype=torch.int32)
    assert torch.equal(torch.prod(i.to(TPU)).cpu(), torch.prod(i))
    xg = x.clone().requires_grad_()
    xt = x.clone().to(TPU).requires_grad_()
    torch.prod(xg, 1).sum().backward()
    torch.prod(xt, 1).sum().backward()
    assert_close(xt.grad.cpu(), xg.grad)


@pytest.mark.parametrize("fn", [
    lambda t: F.leaky_relu(t, 0.07), lambda t: F.hardtanh(t, -0.5, 0.8), F.relu6,
    lambda t: F.elu(t, 1.3), F.selu, F.celu,
], ids=["leaky_relu", "hardtanh", "relu6", "elu", "selu", "celu"])
def test_parametric_activations_forward_backward(fn):
    x = torch.randn(200) * 3
    xg = x.clone().requires_grad_()
    xt = x.clone().to(TPU).requires_grad_()
    yc, yt = fn(xg), fn(xt)
    assert_close(yt.detach().cpu(), yc.detach(), rtol=1e-5, atol=1e-6)
    yc.sum().backward()
    yt.sum().backward()
    assert_close(xt.grad.cpu(), xg.grad, rtol=1e-5, atol=1e-6)
    y_in = x.to(TPU).clone()
    F.leaky_relu_(y_in, 0.2)
    assert_close(y_in.cpu(), F.leaky_relu(x, 0.2))


@pytest.mark.parametrize("use_gelu", [True, False])
def test_addmm_activation(use_gelu, highest_matmul_precision):
    a, b, s = torch.randn(5, 8), torch.randn(8, 3), torch.randn(3)
    want = torch._addmm_activation(s, a, b, beta=0.5, alpha=2.0, use_gelu=use_gelu)
    got = torch._addmm_activation(s.to("tpu"), a.to("tpu"), b.to("tpu"), beta=0.5, alpha=2.0,
                                  use_gelu=use_gelu)
    torch.testing.assert_close(got.cpu(), want)
    out = torch.empty(0, device="tpu")
    torch._addmm_activation(s.to("tpu"), a.to("tpu"), b.to("tpu"), use_gelu=use_gelu, out=out)
    torch.testing.assert_close(out.cpu(), torch._addmm_activation(s, a, b, use_gelu=use_gelu))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_weight_int8pack_mm(dtype, highest_matmul_precision):
    a = torch.rand(4, 64, dtype=dtype)
    b = torch.randint(-128, 127, (24, 64), dtype=torch.int8)
    scales = torch.rand(24, dtype=dtype)
    want = torch._weight_int8pack_mm(a, b, scales)
    got = torch._weight_int8pack_mm(a.to("tpu"), b.to("tpu"), scales.to("tpu")).cpu()
    assert got.dtype == dtype
    torch.testing.assert_close(got, want, rtol=1e-2 if dtype != torch.float32 else 1e-5, atol=1e-2)
    with pytest.raises(RuntimeError, match="expect B to be int8 tensor"):
        torch._weight_int8pack_mm(a.to("tpu"), b.float().to("tpu"), scales.to("tpu"))


@pytest.mark.parametrize("inner_k_tiles", [2, 8])
@pytest.mark.parametrize("q_group", [32, 128])
def test_weight_int4pack_mm_against_the_dequantized_weight(inner_k_tiles, q_group, highest_matmul_precision):
    # torchao / gpt-fast weight-only int4: uint8 [N, K/2] (even k in the high
    # nibble) packed to CUDA's int32 shape, then (q - 8) * scale + zero per group
    from torch.testing._internal.common_quantization import _group_quantize_tensor

    n, k = 48, 256
    w = torch.rand(k, n, dtype=torch.bfloat16)
    # on a device other than CPU the helper returns the uint8 form
    w_u8, sz = _group_quantize_tensor(w.to("tpu"), n_bit=4, q_group_size=q_group)
    assert w_u8.dtype == torch.uint8 and w_u8.shape == (n, k // 2)
    packed = torch._convert_weight_to_int4pack(w_u8, inner_k_tiles)
    w_u8, sz = w_u8.cpu(), sz.cpu()
    assert packed.dtype == torch.int32
    assert packed.shape == (n // 8, k // (inner_k_tiles * 16), 32, inner_k_tiles // 2)
    q = torch.stack([w_u8 >> 4, w_u8 & 15], -1).reshape(n, k).float()
    s = sz.float().repeat_interleave(q_group, 0)
    w_deq = ((q.t() - 8) * s[..., 0] + s[..., 1])  # [k, n]
    a = torch.rand(5, k, dtype=torch.bfloat16)
    got = torch._weight_int4pack_mm(a.to("tpu"), packed, q_group, sz.to("tpu")).cpu()
    assert got.dtype == torch.bfloat16 and got.shape == (5, n)
    torch.testing.assert_close(got, (a.float() @ w_deq).bfloat16(), rtol=1e-2, atol=1e-2)
    assert ((got.float() - a.float() @ w.float()).abs() / (a.float() @ w.float())).mean() < 0.05
    with pytest.raises(RuntimeError, match="innerKTiles need to be 2, 4, or 8"):
        torch._convert_weight_to_int4pack(w_u8.to("tpu"), 3)
    with pytest.raises(RuntimeError, match="qGroupSize need to be 32, 64, 128 or 256"):
        torch._weight_int4pack_mm(a.to("tpu"), packed, 48, sz.to("tpu"))


def test_addr_and_cholesky_argument_checks_as_cpu():
    m = torch.ones(2, 2, dtype=torch.int16, device="tpu")
    v = torch.ones(2, dtype=torch.int16, device="tpu")
    with pytest.raises(RuntimeError, match="argument beta must not be a floating point number"):
        torch.addr(m, v, v, beta=2.5)
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results"):
        torch.addr(m.half(), v.half(), v.half(), alpha=True)
    assert torch.addr(m, v, v, beta=2, alpha=3).cpu().tolist() == [[5, 5], [5, 5]]
    a = torch.eye(3, device="tpu")
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got int instead"):
        torch.linalg.cholesky(a, out=torch.empty(0, dtype=torch.int, device="tpu"))
    with pytest.raises(RuntimeError, match="safely castable from Float dtype, but got result with dtype Int"):
        torch.cholesky_inverse(a, out=torch.empty(0, dtype=torch.int, device="tpu"))


@pytest.mark.parametrize("perm", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_bf16_bmm_into_permuted_out(perm):
    a = torch.randn(4, 23, 15, dtype=torch.bfloat16)
    b = torch.randn(4, 15, 12, dtype=torch.bfloat16).transpose(1, 2).contiguous().transpose(1, 2)
    inv = tuple(perm.index(i) for i in range(3))
    out = torch.full((4, 23, 12), float("nan"), dtype=torch.bfloat16, device="tpu")
    out = out.permute(perm).contiguous().permute(inv)
    torch.bmm(a.to("tpu"), b.to("tpu"), out=out)
    assert_close(out.cpu().float(), torch.bmm(a.float(), b.float()), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("call", [
    lambda a, o: torch.linalg.inv_ex(a, out=(o, torch.empty(0, dtype=torch.int, device="tpu"))),
    lambda a, o: torch.linalg.eigh(a, out=(o, torch.empty(0, device="tpu"))),
    lambda a, o: torch.linalg.qr(a, out=(o, torch.empty(0, device="tpu"))),
    lambda a, o: torch.linalg.det(a, out=o),
], ids=["inv_ex", "eigh", "qr", "det"])
def test_structured_linalg_out_dtype_checks(call):
    # PyTorch's structured kernels want the exact dtype in out=
    a = torch.eye(3, device="tpu")
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got int instead"):
        call(a, torch.empty(0, dtype=torch.int, device="tpu"))
