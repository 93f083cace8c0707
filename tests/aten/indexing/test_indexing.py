"""Indexing ops on tpu against CPU: index_select, gather, scatter and its
reductions, index_add/copy/fill, advanced indexing (index, index_put_),
masked_select/masked_scatter and embedding's backward."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

TPU = torch.device("tpu")


def dev(x, device):
    return x.to(device) if isinstance(x, torch.Tensor) else x


def compare(fn, *args, rtol=None, atol=None):
    """fn(device, *args) on CPU and on tpu: equal values, dtypes, shapes."""
    expected = fn(torch.device("cpu"), *args)
    actual = fn(TPU, *[dev(a, TPU) for a in args])
    if isinstance(expected, torch.Tensor):
        expected, actual = (expected,), (actual,)
    for e, a in zip(expected, actual):
        assert a.device.type == "tpu"
        assert_close(a.cpu(), e, rtol=rtol, atol=atol, equal_nan=True)


def compare_grad(fn, *inputs, rtol=None, atol=None):
    """fn(device, *inputs): forward and every input's gradient."""
    cpu = [x.clone().requires_grad_() for x in inputs]
    tpu = [x.to(TPU).requires_grad_() for x in inputs]
    out_c, out_t = fn(torch.device("cpu"), *cpu), fn(TPU, *tpu)
    assert_close(out_t.detach().cpu(), out_c.detach(), rtol=rtol, atol=atol)
    g = torch.randn_like(out_c)
    out_c.backward(g)
    out_t.backward(g.to(TPU))
    for c, t in zip(cpu, tpu):
        assert_close(t.grad.cpu(), c.grad, rtol=rtol, atol=atol)


def idx(values, device):
    return torch.tensor(values, device=device)


# ------------------------------------------------------- index_select --

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim):
    x = torch.randn(4, 5, 6)
    i = torch.randint(0, x.size(dim), (7,))
    compare_grad(lambda d, t: t.index_select(dim, i.to(d)), x)
    compare(lambda d, t: t.index_select(dim, i.to(d).int()), torch.randint(-9, 9, (4, 5, 6)))


def test_index_select_out_scalar_and_errors():
    x = torch.randn(5, 3)
    out = torch.empty(0, device=TPU)
    torch.index_select(x.to(TPU), 0, idx([4, 0], TPU), out=out)
    assert_close(out.cpu(), x[[4, 0]])
    compare(lambda d, t: t.index_select(0, idx([0], d)), torch.tensor(2.5))
    with pytest.raises(IndexError, match="index out of range in self"):
        x.to(TPU).index_select(0, torch.tensor([7]))  # a CPU index is checked on the host
    with pytest.raises(IndexError, match="Index is supposed to be a vector"):
        x.to(TPU).index_select(0, idx([[0]], TPU))


def test_embedding_forward_backward():
    w = torch.randn(10, 4)
    i = torch.randint(0, 10, (3, 5))
    compare_grad(lambda d, t: F.embedding(i.to(d), t), w)
    compare_grad(lambda d, t: F.embedding(i.to(d), t, padding_idx=int(i[0, 0])), w)
    compare_grad(lambda d, t: F.embedding(i.to(d), t, scale_grad_by_freq=True), w)


def test_embedding_dense_backward_bf16():
    g = torch.randn(6, 4).bfloat16()
    i = torch.tensor([1, 3, 1, 0, 9, 1])
    compare(lambda d, gg, ii: torch.ops.aten.embedding_dense_backward(gg, ii, 10, -1, False),
            g, i, atol=1e-2, rtol=1e-2)


# ------------------------------------------------------------- gather --

@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather(dim):
    x = torch.randn(4, 5, 6)
    shape = [3, 4, 5]
    shape[dim] = 7
    i = torch.randint(0, x.size(dim), shape)
    compare_grad(lambda d, t: t.gather(dim, i.to(d)), x)
    compare(lambda d, t: torch.gather(t, dim, i.to(d)), torch.randint(0, 9, (4, 5, 6)))


def test_gather_out_and_errors():
    x = torch.randn(3, 4)
    i = torch.tensor([[0, 3], [2, 1]])
    out = torch.empty(0, device=TPU)
    torch.gather(x.to(TPU), 1, i.to(TPU), out=out)
    assert_close(out.cpu(), x.gather(1, i))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.to(TPU).gather(1, idx([0, 1], TPU))
    with pytest.raises(RuntimeError, match="int32/int64"):
        x.to(TPU).gather(1, i.float().to(TPU))


# ------------------------------------------------------------ scatter --

@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_src_value_and_inplace(dim):
    x = torch.randn(5, 6)
    i = torch.stack([torch.randperm(x.size(dim))[:3] for _ in range(4)], 1 - dim)
    src = torch.randn(6, 7)
    compare(lambda d, t, s: t.scatter(dim, i.to(d), s), x, src)
    compare(lambda d, t: t.scatter(dim, i.to(d), 2.5), x)
    compare(lambda d, t, s: t.clone().scatter_(dim, i.to(d), s), x, src)
    # autograd needs src shaped like index
    compare_grad(lambda d, t, s: t.scatter(dim, i.to(d), s), x, torch.randn(i.shape))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    x = torch.randn(4, 5)
    i = torch.randint(0, 4, (6, 5))  # duplicates on purpose
    src = torch.randn(6, 5)
    compare(lambda d, t, s: t.scatter_reduce(0, i.to(d), s, reduce, include_self=include_self),
            x, src, atol=1e-5, rtol=1e-5)
    xi, si = torch.randint(-9, 9, (4, 5)), torch.randint(-9, 9, (6, 5))
    compare(lambda d, t, s: t.scatter_reduce(0, i.to(d), s, reduce, include_self=include_self),
            xi, si)


def test_scatter_reduce_grad_sum_and_out():
    x, src = torch.randn(4, 5), torch.randn(6, 5)
    i = torch.randint(0, 4, (6, 5))
    compare_grad(lambda d, t, s: t.scatter_reduce(0, i.to(d), s, "sum"), x, src)
    out = torch.empty(0, device=TPU)
    torch.scatter_reduce(x.to(TPU), 0, i.to(TPU), src.to(TPU), "amax", out=out)
    assert_close(out.cpu(), x.scatter_reduce(0, i, src, "amax"))


def test_scatter_add_and_legacy_reduce():
    x, src = torch.randn(4, 5), torch.randn(6, 5)
    i = torch.randint(0, 4, (6, 5))
    compare_grad(lambda d, t, s: t.scatter_add(0, i.to(d), s), x, src)
    compare(lambda d, t, s: t.clone().scatter_add_(0, i.to(d), s), x, src)
    with pytest.warns(UserWarning):
        compare(lambda d, t, s: t.scatter(0, i.to(d), s, reduce="multiply"), x, src)
    compare(lambda d, t: t.scatter(0, i.to(d), 2.0, reduce="add"), x)


def test_scatter_errors():
    x = torch.randn(4, 5, device=TPU)
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        x.scatter(0, idx([[0]], TPU), torch.ones(1, 1, dtype=torch.float64, device=TPU))
    with pytest.raises(RuntimeError):
        x.scatter_reduce(0, idx([[0]], TPU), x, "max")


# ----------------------------------------------- index_add/copy/fill --

@pytest.mark.parametrize("dim", [0, 1])
def test_index_add(dim):
    x = torch.randn(4, 5)
    i = torch.randint(0, x.size(dim), (3,))
    shape = [4, 5]
    shape[dim] = 3
    src = torch.randn(shape)
    compare_grad(lambda d, t, s: t.index_add(dim, i.to(d), s, alpha=1.5), x, src, atol=1e-5,
                 rtol=1e-5)
    compare(lambda d, t, s: t.clone().index_add_(dim, i.to(d), s), x, src, atol=1e-5, rtol=1e-5)
    compare(lambda d, t: t.index_add(dim, i.to(d), torch.ones(shape, dtype=torch.long,
                                                               device=d)),
            torch.randint(0, 9, (4, 5)))


def test_index_copy_and_fill():
    x = torch.randn(4, 5)
    i = torch.tensor([3, 0])
    src = torch.randn(4, 2)
    compare_grad(lambda d, t, s: t.index_copy(1, i.to(d), s), x, src)
    compare(lambda d, t, s: t.clone().index_copy_(1, i.to(d), s), x, src)
    compare_grad(lambda d, t: t.index_fill(1, i.to(d), -2.0), x)
    compare(lambda d, t: t.clone().index_fill_(0, i.to(d), torch.tensor(7.0)), x)


def test_index_add_errors():
    x = torch.randn(4, 5, device=TPU)
    with pytest.raises(RuntimeError, match="Number of indices"):
        x.index_add(0, idx([0, 1], TPU), torch.ones(3, 5, device=TPU))
    with pytest.raises(RuntimeError, match="same scalar type"):
        x.index_add(0, idx([0], TPU), torch.ones(1, 5, dtype=torch.float64, device=TPU))


# ------------------------------------------------- advanced indexing --

@pytest.mark.parametrize("case", range(7))
def test_index_tensor(case):
    x = torch.randn(4, 5, 6)
    fns = [
        lambda d, t: t[idx([0, 3, -1], d)],
        lambda d, t: t[:, idx([[0, 2], [4, -5]], d)],
        lambda d, t: t[idx([0, 2], d), :, idx([1, 5], d)],        # apart: batch dims first
        lambda d, t: t[:, idx([0, 2], d), idx([[1], [5]], d)],    # adjacent, broadcast
        lambda d, t: t[..., idx([3, 3, 0], d)],
        lambda d, t: t[None, idx([1], d), 1:3],
        lambda d, t: t[:, torch.tensor([1, 0]), torch.tensor([2, 2])],  # CPU indices
    ]
    compare_grad(fns[case], x)


def test_index_bool_masks():
    x = torch.randn(4, 5, 6)
    compare_grad(lambda d, t: t[t.detach() > 0], x)
    m = torch.rand(5) > 0.5
    compare_grad(lambda d, t: t[:, m.to(d)], x)
    compare(lambda d, t: t[idx([1, 3], d), (torch.arange(5) < 2).to(d)], x)
    m2 = torch.rand(4, 5) > 0.3
    compare(lambda d, t: t[m2.to(d)], torch.randint(0, 9, (4, 5, 6)))


def test_index_errors():
    x = torch.randn(4, 5, device=TPU)
    with pytest.raises(IndexError, match="too many indices"):
        x[idx([0], TPU), idx([0], TPU), idx([0], TPU)]
    with pytest.raises(IndexError, match="out of bounds"):
        x[torch.tensor([9])]  # CPU indices are checked on the host
    with pytest.raises(IndexError, match="shape of the mask"):
        x[torch.ones(3, dtype=torch.bool, device=TPU)]


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(accumulate):
    x = torch.randn(4, 5, 6)
    i0, i2 = torch.tensor([0, 2, 3]), torch.tensor([1, 5, 1])
    v = torch.randn(3, 5)

    def put(d, t, vals):
        y = t * 1
        return y.index_put_((i0.to(d), slice(None) if False else i0.to(d) * 0 + 1, i2.to(d)),
                            vals[:, 0], accumulate=accumulate)

    def put_rows(d, t, vals):
        y = t * 1
        return torch.index_put(y, (i0.to(d),), vals[:, :, None].expand(3, 5, 6),
                               accumulate=accumulate)

    compare_grad(put, x, v)
    compare_grad(put_rows, x, v)


def test_index_put_setitem_forms():
    x = torch.randn(4, 5, 6)

    def set1(d, t):
        y = t.clone()
        y[:, idx([0, 3], d)] = 0.5
        y[idx([1, 2], d), :, idx([0, 5], d)] += torch.ones(2, 5, device=d)
        return y

    def set_mask(d, t):
        y = t.clone()
        y[y > 0.5] = -1.0            # one mask, one value: no host sync
        y[y[:, :, 0] < 0] = 2.0      # a mask over the leading dims
        y[:, torch.rand(5) > 0.5] = torch.arange(6.0, device=d)  # needs the mask's count
        return y

    compare(set1, x)
    torch.manual_seed(0)
    a = set_mask(torch.device("cpu"), x)
    torch.manual_seed(0)
    b = set_mask(TPU, x.to(TPU))
    assert_close(b.cpu(), a)
    compare(lambda d, t: t.clone().index_put_((t > 0,), torch.tensor(1.0, device=d),
                                              accumulate=True), x)


def test_index_put_int_and_errors():
    compare(lambda d, t: t.index_put((idx([0, 0, 1], d),), idx([5, 6, 7], d), accumulate=True),
            torch.zeros(3, dtype=torch.long))
    x = torch.randn(4, 5, device=TPU)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[idx([0, 1], TPU)] = torch.ones(3, 5, device=TPU)


# -------------------------------------------- masked_select / scatter --

def test_masked_select_and_scatter():
    x = torch.randn(4, 5)
    m = torch.rand(4, 5) > 0.5
    compare_grad(lambda d, t: t.masked_select(m.to(d)), x)
    compare_grad(lambda d, t: t.masked_select(m[0].to(d)), x)  # broadcast mask
    src = torch.randn(20)
    compare_grad(lambda d, t, s: t.masked_scatter(m.to(d), s), x, src)
    out = torch.empty(0, device=TPU)
    torch.masked_select(x.to(TPU), m.to(TPU), out=out)
    assert_close(out.cpu(), x.masked_select(m))


FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float8_storage_and_data_movement(dtype):
    # float8 tensors move, index, concatenate and convert as on CPU (bit
    # for bit: compared as bytes, so NaN patterns count too).
    x = (torch.randn(6, 4) * 4).to(dtype)
    i = torch.tensor([5, 0, 3, 3])
    t = x.to(TPU)
    assert t.dtype == dtype and torch.equal(t.cpu().view(torch.uint8), x.view(torch.uint8))
    for got, ref in ((t.index_select(0, i.to(TPU)), x.index_select(0, i)),
                     (torch.cat([t, t[1:3]]), torch.cat([x, x[1:3]])),
                     (t.t().contiguous(), x.t().contiguous()),
                     (t[i.to(TPU)], x[i])):
        assert torch.equal(got.cpu().view(torch.uint8), ref.view(torch.uint8))
    # Values just above a tie of the float8 grid (5.2507 lies above 5.25, the
    # midpoint of 5.0 and 5.5) round up; a conversion through float16 would
    # round twice and give 5.0.
    f = torch.cat([torch.randn(15) * 8, torch.tensor([5.2507, -5.2507, 10.51, 0.3, 1e-3])])
    assert torch.equal(f.to(TPU).to(dtype).cpu().view(torch.uint8), f.to(dtype).view(torch.uint8))
    assert torch.equal(t.float().cpu(), x.float())


def test_index_error_parity():
    # The exceptions and messages CPU gives.
    with pytest.raises(IndexError, match="at least one index must be provided"):
        torch.ops.aten.index.Tensor(torch.ones(1, device=TPU), [])
    with pytest.raises(IndexError, match="for dimension with size 0"):
        torch.empty(10, 0, device=TPU)[:, [0, 1]]
    with pytest.raises(IndexError, match=r"shape mismatch: indexing tensors could not be "
                                         r"broadcast together with shapes \[2\], \[3\]"):
        torch.zeros(5, 5, device=TPU)[[0, 1], [0, 1, 2]]
    a = torch.arange(4, device=TPU)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        a[a > -1] = torch.tensor([1.0, 2.0, 3.0], device=TPU)
    with pytest.raises(RuntimeError, match="complex Scalar to non-complex"):
        torch.ones(2, 2, device=TPU).index_fill_(1, torch.tensor([0], device=TPU), 1 + 1j)
    with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
        torch.ones(3, device=TPU)[torch.tensor([1, 0, 1], dtype=torch.uint8, device=TPU)]


def test_out_on_another_device_and_dtype_is_refused():
    t = torch.tensor([[1.0, 0.0], [0.0, 2.0]], device=TPU)
    with pytest.raises(RuntimeError, match="on the same device"):
        torch.nonzero(t, out=torch.empty(0, dtype=torch.long))
    with pytest.raises(RuntimeError, match="scalar type Long"):
        torch.nonzero(t, out=torch.empty(0, device=TPU))
    with pytest.raises(RuntimeError, match="Expected out tensor to have device"):
        torch.add(t, t, out=torch.empty(2, 2))
    with pytest.raises(RuntimeError, match="dtype long int, but got float"):
        torch.argmax(t, 1, out=torch.empty(2, device=TPU))
    with pytest.raises(RuntimeError, match="Found dtype Float but expected Long"):
        torch.neg(torch.ones(2, dtype=torch.long, device=TPU), out=torch.empty(2, device=TPU))
    with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
        torch.add(torch.ones(2, dtype=torch.int32, device=TPU), 1, alpha=1.1)
    with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
        i = torch.ones(2, dtype=torch.int32, device=TPU)
        torch.addcdiv(i, i, i)
    with pytest.raises(ValueError, match="step is 0 but must be > 0"):
        torch.ops.aten.unfold_backward(torch.randn(2, 3, device=TPU), [6], 0, 3, 0)


def test_index_fill_takes_a_host_index_as_cpu():
    x = torch.randn(4, 6)
    idx = torch.tensor([0, 5, 2])
    for dim, v in ((1, -2.5), (0, 7.0)):
        i = idx[idx < x.shape[dim]]
        t = x.to(TPU).index_fill_(dim, i, v)
        assert_close(t.cpu(), x.clone().index_fill_(dim, i, v))
    with pytest.raises(IndexError):
        x.to(TPU).index_fill_(1, torch.tensor([6]), 0.0)
        torch.tpu.synchronize()


def test_writes_into_expanded_tensors_warn_as_cpu():
    for dev in ("cpu", "tpu"):
        x = torch.rand((1,), device=dev).expand((6,))
        mask = torch.tensor([True, False, True, True, False, False], device=dev)
        ind = torch.tensor([2, 1, 0], device=dev)
        with pytest.warns(UserWarning, match="masked_fill_ on expanded tensors"):
            x.masked_fill_(mask, 0.0)
        with pytest.warns(UserWarning, match="index_fill_ on expanded tensors"):
            x.index_fill_(0, ind, 1.0)
        with pytest.warns(UserWarning, match="index_put_ on expanded tensors"):
            x.index_put_((ind,), torch.rand(3, device=dev))
        assert x[0].item() == x[5].item()
        y = torch.rand(6, device=dev)
        with pytest.raises(RuntimeError, match="unsupported operation"):
            y.index_put_((ind,), y[:3])
        with pytest.raises(RuntimeError, match="unsupported operation"):
            mask[1:].masked_fill_(mask[:-1], False)


def test_masked_scatter_refuses_a_short_source():
    dest = torch.arange(10.0, device="tpu")
    mask = torch.tensor([0, 0, 0, 0, 1, 0, 1, 0, 1, 0], dtype=torch.bool, device="tpu")
    # the count of true mask elements is on the device: checked there and
    # raised at the next host read, as an out-of-range index is (at the op
    # in Debug Eager)
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones"):
        dest.masked_scatter_(mask, torch.zeros(2, device="tpu"))
        dest.cpu()
    d2 = torch.arange(10.0, device="tpu").masked_scatter_(mask, torch.tensor([7.0, 8.0, 9.0], device="tpu"))
    assert d2.cpu().tolist() == [0, 1, 2, 3, 7, 5, 8, 7, 9, 9]


def test_host_tensor_indexed_with_tpu_indices_gives_cpus_error():
    x = torch.randn(3, 4, 4)
    with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same device as the indexed tensor \(cpu\)"):
        x[torch.tensor([0, 2]).to("tpu")]
