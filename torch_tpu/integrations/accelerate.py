"""Hugging Face Accelerate picks its device from a fixed list (CUDA, MPS,
XPU, NPU, ...) and otherwise the CPU. With this adapter, installed when
``accelerate.state`` is first imported:

- one process: ``Accelerator()`` (and ``PartialState().default_device``)
  gives ``tpu`` where the fixed list found no accelerator;
- under ``torchrun`` / ``accelerate launch`` (``LOCAL_RANK`` set) with no
  other accelerator: the process group is ``cpu:gloo,tpu:tpu_dist``,
  Accelerate's multi-process CPU path does the rest (DDP without
  ``device_ids``), and each process's device is ``tpu:LOCAL_RANK``.

``Accelerator(cpu=True)`` and ``ACCELERATE_TORCH_DEVICE`` still decide as
before."""

import os

import torch

_BACKEND = "cpu:gloo,tpu:tpu_dist"


def _tpu_usable() -> bool:
    return torch.backends.tpu.is_available()


def install(state) -> None:
    partial = state.PartialState
    if getattr(partial, "_torch_tpu_adapted", False):
        return
    DistributedType = state.DistributedType
    default_device = partial.default_device
    prepare_backend = partial._prepare_backend
    set_device = partial.set_device

    def tpu_default_device(self) -> torch.device:
        device = default_device.fget(self)
        if device.type == "cpu" and _tpu_usable():
            return torch.device("tpu", torch.tpu.current_device())
        return device

    tpu_default_device.__doc__ = default_device.__doc__

    def tpu_prepare_backend(self, cpu=False, sagemaker_dp=False, backend=None):
        chosen, distributed_type = prepare_backend(self, cpu, sagemaker_dp, backend)
        launched = int(os.environ.get("LOCAL_RANK", -1)) != -1
        if (distributed_type == DistributedType.NO and chosen is None and not cpu and launched
                and _tpu_usable()):
            self._torch_tpu_dist = True
            return backend or _BACKEND, DistributedType.MULTI_CPU
        return chosen, distributed_type

    def tpu_set_device(self):
        if self.device is None and self.__dict__.get("_torch_tpu_dist", False):
            self.device = torch.device("tpu", self.local_process_index % torch.tpu.device_count())
            torch.tpu.set_device(self.device)
            return
        set_device(self)

    partial.default_device = property(tpu_default_device)
    partial._prepare_backend = tpu_prepare_backend
    partial.set_device = tpu_set_device
    partial._torch_tpu_adapted = True
