"""The opt-in CPU fallback for ops without a tpu lowering."""

import warnings

import pytest
import torch
import torch_tpu


def test_off_by_default_raises_naming_the_op():
    x = torch.randn(4, 4).to("tpu")
    with pytest.raises(NotImplementedError, match="aten::linalg_eig.*cpu_fallback_mode"):
        torch.linalg.eig(x)


def test_enabled_runs_on_cpu_with_one_warning_per_op():
    a = torch.randn(5, 5)
    x = a.to("tpu")
    with torch_tpu.cpu_fallback_mode(True):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            vals, vecs = torch.linalg.eig(x)
            torch.linalg.eig(x)
        assert vals.device.type == "tpu" and vecs.device.type == "tpu"
        vals_c, vecs_c = torch.linalg.eig(a)
        torch.testing.assert_close(vals.cpu(), vals_c)
        torch.testing.assert_close(vecs.cpu(), vecs_c)
        msgs = [str(m.message) for m in w if "linalg_eig" in str(m.message)]
        assert len(msgs) <= 1  # once per op for the whole process
    with pytest.raises(NotImplementedError):
        torch.linalg.eig(x)  # the context restored the default


def test_fallback_in_place_op_updates_the_tpu_tensor():
    a = torch.randn(6)
    x = a.to("tpu")
    with torch_tpu.cpu_fallback_mode(True):
        x.random_(0, 10)  # no tpu lowering: runs on CPU, written back
    assert x.device.type == "tpu"
    got = x.cpu()
    assert bool(((got >= 0) & (got < 10) & (got == got.round())).all())
