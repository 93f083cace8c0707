"""Hugging Face Accelerate (its public Accelerator) picks the tpu device by
itself, one process and two under torchrun, and trains as on the CPU:
gradient accumulation, a scheduler, save_state / load_state, bf16 mixed
precision. Each run is a child process (Accelerate's state is per process)."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("accelerate")

pytestmark = pytest.mark.strict_pass("the scripts run in processes of their own")

SCRIPT = os.path.join(os.path.dirname(__file__), "accelerate_train.py")


def _run(tmp_path, name, *args, nproc=1):
    state = tmp_path / name
    if nproc == 1:
        cmd = [sys.executable, SCRIPT]
    else:
        # --standalone: a free port of its own (--master-port 0 hangs torchrun's workers).
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", str(nproc), SCRIPT]
    result = tmp_path / f"{name}-result"
    r = subprocess.run(cmd + ["--state-dir", str(state), "--result", str(result), *args],
                       capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    rows = [json.loads((tmp_path / f"{name}-result.rank{rank}.json").read_text())
            for rank in range(nproc)]
    assert [row["rank"] for row in rows] == list(range(nproc))
    return rows


def _check_same_training(tpu, cpu, rtol):
    assert tpu["device"].startswith("tpu") and tpu["param_device"] == tpu["device"]
    assert tpu["batch_device"] == tpu["device"]
    assert cpu["device"].startswith("cpu")
    for key in ("losses", "again"):
        for i, (t, c) in enumerate(zip(tpu[key], cpu[key], strict=True)):
            assert abs(t - c) <= rtol * abs(c) + 1e-6, f"{key}[{i}]: tpu {t}, cpu {c}"
    # load_state put the model, optimizer, scheduler and RNG back at the
    # middle: the second half trains again to the same losses.
    half = len(tpu["losses"]) // 2
    assert tpu["again"] == pytest.approx(tpu["losses"][half:], rel=1e-6)


@pytest.mark.parametrize("precision,rtol", [("no", 1e-5), ("bf16", 2e-2)])
def test_accelerator_picks_tpu_and_trains_as_on_cpu(tmp_path, precision, rtol):
    tpu, = _run(tmp_path, "tpu", "--mixed-precision", precision)
    cpu, = _run(tmp_path, "cpu", "--cpu", "--mixed-precision", precision)
    assert tpu["distributed_type"] == "DistributedType.NO" and tpu["device"] == "tpu:0"
    assert tpu["mixed_precision"] == precision
    _check_same_training(tpu, cpu, rtol)


def test_accelerator_under_torchrun_uses_tpu_dist(tmp_path):
    tpu = _run(tmp_path, "tpu", nproc=2)
    cpu = _run(tmp_path, "cpu", "--cpu", nproc=2)
    for rank, (t, c) in enumerate(zip(tpu, cpu)):
        assert t["device"] == f"tpu:{rank}" and t["num_processes"] == 2
        assert t["distributed_type"] == "DistributedType.MULTI_CPU"  # DDP without device_ids
        _check_same_training(t, c, 1e-5)
    # The gathered losses are the same on both ranks.
    assert tpu[0]["losses"] == tpu[1]["losses"]
