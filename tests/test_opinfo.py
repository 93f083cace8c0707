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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
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
    "nn.functional.pdist",
    # loops and factorizations (stablehlo.while), special functions
    "nn.functional.ctc_loss", "linalg.solve", "linalg.det", "linalg.cholesky", "linalg.qr",
    "linalg.svdvals", "linalg.eigvalsh", "special.chebyshev_polynomial_t", "special.i0e", "gcd",
    "mode", "index_reduce.amax", "nn.functional.multi_margin_loss",
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


def test_expected_failures_name_real_opinfos_with_reasons():
    db = _ops_by_name()
    for name, reason in opinfo_sweep.EXPECTED_FAILURES.items():
        assert name in db, f"EXPECTED_FAILURES names no OpInfo: {name}"
        assert isinstance(reason, str) and len(reason) > 10, name
