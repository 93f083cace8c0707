"""tpu_dist under torchrun on the CPU plugin (host engine): every collective
with 2 and 4 processes, and DDP against a single-process reference in Strict,
Fused and Debug Eager. Each run is bounded by a timeout."""

import os
import subprocess
import sys

import pytest
import torch

import torch_tpu

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = pytest.mark.skipif(
    torch_tpu.get_eager_mode() != torch_tpu.EagerMode.DEFER_NEVER,
    reason="multi-process runs choose their eager mode themselves; they run in the Strict pass")


# The eager mode a launched process starts in.
MODE_ENV = {"strict": {}, "fused": {"TORCH_TPU_DEFER_AND_FUSE": "1"},
            "debug": {"TORCH_TPU_LAUNCH_BLOCKING": "1"}}


def torchrun(script, nproc, env_extra=None, timeout=300, args=()):
    env = dict(os.environ, OMP_NUM_THREADS="1", **(env_extra or {}))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={nproc}", os.path.join(HERE, script), *args]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
    return p.stdout


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_xla_engine_runs_every_collective_single_process(mode):
    # The XLA engine's data path (tensor -> program on the plugin -> tensor,
    # list forms, uneven all_to_all, Work) on a one-process group: the CPU
    # plugin runs no collective across processes (the programs themselves
    # are checked on several devices by tests/distributed/test_dist_lowering.py).
    env = dict(TORCH_TPU_DIST_ENGINE="xla", **MODE_ENV[mode])
    out = torchrun("collectives.py", 1, env)
    assert "collectives ok (xla engine)" in out


def test_xla_engine_refuses_multiprocess_on_cpu_plugin():
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_TPU_DIST_ENGINE="xla")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           os.path.join(HERE, "collectives.py")]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert "XLA's CPU plugin cannot" in p.stdout + p.stderr


def test_backend_is_registered():
    assert "tpu_dist" in torch.distributed.Backend.backend_list
    assert torch.distributed.Backend.default_device_backend_map.get("tpu") == "tpu_dist"


@pytest.mark.parametrize("nproc", [2, 4])
def test_collectives(nproc):
    out = torchrun("collectives.py", nproc)
    assert out.count("collectives ok") == nproc


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_ddp_matches_single_process(mode):
    out = torchrun("ddp.py", 2, MODE_ENV[mode])
    assert out.count("ddp ok") == 2


def test_unknown_engine_is_an_error():
    code = ("import os; os.environ['TORCH_TPU_DIST_ENGINE'] = 'nccl'\n"
            "import torch, torch_tpu, torch.distributed as dist\n"
            "try:\n"
            "    dist.init_process_group('tpu_dist', store=dist.HashStore(), rank=0, world_size=1)\n"
            "except ValueError as e:\n"
            "    print('raised', e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "raised" in p.stdout and "expected 'host' or 'xla'" in p.stdout, p.stderr[-2000:]


@pytest.mark.parametrize("nproc", [2, 4])
def test_fsdp2_and_dtensor(nproc):
    # 4 processes add the 2 x 2 device mesh.
    out = torchrun("fsdp_dtensor.py", nproc, timeout=420)
    assert out.count("fsdp dtensor ok") == nproc


def test_distributed_checkpoint_ddp_and_fsdp2(tmp_path):
    # torch.distributed.checkpoint through tpu_dist: save, load into a fresh
    # model and optimizer, and the next losses equal the saving run's.
    out = torchrun("checkpoint.py", 2, timeout=420, args=(str(tmp_path),))
    assert out.count("checkpoint ddp ok") == 2 and out.count("checkpoint fsdp ok") == 2, out


def test_device_index_is_local_rank_under_torchrun():
    code = ("import torch, torch_tpu\n"
            "assert torch.tpu.device_count() == 3 and torch.tpu.current_device() == 2\n"
            "assert torch.ones(1, device='tpu').device == torch.device('tpu', 2)\n"
            "assert torch.ones(1).to('tpu:2').device.index == 2\n"
            "try:\n"
            "    torch.tpu.set_device(0)\n"
            "except RuntimeError as e:\n"
            "    assert 'not this process' in str(e)\n"
            "    print('ok')\n")
    env = dict(os.environ, LOCAL_RANK="2", LOCAL_WORLD_SIZE="3")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "ok" in p.stdout, p.stderr[-3000:]


def test_collectives_in_compiled_graphs():
    out = torchrun("compiled.py", 2)
    assert out.count("compiled collectives ok") == 2


def launch_direct(case, extra_env=None):
    """Two ranks started directly (torchrun's agent would stop the others)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2", **(extra_env or {}))
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "failures.py"), case],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return [p.communicate(timeout=180) + (p.returncode,) for p in procs]


def test_dead_rank_makes_the_others_raise():
    (out0, err0, rc0), (_, _, rc1) = launch_direct("dead")
    assert rc1 == 3
    assert rc0 == 0 and "rank 0: raised" in out0, out0 + err0[-3000:]
    # within the timeout of the group the collective ran in (5 s), not the
    # default group's (60 s)
    assert "timeout of 5 s" in out0, out0


def test_diverging_ranks_raise_on_every_rank():
    # tpu_dist's own check: a fingerprint exchange through the store.
    results = launch_direct("diverge")
    for r, (out, err, rc) in enumerate(results):
        assert rc == 0 and f"rank {r}: raised" in out and "running different collectives" in out, \
            out + err[-3000:]


def test_diverging_ranks_raise_with_torch_debug_detail():
    results = launch_direct("diverge", {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "TORCH_TPU_DIST_CHECK": "0"})
    for r, (out, err, rc) in enumerate(results):
        assert rc == 0 and f"rank {r}: raised" in out and "mismatch between collectives" in out, \
            out + err[-3000:]
