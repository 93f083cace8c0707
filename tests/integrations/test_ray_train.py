"""Ray Train: TorchTrainer with two CPU workers, each training on its tpu
device through torch_tpu.integrations.ray.TpuTorchConfig (tpu_dist, DDP via
prepare_model, batches via prepare_data_loader), a checkpoint reported and
training resumed from it; the same steps uninterrupted with Ray's stock
Gloo config on the CPU give the same losses and weights. Ray's local cluster is started here
and shut down after."""

import os
import sys

import pytest
import torch

ray = pytest.importorskip("ray")
pytest.importorskip("ray.train")

pytestmark = pytest.mark.strict_pass("Ray's workers are processes of their own")


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray")
    here = os.path.dirname(os.path.abspath(__file__))
    env = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
           # the workers import the loop module by name
           "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    sys.path.insert(0, here)
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(root / "session"),
             log_to_driver=False, runtime_env={"env_vars": {
                 k: v for k, v in os.environ.items() if k.startswith("TORCH_TPU_")}})
    try:
        yield root
    finally:
        ray.shutdown()
        sys.path.remove(here)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _fit(root, name, torch_config, steps, resume_from=None):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from ray_loop import train_loop

    trainer = TorchTrainer(
        train_loop, train_loop_config={"steps": steps,
                                       "resume": resume_from.path if resume_from else None},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        torch_config=torch_config,
        run_config=RunConfig(storage_path=str(root / "results"), name=name))
    result = trainer.fit()
    assert result.error is None, result.error
    return result


def test_torch_trainer_trains_on_tpu_as_gloo_on_cpu_and_resumes(ray_cluster):
    from ray.train.torch import TorchConfig

    from torch_tpu.integrations.ray import TpuTorchConfig

    # tpu: 3 steps, then resumed from its checkpoint for 2 more; the CPU
    # (Ray's stock Gloo config): the 5 steps uninterrupted. SGD keeps no
    # state besides the weights, so the two runs must agree step by step.
    tpu = _fit(ray_cluster, "tpu", TpuTorchConfig(), steps=3)
    cpu = _fit(ray_cluster, "cpu", TorchConfig(backend="gloo"), steps=5)
    assert {k: tpu.metrics[k] for k in ("device", "backend", "model", "param_device",
                                         "batch_devices", "in_sync")} == {
        "device": "tpu:0", "backend": "tpu_dist", "model": "DistributedDataParallel",
        "param_device": "tpu:0", "batch_devices": ["tpu:0"], "in_sync": True}
    assert cpu.metrics["device"] == "cpu" and cpu.metrics["in_sync"]
    tpu2 = _fit(ray_cluster, "tpu2", TpuTorchConfig(), steps=2, resume_from=tpu.checkpoint)
    assert tpu2.metrics["in_sync"]
    torch.testing.assert_close(tpu.metrics["rank0_losses"] + tpu2.metrics["rank0_losses"],
                               cpu.metrics["rank0_losses"], rtol=1e-5, atol=1e-6)
    with tpu2.checkpoint.as_directory() as d:
        state = torch.load(os.path.join(d, "state.pt"))
    with cpu.checkpoint.as_directory() as d:
        expected = torch.load(os.path.join(d, "state.pt"))
    assert state["step"] == expected["step"] == 5
    for k, v in expected["model"].items():
        torch.testing.assert_close(state["model"][k], v, rtol=1e-5, atol=1e-6)
