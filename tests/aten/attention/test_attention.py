"""F.scaled_dot_product_attention on tpu: one fused program forward and one
backward (PyTorch's overrideable SDPA backend), checked against CPU."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.testing import assert_close
from torch.utils._python_dispatch import TorchDispatchMode

FUSED = "aten._scaled_dot_product_fused_attention_overrideable"


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def run(q, k, v, device, grad_out, **kw):
    ins = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
    mask = kw.pop("attn_mask", None)
    if mask is not None:
        mask = mask.detach().to(device).requires_grad_(mask.requires_grad)
    out = F.scaled_dot_product_attention(*ins, attn_mask=mask, **kw)
    out.backward(grad_out.to(device))
    grads = [t.grad.cpu() for t in ins]
    if mask is not None and mask.requires_grad:
        grads.append(mask.grad.cpu())
    return out, grads


CASES = {
    "plain": dict(),
    "causal": dict(is_causal=True),
    "causal_fewer_queries": dict(is_causal=True, L=5, S=9),
    "causal_more_queries": dict(is_causal=True, L=9, S=5),
    "float_mask": dict(mask=(7, 9)),
    "bool_mask": dict(mask=(2, 1, 7, 9), bool_mask=True),
    "mask_with_grad": dict(mask=(1, 3, 7, 9), mask_grad=True),
    "scale": dict(scale=0.37),
    "value_dim": dict(Ev=10),
    "grouped_query_heads": dict(enable_gqa=True, H=4, Hkv=2),
    "grouped_query_heads_causal": dict(enable_gqa=True, is_causal=True, H=6, Hkv=2),
    # From 256 query rows causal attention runs by blocks of rows, each
    # seeing only the keys up to its last row: two blocks, uneven blocks
    # (400 rows in 3), fewer keys than some blocks' rows, keys no row sees.
    "causal_row_blocks": dict(is_causal=True, L=256, S=256),
    "causal_row_blocks_uneven": dict(is_causal=True, L=400, S=400),
    "causal_row_blocks_fewer_keys": dict(is_causal=True, L=256, S=100),
    "causal_row_blocks_more_keys": dict(is_causal=True, L=260, S=300),
    "causal_row_blocks_grouped_heads": dict(enable_gqa=True, is_causal=True, H=4, Hkv=2, L=384,
                                            S=384),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sdpa_matches_cpu(case, dtype, highest_matmul_precision):
    c = dict(CASES[case])
    B, H, L, S, E, Ev = 2, c.pop("H", 3), c.pop("L", 7), c.pop("S", 9), 8, c.pop("Ev", 8)
    Hkv = c.pop("Hkv", H)
    if c.get("is_causal") and "L" not in CASES[case]:
        S = L
    q, k, v = torch.randn(B, H, L, E), torch.randn(B, Hkv, S, E), torch.randn(B, Hkv, S, Ev)
    q, k, v = (t.to(dtype) for t in (q, k, v))
    mask_shape = c.pop("mask", None)
    if mask_shape is not None:
        if c.pop("bool_mask", False):
            c["attn_mask"] = torch.rand(mask_shape) > 0.3
        else:
            c["attn_mask"] = torch.randn(mask_shape, dtype=dtype).requires_grad_(c.pop("mask_grad", False))
    grad_out = torch.randn(B, H, L, Ev, dtype=dtype)
    with OpLog() as log:
        out_t, grads_t = run(q, k, v, "tpu", grad_out, **dict(c))
    assert FUSED + ".default" in log.ops and FUSED + "_backward.default" in log.ops
    assert not any("bmm" in op or "softmax" in op for op in log.ops)
    out_c, grads_c = run(q, k, v, "cpu", grad_out, **dict(c))
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=3e-2)
    assert_close(out_t.cpu(), out_c.detach(), **tol)
    for gt, gc in zip(grads_t, grads_c):
        assert_close(gt, gc, **tol)


def test_sdpa_keeps_the_query_layout(highest_matmul_precision):
    # Heads split from [B, L, H*E] and transposed, as attention layers do: the
    # result is laid out like the query, so transpose(1, 2) is contiguous.
    x = torch.randn(2, 6, 4 * 8)
    q = x.view(2, 6, 4, 8).transpose(1, 2)
    out = F.scaled_dot_product_attention(*(q.to("tpu"),) * 3, is_causal=True)
    assert out.stride() == q.stride()
    assert out.transpose(1, 2).is_contiguous()
    assert_close(out.cpu(), F.scaled_dot_product_attention(q, q, q, is_causal=True), rtol=1e-4, atol=1e-5)


def test_sdpa_fully_masked_rows_are_zero(highest_matmul_precision):
    q = torch.randn(1, 2, 5, 4)
    mask = torch.ones(5, 5, dtype=torch.bool)
    mask[2] = False
    got = F.scaled_dot_product_attention(*(q.to("tpu"),) * 3, attn_mask=mask.to("tpu")).cpu()
    assert_close(got, F.scaled_dot_product_attention(q, q, q, attn_mask=mask), rtol=1e-4, atol=1e-5)
    assert torch.equal(got[:, :, 2], torch.zeros(1, 2, 4))
    # Gradients too: the backward rebuilds the weights from the forward's
    # log-sum-exp, which is -inf on the masked row.
    grads = []
    for dev in ("cpu", "tpu"):
        qs = [t.detach().to(dev).requires_grad_() for t in (q, q.flip(2), q.flip(3))]
        out = F.scaled_dot_product_attention(*qs, attn_mask=mask.to(dev))
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(dev))
        grads.append([t.grad.cpu() for t in qs])
    for got_g, want_g in zip(grads[1], grads[0]):
        assert_close(got_g, want_g, rtol=1e-4, atol=1e-5)
    assert torch.equal(grads[1][0][:, :, 2], torch.zeros(1, 2, 4))


def test_sdpa_backward_checks_its_logsumexp():
    q = torch.randn(1, 2, 5, 4, device="tpu")
    fwd = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    bwd = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward
    out, lse = fwd(q, q, q, None, 0.0, False, False)[:2]
    for bad in (out, lse[0]):
        with pytest.raises(RuntimeError, match=r"backward: expects the forward's logsumexp.*\[1, 2, 5\]"):
            bwd(out, q, q, q, None, [True, True, True, False], out, bad, None, None, 5, 5, 0.0, False,
                lse, lse)


def test_sdpa_cases_left_to_the_math_path(highest_matmul_precision):
    q = torch.randn(2, 4, 5, 8, device="tpu")
    with OpLog() as log:  # 3-D inputs
        out = F.scaled_dot_product_attention(q[0], q[0], q[0])
    assert FUSED + ".default" not in log.ops
    ref = F.scaled_dot_product_attention(*(q[0].cpu(),) * 3)
    assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-5)
    kv = torch.randn(2, 2, 5, 8, device="tpu")  # fewer key heads without enable_gqa: CPU's error
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, kv, kv)
    with sdpa_kernel(SDPBackend.MATH), OpLog() as log:
        F.scaled_dot_product_attention(q, q, q)
    assert FUSED + ".default" not in log.ops
    with OpLog() as log:  # dropout needs the math path's RNG
        F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert FUSED + ".default" not in log.ops


def test_sdpa_mask_with_is_causal_raises_like_cpu():
    q = torch.randn(1, 1, 3, 4, device="tpu")
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(3, 3, device="tpu"), is_causal=True)
