"""torch.backends.tpu: what libraries read to find the backend, and its
switch allow_excess_precision."""

import os
import random
import subprocess
import sys

import pytest
import torch

import torch_tpu
import torch_tpu.metrics as tm


def test_backends_tpu_is_importable_and_answers():
    import torch.backends.tpu as backend

    assert backend is torch.backends.tpu
    assert torch.backends.tpu.is_built() is True
    assert torch.backends.tpu.is_available() is torch.tpu.is_available() is True
    # The device-choosing idiom of libraries that support MPS and TPU.
    device = torch.device("tpu") if torch.backends.tpu.is_available() else torch.device("cpu")
    assert (torch.ones(2, device=device) + 1).device.type == "tpu"


def test_is_available_is_false_without_a_plugin():
    r = subprocess.run([sys.executable, "-c", "import torch, torch_tpu; "
                        "print(torch.backends.tpu.is_built(), torch.backends.tpu.is_available())"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, TORCH_TPU_PLUGIN_PATH="/nonexistent/plugin.so"))
    assert r.stdout.split() == ["True", "False"], r.stdout + r.stderr[-2000:]


def _bf16_program(a, b):
    # bf16 results rounded by each op on CPU: a program must round likewise.
    # Only correctly rounded ops (no matmul, whose f32 accumulation order may
    # differ, no transcendental, whose f32 approximation may), so that
    # rounding each op to bf16 gives CPU's bits exactly.
    h = a * b
    return (((h * 0.37 + a) * h - b) / (a.abs() + 1)).float() * torch.tensor([1.0], device=a.device)


def test_allow_excess_precision_is_off_by_default_and_matches_cpu_either_way():
    assert torch.backends.tpu.allow_excess_precision is False
    n = random.Random(os.urandom(8)).randrange(40, 90)
    a, b = torch.randn(n, n).bfloat16(), torch.randn(n, n).bfloat16()
    expected = _bf16_program(a, b)
    compiled = torch.compile(_bf16_program, backend="tpu", dynamic=False)
    with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE):
        off = _bf16_program(a.to("tpu"), b.to("tpu")).cpu()
    torch.testing.assert_close(off, expected, atol=0, rtol=0)
    torch.testing.assert_close(compiled(a.to("tpu"), b.to("tpu")).cpu(), expected, atol=0, rtol=0)
    tm.reset()
    with torch.backends.tpu.flags(allow_excess_precision=True):
        assert torch.backends.tpu.allow_excess_precision is True
        with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE):
            on = _bf16_program(a.to("tpu"), b.to("tpu")).cpu()
    assert torch.backends.tpu.allow_excess_precision is False
    # The programs under the other setting are other executables...
    assert tm.metrics()["compiles"] + tm.metrics()["disk_hits"] >= 1
    # ...and XLA's CPU compiler rounds each bf16 op either way, so here the
    # values stay CPU's (on TPU and GPU they may differ in the last bits).
    torch.testing.assert_close(on, expected, atol=0, rtol=0)


def test_allow_excess_precision_takes_a_bool_and_its_default_from_the_environment():
    with pytest.raises(TypeError, match="allow_excess_precision must be a bool, got int"):
        torch.backends.tpu.allow_excess_precision = 1
    r = subprocess.run([sys.executable, "-c", "import torch, torch_tpu; "
                        "print(torch.backends.tpu.allow_excess_precision)"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, TORCH_TPU_ALLOW_EXCESS_PRECISION="1"))
    assert r.stdout.strip() == "True", r.stdout + r.stderr[-2000:]
