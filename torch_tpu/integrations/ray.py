"""Ray Train on the tpu device: ``TpuTorchConfig``.

Ray Train picks each worker's device from the Ray resources it holds (GPU,
or TPU through Ray's own TPU support, which needs a TPU VM's metadata) and
otherwise uses the CPU, so ``ray.train.torch.get_device()``,
``prepare_model`` and ``prepare_data_loader`` would keep a tpu model on the
CPU. With ``torch_config=TpuTorchConfig()`` each worker's device is
``tpu:<local rank>``: ``prepare_model`` moves the model there and wraps it
in DDP (no ``device_ids``), ``prepare_data_loader`` moves batches there, and
the process group is ``tpu_dist``::

    from ray.train import ScalingConfig
    from ray.train.torch import TorchTrainer
    from torch_tpu.integrations.ray import TpuTorchConfig

    trainer = TorchTrainer(train_loop, scaling_config=ScalingConfig(num_workers=2),
                           torch_config=TpuTorchConfig())

Built on Ray Train's torch backend and its device-manager hook, which are
not public API: tested with ray 2.60.0.
"""

from contextlib import nullcontext
from dataclasses import dataclass

import ray.train
import torch
from ray.air._internal import device_manager as _device_manager
from ray.air._internal.device_manager.torch_device_manager import TorchDeviceManager
from ray.train.torch import TorchConfig
from ray.train.torch.config import _TorchBackend

__all__ = ["TpuTorchConfig"]


class TpuDeviceManager(TorchDeviceManager):
    """A Ray Train worker's torch device: tpu:<local rank>."""

    def is_available(self) -> bool:
        return torch.backends.tpu.is_available()

    def get_devices(self):
        # Ray's local rank: the worker's LOCAL_RANK may not be set yet.
        return [torch.device("tpu", ray.train.get_context().get_local_rank())]

    def set_device(self, device) -> None:
        # The process's device is tpu:LOCAL_RANK already (one device per process).
        pass

    def supports_stream(self) -> bool:
        return False

    def get_stream_context(self, stream):
        return nullcontext()


def _use_tpu_device_manager() -> None:
    with _device_manager._torch_device_manager_lock:
        _device_manager._torch_device_manager = TpuDeviceManager()


class _TpuTorchBackend(_TorchBackend):
    def on_start(self, worker_group, backend_config):
        # Before Ray reads the device (ACCELERATE_TORCH_DEVICE, the process group).
        worker_group.execute(_use_tpu_device_manager)
        super().on_start(worker_group, backend_config)


@dataclass
class TpuTorchConfig(TorchConfig):
    """``ray.train.torch.TorchConfig`` for tpu workers: backend ``tpu_dist``
    (``"cpu:gloo,tpu:tpu_dist"`` for CPU-tensor collectives too)."""

    backend: str = "tpu_dist"

    @property
    def backend_cls(self):
        return _TpuTorchBackend
