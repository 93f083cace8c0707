"""The opt-in CPU fallback for ops without a tpu lowering."""

import warnings

import pytest
import torch
import torch_tpu


def _sym(n):
    a = torch.randn(n, n)
    return a + a.mT


def test_off_by_default_raises_naming_the_op():
    x = _sym(4).to("tpu")
    with pytest.raises(NotImplementedError, match="aten::linalg_ldl_factor_ex.*cpu_fallback_mode"):
        torch.linalg.ldl_factor(x)


def test_enabled_runs_on_cpu_with_one_warning_per_op():
    a = _sym(5)
    x = a.to("tpu")
    with torch_tpu.cpu_fallback_mode(True):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ld, piv = torch.linalg.ldl_factor(x)
            torch.linalg.ldl_factor(x)
        assert ld.device.type == "tpu" and piv.device.type == "tpu"
        ld_c, piv_c = torch.linalg.ldl_factor(a)
        torch.testing.assert_close(ld.cpu(), ld_c)
        torch.testing.assert_close(piv.cpu(), piv_c)
        msgs = [str(m.message) for m in w if "linalg_ldl_factor_ex" in str(m.message)]
        assert len(msgs) <= 1  # once per op for the whole process
    with pytest.raises(NotImplementedError):
        torch.linalg.ldl_factor(x)  # the context restored the default


def test_fallback_in_place_op_updates_the_tpu_tensor():
    a = torch.randn(6)
    x = a.to("tpu")
    with torch_tpu.cpu_fallback_mode(True):
        x.random_(0, 10)  # no tpu lowering: runs on CPU, written back
    assert x.device.type == "tpu"
    got = x.cpu()
    assert bool(((got >= 0) & (got < 10) & (got == got.round())).all())
