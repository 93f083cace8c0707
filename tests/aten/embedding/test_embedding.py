"""embedding_bag (every mode, per-sample weights, padding_idx, offsets) and
embedding's max_norm renormalization on tpu against CPU."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- nonzero --

def _bag_inputs(include_last_offset):
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
    off = torch.tensor([0, 4, 4, 7, 10] if include_last_offset else [0, 4, 4, 7])
    return idx, off


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag(mode, padding_idx, include_last_offset):
    idx, off = _bag_inputs(include_last_offset)
    w = torch.randn(10, 4)
    compare_grad(lambda t: F.embedding_bag(idx.to(t.device), t, off.to(t.device), mode=mode,
                                           padding_idx=padding_idx,
                                           include_last_offset=include_last_offset),
                 w, atol=1e-5, rtol=1e-5)


def test_embedding_bag_per_sample_weights_2d_and_module():
    idx, off = _bag_inputs(False)
    compare_grad(lambda t, p: F.embedding_bag(idx.to(t.device), t, off.to(t.device), mode="sum",
                                              per_sample_weights=p),
                 torch.randn(10, 4), torch.rand(10), atol=1e-5, rtol=1e-5)
    x = torch.randint(0, 10, (3, 5))
    for mode in ["sum", "mean", "max"]:
        compare_grad(lambda t: F.embedding_bag(x.to(t.device), t, mode=mode), torch.randn(10, 6),
                     atol=1e-5, rtol=1e-5)
    m = torch.nn.EmbeddingBag(10, 4, mode="mean")
    mt = torch.nn.EmbeddingBag(10, 4, mode="mean").to(TPU)
    mt.load_state_dict(m.state_dict())
    with torch.no_grad():  # the forward-only variant
        assert_close(mt(x.to(TPU)).cpu(), m(x), atol=1e-6, rtol=1e-5)


def test_embedding_bag_scale_grad_by_freq():
    # Each row's gradient is divided by how often its index occurs in the
    # batch (as embedding's own scale_grad_by_freq does).
    x = torch.tensor([[0, 0, 1], [1, 2, 3]])
    w = torch.randn(5, 2, device=TPU, requires_grad=True)
    F.embedding_bag(x.to(TPU), w, mode="sum", scale_grad_by_freq=True).sum().backward()
    wc = w.detach().cpu().requires_grad_()
    F.embedding(x, wc, scale_grad_by_freq=True).sum().backward()
    assert_close(w.grad.cpu(), wc.grad)


def test_embedding_bag_errors():
    w = torch.randn(10, 4, device=TPU)
    with pytest.raises(RuntimeError, match="per_sample_weights"):
        F.embedding_bag(torch.tensor([1, 2], device=TPU), w, torch.tensor([0], device=TPU),
                        mode="mean", per_sample_weights=torch.ones(2, device=TPU))


# --------------------------------------------------------------- linspace --

@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_embedding_max_norm(norm_type):
    w = torch.randn(10, 4) * 3
    idx = torch.tensor([[1, 2], [2, 5]])
    wc, wt = w.clone(), w.to(TPU)
    out_c = F.embedding(idx, wc, max_norm=1.0, norm_type=norm_type)
    out_t = F.embedding(idx.to(TPU), wt, max_norm=1.0, norm_type=norm_type)
    assert_close(wt.cpu(), wc, atol=1e-6, rtol=1e-5)  # renormalized in place
    assert_close(out_t.cpu(), out_c, atol=1e-6, rtol=1e-5)


# ---------------------------------------------------------- cross, renorm --
