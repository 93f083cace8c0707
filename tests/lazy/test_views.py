"""Views on tpu: metadata-only aliases that share storage, as on CPU."""

import pytest
import torch
from torch.testing import assert_close

TPU = torch.device("tpu")


def same_storage(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


# Views of a (4, 6) base. Each takes the base and returns an alias.
VIEWS = {
    "view": lambda x: x.view(6, 4),
    "view_flat": lambda x: x.view(-1),
    "view_3d": lambda x: x.view(2, 3, 4),
    "reshape": lambda x: x.reshape(3, 8),
    "transpose": lambda x: x.transpose(0, 1),
    "permute": lambda x: x.view(2, 2, 6).permute(2, 0, 1),
    "t": lambda x: x.t(),
    "slice_step": lambda x: x[::2, 1::3],
    "slice_offset": lambda x: x[1:3, 2:5],
    "select_row": lambda x: x[2],
    "select_col": lambda x: x.select(1, -2),
    "narrow": lambda x: x.narrow(1, 2, 3),
    "squeeze": lambda x: x[1:2].squeeze(0),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "diagonal": lambda x: x.diagonal(),
    "diagonal_offset": lambda x: x.diagonal(offset=1),
    "unfold": lambda x: x.unfold(1, 2, 2),
    "as_strided": lambda x: x.as_strided((3, 3), (6, 2), 1),
    "view_of_view": lambda x: x.t()[1::2].transpose(0, 1)[1:],
    "split": lambda x: x.split(2, dim=1)[1],
    "chunk": lambda x: x.chunk(2)[1],
    "unbind": lambda x: x.unbind(1)[3],
}

# Read-only views (they overlap, so writes are rejected).
READ_ONLY_VIEWS = {
    "expand": lambda x: x[:, :1].expand(4, 6),
    "expand_new_dim": lambda x: x[0].expand(3, 6),
    "unfold_overlapping": lambda x: x.unfold(1, 3, 1),
}


@pytest.mark.parametrize("name", list(VIEWS) + list(READ_ONLY_VIEWS))
def test_view_values_and_aliasing(name):
    fn = {**VIEWS, **READ_ONLY_VIEWS}[name]
    base_cpu = torch.randn(4, 6)
    base = base_cpu.to(TPU)
    torch.tpu.synchronize()
    mem = torch.tpu.memory_allocated()
    requests = torch.tpu._get_cache_stats()["requests"]
    v = fn(base)
    # Metadata only: no device program runs, no device memory is allocated.
    assert torch.tpu._get_cache_stats()["requests"] == requests
    assert torch.tpu.memory_allocated() <= mem
    v_cpu = fn(base_cpu)
    assert v.device.type == "tpu"
    assert v.shape == v_cpu.shape
    assert v.stride() == v_cpu.stride()
    assert v.storage_offset() == v_cpu.storage_offset()
    assert v._is_view()
    assert same_storage(v, base)
    assert torch.equal(v.cpu(), v_cpu)


def _write_ops():
    return {
        "add_": lambda v: v.add_(1),
        "mul_": lambda v: v.mul_(2),
        "setitem": lambda v: v.__setitem__(..., 7.5),
        "copy_": lambda v: v.copy_(torch.arange(v.numel(), dtype=v.dtype).reshape(v.shape)),
        "fill_": lambda v: v.fill_(3.0),
        "zero_": lambda v: v.zero_(),
    }


WRITE_OPS = list(_write_ops())


# Views the write-through matrix runs on (the rest are covered by reads and by
# test_write_through_view_more_ops).
WRITE_VIEWS = ["view", "transpose", "permute", "slice_step", "slice_offset", "select_col",
               "narrow", "diagonal", "unfold", "as_strided", "view_of_view"]


@pytest.mark.parametrize("op", WRITE_OPS)
@pytest.mark.parametrize("name", WRITE_VIEWS)
def test_write_through_view(name, op):
    """A write through one view shows in the base and in another alias, as on CPU."""
    view_fn, write = VIEWS[name], _write_ops()[op]

    def run(base):
        other = base.view(24)[5:20]  # a second alias overlapping most elements
        v = view_fn(base)
        write(v)
        return base.clone(), other.clone(), v.clone()

    base_cpu = torch.randn(4, 6)
    expected = run(base_cpu.clone())
    actual = run(base_cpu.to(TPU))
    for a, e in zip(actual, expected):
        assert_close(a.cpu(), e, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["t", "select_row", "squeeze", "unsqueeze", "diagonal_offset"])
def test_write_through_view_more_ops(name):
    """Several writes in a row through one view: setitem of a part, copy from tpu, exp_."""
    view_fn = VIEWS[name]

    def run(base):
        other = base.view(24)[3:]
        v = view_fn(base)
        v.add_(1)
        v[0] = -3.0
        v.copy_(v.detach().cpu().neg().to(v.device) if v.device.type == "tpu" else v.neg())
        v.exp_()
        return base.clone(), other.clone(), v.clone()

    base_cpu = torch.randn(4, 6)
    expected = run(base_cpu.clone())
    actual = run(base_cpu.to(TPU))
    for a, e in zip(actual, expected):
        assert_close(a.cpu(), e, rtol=1e-6, atol=1e-6)


def test_write_sequence_through_several_views():
    def run(x):
        a = x[1:, ::2]
        b = x.t()
        c = a.diagonal()
        a.add_(10)
        b[2].mul_(-1)
        c.fill_(0.5)
        x[0] = x[3]
        b[:, 1:3].copy_(torch.ones(6, 2, device=x.device) * 4)
        return x, a, b, c
    base = torch.randn(4, 6)
    expected = run(base.clone())
    actual = run(base.to(TPU))
    for a, e in zip(actual, expected):
        assert torch.equal(a.cpu(), e)


def test_view_of_view_aliases_base():
    base_cpu = torch.randn(6, 8)
    base = base_cpu.to(TPU)
    v1 = base[1:5]
    v2 = v1[:, ::2]
    v3 = v2.t()[1:3]
    assert same_storage(v3, base)
    assert v3._base is base
    v3.mul_(0)
    base_cpu[1:5][:, ::2].t()[1:3].mul_(0)
    assert torch.equal(base.cpu(), base_cpu)
    assert torch.equal(v1.cpu(), base_cpu[1:5])


def test_base_write_visible_in_views():
    base_cpu = torch.randn(4, 6)
    base = base_cpu.to(TPU)
    v = base[:, 2:4]
    w = base.t()
    base.add_(1)
    base[3, 3] = 100.0
    base_cpu.add_(1)
    base_cpu[3, 3] = 100.0
    assert torch.equal(v.cpu(), base_cpu[:, 2:4])
    assert torch.equal(w.cpu(), base_cpu.t())


def test_reshape_of_noncontiguous_copies():
    base_cpu = torch.randn(4, 6)
    base = base_cpu.to(TPU)
    r = base.t().reshape(24)  # needs a copy, as on CPU
    r_cpu = base_cpu.t().reshape(24)
    assert not same_storage(r, base)
    assert same_storage(r_cpu, base_cpu) is False
    assert torch.equal(r.cpu(), r_cpu)
    r.add_(1)
    assert torch.equal(base.cpu(), base_cpu)


def test_view_incompatible_raises_like_cpu():
    base = torch.randn(4, 6)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        base.t().view(24)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        base.to(TPU).t().view(24)


@pytest.mark.parametrize("op", ["add_", "mul_", "copy_", "fill_", "zero_", "relu_", "exp_",
                                "setitem_row"])
def test_inplace_on_expanded_like_cpu(op):
    ops = {
        "add_": lambda v: v.add_(1),
        "mul_": lambda v: v.mul_(2),
        "copy_": lambda v: v.copy_(torch.ones(4, 3)),
        "fill_": lambda v: v.fill_(3),
        "zero_": lambda v: v.zero_(),
        "relu_": lambda v: v.relu_(),
        "exp_": lambda v: v.exp_(),
        "setitem_row": lambda v: v.__setitem__(0, 5.0),
    }

    def run(device):
        base = torch.randn(1, 3, generator=torch.Generator().manual_seed(0)).to(device)
        v = base.expand(4, 3)
        ops[op](v)
        return base

    try:
        expected = run("cpu")
    except RuntimeError as e:
        assert "more than one element of the written-to tensor refers to a single memory " \
               "location" in str(e)
        with pytest.raises(RuntimeError, match="more than one element of the written-to "
                                               "tensor refers to a single memory location"):
            run(TPU)
        return
    assert torch.equal(run(TPU).cpu(), expected)


def test_inplace_on_expanded_add_raises_message():
    x = torch.zeros(1, 3, device=TPU).expand(4, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor "
                                           "refers to a single memory location"):
        x.add_(1)
    # The base is unchanged.
    assert torch.equal(x.cpu(), torch.zeros(4, 3))


def test_version_counter_matches_cpu():
    def script(x):
        versions = [x._version]
        v = x[1:3]
        y = x * 2  # out-of-place: no bump
        versions.append(x._version)
        x.add_(1)
        versions.append(x._version)
        v.mul_(3)  # views share the counter
        versions += [x._version, v._version]
        x[0] = 1.0
        versions.append(x._version)
        x.copy_(y)
        versions.append(x._version)
        x.t().fill_(2)
        versions.append(x._version)
        x.zero_()
        versions.append(x._version)
        torch.add(y, 1, out=x)
        versions.append(x._version)
        x.exp_()
        versions.append(x._version)
        x.masked_fill_(x > 0, 0)
        versions += [x._version, v._version, y._version]
        return versions
    base = torch.randn(4, 4)
    assert script(base.to(TPU)) == script(base.clone())


def test_data_ptr_semantics():
    base_cpu = torch.randn(4, 6)
    base = base_cpu.to(TPU)
    views = [base[1:], base.t(), base[:, 2], base.view(24)[7:], base.diagonal()]
    for v in views:
        assert same_storage(v, base)
        assert v.untyped_storage().nbytes() == base.untyped_storage().nbytes()
    # Tensor data_ptr moves with the storage offset, as on CPU.
    for v, v_cpu in zip(views, [base_cpu[1:], base_cpu.t(), base_cpu[:, 2],
                                base_cpu.view(24)[7:], base_cpu.diagonal()]):
        assert v.data_ptr() - base.data_ptr() == v_cpu.data_ptr() - base_cpu.data_ptr()
    # Distinct tensors have distinct storages.
    assert not same_storage(base.clone(), base)
    assert not same_storage(base + 0, base)
    assert not same_storage(torch.zeros(3, device=TPU), torch.zeros(3, device=TPU))


def test_detach_aliases():
    base_cpu = torch.randn(3, 3)
    x = base_cpu.to(TPU).requires_grad_()
    d = x.detach()
    assert same_storage(d, x)
    d.add_(1)
    assert torch.equal(x.detach().cpu(), base_cpu + 1)


def test_resize_keeps_prefix():
    src = torch.randn(6)
    x = src.to(TPU)
    x.resize_(10)
    assert x.shape == (10,)
    assert torch.equal(x[:6].cpu(), src)
    x[6:] = 1.0
    assert torch.equal(x.cpu()[6:], torch.ones(4))
    x.resize_(3)
    assert torch.equal(x.cpu(), src[:3])
    x.resize_(2, 2)  # within the existing storage: prefix kept
    assert torch.equal(x.cpu().view(-1)[:3], src[:3])


def test_resize_of_2d_and_int():
    src = torch.randint(-100, 100, (3, 4), dtype=torch.int32)
    x = src.to(TPU)
    x.resize_(5, 4)
    assert torch.equal(x[:3].cpu(), src)
    y = torch.empty(0, device=TPU)
    y.resize_(4).fill_(2.0)
    assert torch.equal(y.cpu(), torch.full((4,), 2.0))


def test_resize_view_alias_sees_old_values():
    src = torch.randn(8)
    x = src.to(TPU)
    v = x[2:5]
    x.resize_(16)
    x[:8].add_(0)  # force reading the (resized) storage
    assert torch.equal(v.cpu(), src[2:5])
    assert torch.equal(x[:8].cpu(), src)
