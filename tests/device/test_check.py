"""`python -m torch_tpu.check --quick`: the accelerator check, end to end on
the CPU plugin (its correctness checks and its speed table)."""

import subprocess
import sys

import pytest



@pytest.mark.strict_pass("the check sets each mode itself")
def test_check_command_quick():
    r = subprocess.run([sys.executable, "-m", "torch_tpu.check", "--quick"], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    out = r.stdout
    assert "FAIL" not in out
    for line in ("ops in Strict Eager", "ops in Fused Eager", "ops in Debug Eager",
                 "torch.compile(backend='tpu')", "GPT training, 3 AdamW steps",
                 "matmul 512x512 bf16, TFLOP/s", "matmul 512x512 f32, TFLOP/s",
                 "GPT step Strict, steps/s", "GPT step Fused, steps/s", "GPT step compiled, steps/s",
                 "GPT step compiled, first step s"):
        assert line in out, line
    assert "checks passed" in out
