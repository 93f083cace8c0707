"""The opt-in CPU fallback for ops without a tpu lowering."""

import warnings

import pytest
import torch
import torch_tpu


def test_off_by_default_raises_naming_the_op():
    x = torch.randn(4, 4).to("tpu")
    with pytest.raises(NotImplementedError, match="aten::linalg_qr.*cpu_fallback_mode"):
        torch.linalg.qr(x)


def test_enabled_runs_on_cpu_with_one_warning_per_op():
    a = torch.randn(5, 5)
    x = a.to("tpu")
    with torch_tpu.cpu_fallback_mode(True):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            q, r = torch.linalg.qr(x)
            q2, _ = torch.linalg.qr(x)
        assert q.device.type == "tpu" and r.device.type == "tpu"
        qc, rc = torch.linalg.qr(a)
        torch.testing.assert_close(q.cpu(), qc)
        torch.testing.assert_close(r.cpu(), rc)
        msgs = [str(m.message) for m in w if "linalg_qr" in str(m.message)]
        assert len(msgs) <= 1  # once per op for the whole process
    with pytest.raises(NotImplementedError):
        torch.linalg.qr(x)  # the context restored the default


def test_fallback_in_place_op_updates_the_tpu_tensor():
    a = torch.randn(6)
    x = a.to("tpu")
    with torch_tpu.cpu_fallback_mode(True):
        x.exponential_()  # no tpu lowering: runs on CPU, written back
    assert x.device.type == "tpu"
    assert bool((x.cpu() >= 0).all())
