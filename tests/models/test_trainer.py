"""End to end: a small GPT trained as public trainer scripts train it
(tests/models/trainer_script.py: bf16 autocast, gradient accumulation,
clip_grad_norm_, cosine LR, dropout, checkpoints), and resumed in a fresh
process from a checkpoint it saved halfway. The resumed run's losses equal
the uninterrupted run's,
bit for bit, and follow the same run on CPU within bf16 tolerance."""

import json
import os
import subprocess
import sys

import pytest

import torch_tpu

SCRIPT = os.path.join(os.path.dirname(__file__), "trainer_script.py")
STEPS, EVERY = 6, 3


def _run(*args, device="tpu"):
    out = subprocess.run([sys.executable, SCRIPT, "--device", device, "--steps", str(STEPS),
                          "--ckpt-every", str(EVERY), *args],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compile"])
def test_resumed_run_equals_uninterrupted_run(tmp_path, compiled):
    if compiled and torch_tpu.get_eager_mode() != torch_tpu.EagerMode.DEFER_NEVER:
        pytest.skip("torch.compile runs the same programs in every eager mode")
    extra = ["--compile"] if compiled else []
    # The uninterrupted run saves a checkpoint at step EVERY and goes on; a
    # fresh process resumes from that checkpoint.
    full = _run("--ckpt-dir", str(tmp_path / "full"), *extra)
    rest = _run("--ckpt-dir", str(tmp_path / "rest"), "--resume-from",
                str(tmp_path / "full" / f"step-{EVERY}.pt"), *extra)
    assert rest["losses"] == full["losses"][EVERY:], (rest, full)  # bit-equal
    assert rest["lr"] == full["lr"] and rest["step"] == STEPS

    cpu = _run("--ckpt-dir", str(tmp_path / "cpu"), device="cpu")
    for got, want in zip(full["losses"], cpu["losses"]):
        assert abs(got - want) <= 0.03 * abs(want), (full["losses"], cpu["losses"])
    assert full["losses"][-1] < full["losses"][0]  # it learns
