"""Copies between host and tpu, within tpu, scalars, and factory functions."""

import re

import pytest
import torch
from torch.testing import assert_close

TPU = torch.device("tpu")

ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
              torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]


def make(shape, dtype):
    """Random CPU tensor of `dtype` covering its range (negatives, fractions)."""
    if dtype == torch.bool:
        return torch.rand(shape) < 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape) * 100).to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -(1 << 40)), min(info.max, 1 << 40)
    return torch.randint(lo, hi, shape, dtype=torch.int64).to(dtype)


def _sources(dtype):
    base = make((6, 10), dtype)
    return {
        "contiguous": base,
        "transposed": base.t(),
        "sliced_step": base[1::2, ::3],
        "offset_slice": base[2:5, 4:9],
        "expanded": make((1, 7), dtype).expand(5, 7),
        "expanded_0d": make((), dtype).expand(3, 4),
        "scalar_0d": make((), dtype),
    }


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced_step", "expanded"])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_round_trip(dtype, layout):
    _check_round_trip(dtype, layout)


@pytest.mark.parametrize("layout", ["offset_slice", "expanded_0d", "scalar_0d"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool],
                         ids=str)
def test_round_trip_more_layouts(dtype, layout):
    _check_round_trip(dtype, layout)


def _check_round_trip(dtype, layout):
    src = _sources(dtype)[layout]
    t = src.to(TPU)
    assert t.device.type == "tpu"
    assert t.dtype == dtype
    assert t.shape == src.shape
    back = t.cpu()
    assert back.dtype == dtype
    assert torch.equal(back, src)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_round_trip_noncontiguous_destination(dtype):
    src = make((5, 4), dtype)
    t = src.to(TPU)
    dst = torch.zeros(4, 5, dtype=dtype).t()  # non-contiguous CPU destination
    dst.copy_(t)
    assert torch.equal(dst, src)


def test_copy_into_tpu_slice():
    base_cpu = torch.randn(5, 4)
    base = base_cpu.to(TPU)
    val = torch.randn(2, 4)
    base[1:3] = val
    base_cpu[1:3] = val
    assert torch.equal(base.cpu(), base_cpu)


def test_copy_into_tpu_transposed_view():
    base_cpu = torch.randn(3, 6)
    base = base_cpu.to(TPU)
    val = torch.randn(6, 3)
    base.t().copy_(val)
    base_cpu.t().copy_(val)
    assert torch.equal(base.cpu(), base_cpu)


def test_copy_into_tpu_strided_view_with_broadcast():
    base_cpu = torch.randn(6, 8)
    base = base_cpu.to(TPU)
    val = torch.randn(4)
    base[::2, 1::2] = val
    base_cpu[::2, 1::2] = val
    assert torch.equal(base.cpu(), base_cpu)


def test_copy_into_tpu_view_dtype_conversion():
    base_cpu = torch.zeros(4, 4, dtype=torch.float16)
    base = base_cpu.to(TPU)
    val = torch.randn(2, 4, dtype=torch.float64)
    base[2:] = val
    base_cpu[2:] = val
    assert torch.equal(base.cpu(), base_cpu)


def test_copy_from_tpu_view_to_cpu():
    src_cpu = torch.randn(6, 7)
    src = src_cpu.to(TPU)
    for v, v_cpu in [(src[2:4], src_cpu[2:4]), (src.t()[1::2], src_cpu.t()[1::2]),
                     (src[:, 3], src_cpu[:, 3]), (src[4, 5], src_cpu[4, 5])]:
        assert torch.equal(v.cpu(), v_cpu)


def test_copy_setitem_scalar_and_tpu_value():
    x_cpu = torch.randn(4, 5)
    x = x_cpu.to(TPU)
    v = torch.randn(5)
    x[0] = 3.5
    x_cpu[0] = 3.5
    x[2] = v.to(TPU)
    x_cpu[2] = v
    x[:, 4] = torch.tensor(-1.0)  # 0-d CPU value
    x_cpu[:, 4] = torch.tensor(-1.0)
    assert torch.equal(x.cpu(), x_cpu)


@pytest.mark.parametrize("src_dtype,dst_dtype", [
    (torch.float32, torch.float16),
    (torch.float32, torch.bfloat16),
    (torch.float32, torch.int32),
    (torch.float64, torch.float32),
    (torch.int64, torch.float32),
    (torch.int32, torch.int8),
    (torch.float32, torch.bool),
    (torch.bool, torch.float32),
    (torch.uint8, torch.int64),
    (torch.float16, torch.float64),
], ids=str)
def test_tpu_to_tpu_dtype_conversion(src_dtype, dst_dtype):
    src_cpu = make((4, 9), src_dtype)
    if src_dtype.is_floating_point and not dst_dtype.is_floating_point and dst_dtype != torch.bool:
        src_cpu = src_cpu.clamp(-100, 100)  # out-of-range float->int casts are UB on CPU
    src = src_cpu.to(TPU)
    out = src.to(dst_dtype)
    assert out.device.type == "tpu" and out.dtype == dst_dtype
    assert torch.equal(out.cpu(), src_cpu.to(dst_dtype))
    if (src_dtype, dst_dtype) in [(torch.float32, torch.float16), (torch.int64, torch.float32),
                                  (torch.float32, torch.bool)]:
        # Through a non-contiguous view as well.
        out_t = src.t().to(dst_dtype)
        assert torch.equal(out_t.cpu(), src_cpu.t().to(dst_dtype))


def test_tpu_to_tpu_copy_into_existing():
    a_cpu = torch.randn(3, 4)
    dst = torch.zeros(3, 4, dtype=torch.float64, device=TPU)
    dst.copy_(a_cpu.to(TPU))
    assert torch.equal(dst.cpu(), a_cpu.double())
    dst2 = torch.zeros(4, 3, device=TPU)
    dst2.t().copy_(a_cpu.to(TPU))
    assert torch.equal(dst2.cpu(), a_cpu.t().contiguous())


def test_to_non_blocking():
    src = torch.randn(16, 16)
    t = src.to("tpu", non_blocking=True)
    assert torch.equal(t.cpu(), src)
    back = t.to("cpu", non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(back, src)


def test_copy_zero_elements():
    src = torch.empty(0, 3)
    t = src.to(TPU)
    assert t.shape == (0, 3) and t.device.type == "tpu"
    back = t.cpu()
    assert back.shape == (0, 3)
    dst = torch.empty(0, 3, device=TPU)
    dst.copy_(src)
    dst.copy_(t)
    e = torch.empty(2, 0, dtype=torch.int64, device=TPU)
    assert e.cpu().shape == (2, 0)
    assert e.sum().item() == 0


@pytest.mark.parametrize("dtype,py_type", [
    (torch.float32, float), (torch.float64, float), (torch.float16, float),
    (torch.bfloat16, float), (torch.int8, int), (torch.int16, int), (torch.int32, int),
    (torch.int64, int), (torch.uint8, int), (torch.bool, bool),
], ids=str)
def test_item(dtype, py_type):
    src = make((3,), dtype)
    t = src.to(TPU)
    for i in range(3):
        v = t[i].item()
        assert type(v) is py_type
        assert v == src[i].item()
    one = src[1:2].to(TPU)  # 1-element, 1-d
    assert one.item() == src[1].item()


def test_item_large_int64():
    v = (1 << 62) + 12345
    assert torch.tensor([v], device=TPU).item() == v
    assert torch.tensor(-v, device=TPU).item() == -v


def test_item_multi_element_raises():
    with pytest.raises(RuntimeError):
        torch.ones(2, device=TPU).item()


def test_tolist():
    src = torch.randn(3, 4)
    assert torch.tensor(src.tolist()).equal(src)
    assert src.to(TPU).tolist() == src.tolist()
    ints = torch.randint(-50, 50, (2, 3, 2))
    assert ints.to(TPU).tolist() == ints.tolist()
    assert ints.to(TPU).transpose(0, 2).tolist() == ints.transpose(0, 2).tolist()
    b = torch.rand(5) < 0.5
    assert b.to(TPU).tolist() == b.tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_repr_matches_cpu(dtype):
    # print(tensor) must work: repr is CPU's with the device added.
    x = make((3, 4), dtype)
    if dtype.is_floating_point:
        x[0, 0] = 0.0
    r = repr(x.to(TPU))
    assert "device='tpu:0'" in r
    assert _drop_device(r) == _drop_device(repr(x))


def _drop_device(text):
    """The repr without the device, with line breaks (which depend on its length) removed."""
    return re.sub(r"\s+", " ", re.sub(r",\s*device='tpu:0'", "", text))


def test_clone():
    src = torch.randn(4, 6)
    t = src.to(TPU)
    c = t.clone()
    assert c.device.type == "tpu"
    assert torch.equal(c.cpu(), src)
    c.add_(1)
    assert torch.equal(t.cpu(), src)  # the clone does not alias
    assert torch.equal(c.cpu(), src + 1)
    ct = t.t().clone()
    assert torch.equal(ct.cpu(), src.t())
    assert ct.stride() == src.t().clone().stride()  # preserve_format keeps the layout
    cc = t.t().clone(memory_format=torch.contiguous_format)
    assert cc.is_contiguous()
    assert torch.equal(cc.cpu(), src.t())


def test_contiguous_of_view():
    src = torch.randn(5, 7)
    t = src.to(TPU)[1:, ::2].t()
    c = t.contiguous()
    assert c.is_contiguous()
    assert torch.equal(c.cpu(), src[1:, ::2].t())


# -------------------------------------------------------------- factories --

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_empty(dtype):
    e = torch.empty(3, 5, dtype=dtype, device=TPU)
    assert e.shape == (3, 5) and e.dtype == dtype and e.device.type == "tpu"
    assert e.is_contiguous()
    e.fill_(1)
    assert torch.equal(e.cpu(), torch.ones(3, 5, dtype=dtype))
    s = torch.empty_strided((2, 3), (1, 2), dtype=dtype, device=TPU)
    assert s.stride() == (1, 2)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_zeros_ones(dtype):
    z = torch.zeros(2, 3, 4, dtype=dtype, device=TPU)
    o = torch.ones(2, 3, 4, dtype=dtype, device=TPU)
    assert z.dtype == dtype and o.dtype == dtype
    assert z.device.type == "tpu" and o.device.type == "tpu"
    assert z.shape == o.shape == (2, 3, 4)
    assert torch.equal(z.cpu(), torch.zeros(2, 3, 4, dtype=dtype))
    assert torch.equal(o.cpu(), torch.ones(2, 3, 4, dtype=dtype))
    like = torch.ones_like(z)
    assert like.device.type == "tpu" and like.dtype == dtype
    assert torch.equal(like.cpu(), torch.ones(2, 3, 4, dtype=dtype))
    assert torch.equal(torch.zeros_like(o).cpu(), torch.zeros(2, 3, 4, dtype=dtype))


def test_default_dtype_factories():
    assert torch.zeros(2, device=TPU).dtype == torch.float32
    assert torch.ones(2, device=TPU).dtype == torch.float32
    assert torch.empty(2, device=TPU).dtype == torch.float32
    assert torch.tensor([1, 2], device=TPU).dtype == torch.int64
    assert torch.tensor([1.0], device=TPU).dtype == torch.float32


@pytest.mark.parametrize("fill,dtype", [
    (3.25, None), (-2.5, torch.float64), (7, None), (-7, torch.int32), (200, torch.uint8),
    (1.5, torch.bfloat16), (True, None), (0.1, torch.float16), ((1 << 40) + 1, torch.int64),
], ids=str)
def test_full(fill, dtype):
    t = torch.full((3, 4), fill, dtype=dtype, device=TPU)
    ref = torch.full((3, 4), fill, dtype=dtype)
    assert t.dtype == ref.dtype
    assert t.device.type == "tpu"
    assert torch.equal(t.cpu(), ref)
    assert torch.equal(torch.full_like(t, fill).cpu(), torch.full_like(ref, fill))


@pytest.mark.parametrize("args,kwargs", [
    ((10,), {}),
    ((3, 17), {}),
    ((2, 20, 3), {}),
    ((20, 2, -3), {}),
    ((5, -5, -1), {}),
    ((0, 0), {}),
    ((0.0, 1.0, 0.1), {}),
    ((-1.5, 2.5, 0.5), {}),
    ((2.5, -1.0, -0.25), {}),
    ((1, 7), {"dtype": torch.float32}),
    ((0, 10, 3), {"dtype": torch.int32}),
    ((0.0, 5.0, 0.5), {"dtype": torch.float64}),
    ((0, 12), {"dtype": torch.int8}),
], ids=str)
def test_arange(args, kwargs):
    t = torch.arange(*args, device=TPU, **kwargs)
    ref = torch.arange(*args, **kwargs)
    assert t.device.type == "tpu"
    assert t.dtype == ref.dtype
    assert t.shape == ref.shape
    if ref.dtype.is_floating_point:
        assert_close(t.cpu(), ref, rtol=0, atol=1e-6)
    else:
        assert torch.equal(t.cpu(), ref)


def test_arange_inconsistent_step_raises_like_cpu():
    with pytest.raises(RuntimeError, match="step sign"):
        torch.arange(5, 2)
    with pytest.raises(RuntimeError, match="step sign"):
        torch.arange(5, 2, device=TPU)


def test_arange_large_int64():
    start = (1 << 40)
    t = torch.arange(start, start + 10, device=TPU)
    assert torch.equal(t.cpu(), torch.arange(start, start + 10))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16],
                         ids=str)
def test_rand_randn_factories(dtype):
    r = torch.rand(1000, dtype=dtype, device=TPU)
    n = torch.randn(1000, dtype=dtype, device=TPU)
    for t in (r, n):
        assert t.shape == (1000,) and t.dtype == dtype and t.device.type == "tpu"
        assert torch.isfinite(t.cpu().float()).all()
    rc = r.cpu().float()
    assert rc.min().item() >= 0 and rc.max().item() <= 1  # rounding may reach 1 in 16 bits
    assert rc.unique().numel() > 50
    nc = n.cpu().float()
    assert (nc < 0).any() and (nc > 0).any()
    assert nc.unique().numel() > 50
    r2 = torch.rand_like(r)
    assert r2.device.type == "tpu" and r2.dtype == dtype
    assert not torch.equal(r2.cpu(), r.cpu())
    v = r.view(10, 100)  # a 2-d shape through the same draws
    assert torch.equal(v.cpu(), r.cpu().view(10, 100))


def test_randn_rand_odd_sizes():
    for n in (1, 7):
        r = torch.rand(n, device=TPU).cpu()
        assert r.shape == (n,)
        assert (r >= 0).all() and (r < 1).all()
    z = torch.randn(7, device=TPU).cpu()
    assert torch.isfinite(z).all()
    assert z.unique().numel() == 7


def test_tensor_constructor_on_tpu():
    data = [[1.5, -2.0], [3.25, 4.0]]
    t = torch.tensor(data, device=TPU)
    assert torch.equal(t.cpu(), torch.tensor(data))
    t16 = torch.tensor(data, dtype=torch.float16, device=TPU)
    assert torch.equal(t16.cpu(), torch.tensor(data, dtype=torch.float16))


def test_storage_byte_slices_and_disjoint_addresses():
    # UntypedStorage[start:end] offsets the data pointer, as on CUDA: the
    # slice reads and writes the bytes of the storage it is cut from.
    v = torch.arange(15, dtype=torch.float32).reshape(3, 5).to("tpu")
    s = v.untyped_storage()
    host = v.cpu().untyped_storage()
    assert list(s[4:8]) == list(host[4:8])
    t = torch.empty(0, dtype=torch.float32, device="tpu").set_(s[8:60])
    assert torch.equal(t.cpu(), torch.arange(2, 15, dtype=torch.float32))
    torch.empty(0, dtype=torch.float32, device="tpu").set_(s[4:8]).fill_(7.0)
    assert v[0, 1].item() == 7.0
    with pytest.raises(NotImplementedError, match="byte slice"):
        torch.empty(0, dtype=torch.float32, device="tpu").set_(s[2:10]).cpu()
    # data pointers are device addresses: distinct storages never overlap
    a = torch.zeros(1000, device="tpu")
    b = torch.zeros(1000, device="tpu")
    ra = (a.data_ptr(), a.data_ptr() + a.untyped_storage().nbytes())
    rb = (b.data_ptr(), b.data_ptr() + b.untyped_storage().nbytes())
    assert ra[1] <= rb[0] or rb[1] <= ra[0]
    assert v[1].data_ptr() - v.data_ptr() == 5 * 4


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_copy_into_and_from_math_views(dtype):
    # Writing x into a negative (or conjugate) view stores -x (conj x).
    src = torch.randn(8, 8, dtype=dtype)
    for s in (src, src.to(TPU)):
        dst = torch.empty(8, 8, dtype=dtype, device=TPU)
        dst._neg_view().copy_(s.t())
        assert_close(dst.cpu(), -src.t())
        dst._neg_view().copy_(s._neg_view())
        assert_close(dst.cpu(), src)
        if dtype.is_complex:
            dst.conj().copy_(s)
            assert_close(dst.cpu(), src.conj_physical())
            dst.conj().copy_(s.conj())
            assert_close(dst.cpu(), src)


def test_lazy_clone_is_copy_on_write():
    t = torch.arange(6.0, device=TPU)
    c = t._lazy_clone()
    assert torch._C._is_cow_tensor(c) and torch._C._data_address(c) == torch._C._data_address(t)
    t += 1  # materializes t: the clone keeps the old values
    assert not torch._C._is_cow_tensor(t)
    assert torch.equal(c.cpu(), torch.arange(6.0))
    assert torch.equal(t.cpu(), torch.arange(6.0) + 1)
    c.mul_(2)
    assert torch.equal(c.cpu(), torch.arange(6.0) * 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool, torch.complex64])
def test_deterministic_fill_of_new_memory(dtype):
    prev = (torch.are_deterministic_algorithms_enabled(),
            torch.utils.deterministic.fill_uninitialized_memory)
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        e = torch.empty(3, 4, dtype=dtype, device=TPU).cpu()
        a = torch.zeros(2, dtype=dtype, device=TPU)
        a.resize_(5)
        r = a.cpu()
    finally:
        torch.use_deterministic_algorithms(prev[0])
        torch.utils.deterministic.fill_uninitialized_memory = prev[1]
    want = torch.empty(3, 4, dtype=dtype)
    if dtype.is_floating_point or dtype.is_complex:
        assert e.isnan().all() and r[2:].isnan().all()
    else:
        top = True if dtype == torch.bool else torch.iinfo(dtype).max
        assert (e == top).all() and (r[2:] == top).all()
    assert (r[:2] == 0).all()


def test_local_scalar_of_empty_tensor():
    with pytest.raises(RuntimeError, match="Empty tensor not supported"):
        torch.ops.aten._local_scalar_dense(torch.tensor([], device=TPU))
