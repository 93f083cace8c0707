"""isin on tpu against CPU (tensor/scalar forms, invert, dtype promotion,
NaN, empty sets, out=), and _assert_async."""

import pytest
import torch

TPU = torch.device("tpu")


@pytest.mark.parametrize("invert", [False, True])
def test_isin_tensor_forms(invert):
    e, t = torch.randint(0, 12, (4, 5)), torch.randint(0, 12, (7,))
    assert torch.equal(torch.isin(e.to(TPU), t.to(TPU), invert=invert).cpu(), torch.isin(e, t, invert=invert))
    assert torch.equal(torch.isin(e.to(TPU), 3, invert=invert).cpu(), torch.isin(e, 3, invert=invert))
    assert torch.equal(torch.isin(3, t.to(TPU), invert=invert).cpu(), torch.isin(3, t, invert=invert))


def test_isin_promotion_nan_empty_and_out():
    e = torch.tensor([1.0, 2.5, float("nan"), 3.0])
    t = torch.tensor([2.5, float("nan"), 3])
    assert torch.equal(torch.isin(e.to(TPU), t.to(TPU)).cpu(), torch.isin(e, t))  # NaN is never in
    ei = torch.tensor([1, 2, 3])
    assert torch.equal(torch.isin(ei.to(TPU), torch.tensor([2.0, 3.5]).to(TPU)).cpu(),
                       torch.isin(ei, torch.tensor([2.0, 3.5])))
    empty = torch.tensor([], dtype=torch.long)
    for inv in (False, True):
        assert torch.equal(torch.isin(ei.to(TPU), empty.to(TPU), invert=inv).cpu(),
                           torch.isin(ei, empty, invert=inv))
    out = torch.empty(3, dtype=torch.bool, device=TPU)
    torch.isin(ei.to(TPU), torch.tensor([3]).to(TPU), out=out)
    assert out.cpu().tolist() == [False, False, True]


def test_assert_async():
    torch._assert_async(torch.tensor(True, device=TPU))
    torch._assert_async(torch.tensor(2, device=TPU), "fine")
    with pytest.raises(RuntimeError, match="the check failed"):
        torch._assert_async(torch.tensor(0.0, device=TPU), "the check failed")
    with pytest.raises(RuntimeError, match="more than one value"):
        torch._assert_async(torch.ones(2, device=TPU))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_histc_of_integers_as_on_cuda(dtype):
    x = torch.randint(0, 8, (200,), dtype=dtype)
    got = torch.histc(x.to(TPU), bins=8, min=0, max=7).cpu()
    assert got.dtype == dtype
    assert torch.equal(got, torch.histc(x.double(), bins=8, min=0, max=7).to(dtype))
