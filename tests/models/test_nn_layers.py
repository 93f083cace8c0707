"""Every layer class of torch.nn on tpu against CPU, forward and backward
(and the eval-mode fast path of attention and Transformer layers), through
benchmarks/nn_modules_sweep.py's recipes. A class that torch adds without a
recipe fails test_every_layer_class_has_a_recipe."""

import os
import sys
import warnings

import pytest

import nn_modules_sweep as sweep  # noqa: E402

LAYERS, _ = sweep.layer_classes()


def test_every_layer_class_has_a_recipe():
    assert [n for n in LAYERS if n not in sweep.RECIPES] == []


@pytest.mark.parametrize("name", sorted(n for n in LAYERS if n in sweep.RECIPES))
def test_layer_against_cpu(name, highest_matmul_precision):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            sweep.check(sweep.RECIPES[name])
        except sweep.Fail as f:
            pytest.fail(f"{name}: {f.kind}: {f.reason}\n{f.tb}")


@pytest.mark.parametrize("masks", ["key_padding", "attn_bool", "attn_float", "both", "none"])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_attention_fast_path_masks(masks, need_weights, average, highest_matmul_precision):
    # Eval mode without grad: nn.MultiheadAttention calls the fused
    # _native_multi_head_attention on CPU and on tpu alike.
    import copy

    import torch
    from torch import nn
    from torch.testing import assert_close

    torch.manual_seed(0)
    m = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    t = copy.deepcopy(m).to("tpu")
    x = torch.randn(3, 5, 8)
    kpm = torch.tensor([[False] * 5, [False, False, True, True, True], [True] * 5])
    am = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    kw = {"key_padding": dict(key_padding_mask=kpm), "attn_bool": dict(attn_mask=am),
          "attn_float": dict(attn_mask=torch.zeros(5, 5).masked_fill(am, float("-inf"))),
          "both": dict(key_padding_mask=kpm, attn_mask=am), "none": {}}[masks]
    kw = dict(kw, need_weights=need_weights, average_attn_weights=average)
    with torch.no_grad():
        want = m(x, x, x, **kw)
        got = t(*(x.to("tpu"),) * 3, **{k: v.to("tpu") if torch.is_tensor(v) else v
                                       for k, v in kw.items()})
    # (a batch row whose keys are all padding is NaN on both)
    assert_close(got[0].cpu(), want[0], rtol=1e-4, atol=1e-5, equal_nan=True)
    assert (got[1] is None) == (want[1] is None)
    if want[1] is not None:
        assert_close(got[1].cpu(), want[1], rtol=1e-4, atol=1e-5, equal_nan=True)


def test_encoder_fast_path_with_padding_mask(highest_matmul_precision):
    # Without nested tensors (not supported on tpu), the encoder's layers
    # still take the fused fast path with the padding mask.
    import copy

    import torch
    from torch import nn
    from torch.testing import assert_close

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True)
    enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    t = copy.deepcopy(enc).to("tpu")
    x = torch.randn(2, 5, 8)
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        assert_close(t(x.to("tpu"), src_key_padding_mask=kpm.to("tpu")).cpu(),
                     enc(x, src_key_padding_mask=kpm), rtol=1e-4, atol=1e-5)
