"""PyTorch OpInfo samples on tpu against CPU, for a curated set of OpInfos.

Runs the logic of benchmarks/opinfo_sweep.py (same sample copying, tolerances
and backward check) on OpInfos that pass today, forward and backward, so a
regression in any of them fails CI. The full database is the sweep's job:
``python benchmarks/opinfo_sweep.py --summary-missing``. When a lowering makes
another OpInfo pass, it can be added here (keep the whole file under ~60 s).
"""

import functools
import os
import sys

import pytest
import torch

import opinfo_sweep  # noqa: E402

CURATED = [
    # elementwise
    "abs", "add", "mul", "sub", "div.no_rounding_mode", "remainder", "exp", "log", "sin",
    "cos", "tanh", "sigmoid", "sqrt", "neg", "sign", "clamp", "where", "lerp", "addcmul",
    "eq", "logical_and",
    # matmul class
    "mm", "bmm", "addmm", "addmv", "dot", "outer", "linalg.multi_dot",
    # reductions, scans, sorting
    "cumsum", "var_mean.unbiased", "std", "max.reduction_no_dim", "topk", "sort", "argsort",
    # shape and views
    "cat", "stack", "flip", "roll", "reshape", "permute", "transpose", "select", "split",
    "tril", "as_strided",
    # indexing
    "index_select", "index_put", "__getitem__", "scatter", "scatter_add",
    "take_along_dim", "masked_fill",
    # nn
    "softmax", "log_softmax", "nn.functional.relu", "nn.functional.gelu",
    "nn.functional.silu", "nn.functional.layer_norm", "nn.functional.batch_norm",
    "nn.functional.embedding", "nn.functional.pad.constant", "nn.functional.l1_loss",
    # pooling, padding, resampling, special functions, misc
    "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d", "nn.functional.pad.reflect",
    "nn.functional.logsigmoid", "logaddexp", "polygamma.polygamma_n_1", "nonzero",
    "nn.functional.pdist", "_upsample_bilinear2d_aa", "special.bessel_y1",
    "special.scaled_modified_bessel_k0",
    # loops and factorizations (stablehlo.while), special functions
    "nn.functional.ctc_loss", "linalg.solve", "linalg.det", "linalg.cholesky", "linalg.qr",
    "linalg.svdvals", "linalg.eigvalsh", "special.chebyshev_polynomial_t", "special.i0e", "gcd",
    "mode", "index_reduce.amax", "nn.functional.multi_margin_loss",
    # complex numbers, and the ops whose indices are checked on the device
    "angle", "fft.irfft", "fft.hfft", "stft", "take", "put", "gather",
    "nn.functional.nll_loss", "nn.functional.cross_entropy",
]

BUDGET_S = 5.0  # per OpInfo; the sweep's default is 10 s


@functools.lru_cache(maxsize=None)
def _ops_by_name():
    return {opinfo_sweep.op_full_name(op): op for op in opinfo_sweep.get_op_db()}


@pytest.mark.parametrize("name", CURATED)
def test_opinfo(name, highest_matmul_precision):
    op = _ops_by_name()[name]
    res = opinfo_sweep.run_opinfo(op, budget=BUDGET_S)
    assert res["fwd"] is True, f"{name} forward: {res['fwd']}"
    if op.supports_autograd:
        assert res["bwd"] is True, f"{name} backward: {res['bwd']}"


# Complex results: the sweep compares the forward only (tests/aten/pointwise/test_complex.py
# checks gradients through them, e.g. Llama's rotary embedding).
COMPLEX_FORWARD = ["view_as_complex", "complex", "polar", "chalf"]


@pytest.mark.parametrize("name", COMPLEX_FORWARD)
def test_opinfo_complex_forward(name):
    res = opinfo_sweep.run_opinfo(_ops_by_name()[name], budget=BUDGET_S)
    assert res["fwd"] is True, f"{name} forward: {res['fwd']}"


def test_expected_failures_name_real_opinfos_with_reasons():
    db = _ops_by_name()
    for name, reason in opinfo_sweep.EXPECTED_FAILURES.items():
        assert name in db, f"EXPECTED_FAILURES names no OpInfo: {name}"
        assert isinstance(reason, str) and len(reason) > 10, name


# bfloat16 where CPU supports it: plain comparisons, the tie rule (sort,
# topk, mode) and the precision rule (addbmm, conv_transpose2d).
BF16_CURATED = ["add", "mm", "addbmm", "softmax", "nn.functional.layer_norm", "sort", "topk",
                "mode", "nn.functional.conv_transpose2d", "div.trunc_rounding"]


@pytest.mark.parametrize("name", BF16_CURATED)
def test_opinfo_bfloat16(name, highest_matmul_precision):
    op = _ops_by_name()[name]
    res = opinfo_sweep.run_opinfo(op, bf16=True, budget=BUDGET_S, backward=False)
    assert res["fwd"] is True, f"{name} forward: {res['fwd']}"


def test_tie_rule_accepts_other_ties_and_rejects_other_values():
    from torch.testing._internal.opinfo.core import SampleInput
    op = _ops_by_name()["sort"]
    x = torch.tensor([3.0, 1.0, 1.0, 2.0])
    expected = tuple(torch.sort(x))
    sample = SampleInput(x)
    ties_swapped = (expected[0], torch.tensor([2, 1, 3, 0]))
    assert opinfo_sweep.ties_equivalent(op, sample, ties_swapped, expected, torch.float32)
    wrong = (expected[0], torch.tensor([1, 3, 2, 0]))
    with pytest.raises(AssertionError):
        opinfo_sweep.ties_equivalent(op, sample, wrong, expected, torch.float32)
    # stable=True fixes the order of ties: no leniency
    assert not opinfo_sweep.ties_equivalent(op, SampleInput(x, kwargs={"stable": True}),
                                            ties_swapped, expected, torch.float32)


def test_precision_rule_accepts_closer_results_only():
    op = _ops_by_name()["mm"]
    a = torch.randn(16, 64).bfloat16()
    b = torch.randn(64, 16).bfloat16()
    cpu_tree = (a, (b,), {})
    expected = torch.mm(a, b)
    rounded_once = torch.mm(a.double(), b.double()).bfloat16()
    assert opinfo_sweep.as_precise_as_cpu(op, cpu_tree, rounded_once, expected)
    assert not opinfo_sweep.as_precise_as_cpu(op, cpu_tree, expected + 0.5, expected)
