"""Device selection and properties: one device per process (tpu:0, or
tpu:LOCAL_RANK under torchrun)."""

import os
from typing import Union

import torch

from .. import _C

_Device = Union[torch.device, str, int, None]

def is_available() -> bool:
    """True if a PJRT plugin loads and reports at least one device."""
    return _C._device_count() > 0


def device_count() -> int:
    """Devices this process sees (one per process by default)."""
    return _C._device_count()


def is_initialized() -> bool:
    """True once the PJRT client has been created (it is created lazily)."""
    return _C._is_initialized()


def init() -> None:
    """Creates the PJRT client now; raises with advice if no plugin is found."""
    _lazy_init()


def _lazy_init() -> None:
    if not _C._is_initialized():
        err = _C._init_error()
        if err:
            raise RuntimeError(err)


def _index(device: _Device) -> int:
    """The index `device` names, checked: each process owns one device --
    tpu:0, or tpu:LOCAL_RANK under torchrun (one device per process)."""
    own = _C._process_device()
    if device is None:
        return own
    if isinstance(device, int):
        idx = device
    else:
        device = torch.device(device)
        if device.type != "tpu":
            raise ValueError(f"Expected a tpu device, but got: {device}")
        idx = own if device.index is None else device.index
    n = device_count()
    if not 0 <= idx < max(n, 1):
        raise RuntimeError(f"Invalid device tpu:{idx}: this process sees {n} tpu device(s).")
    if idx != own:
        raise RuntimeError(
            f"tpu:{idx} is not this process's device: each process owns one device, tpu:{own} "
            "here (launch one process per device, e.g. with torchrun, and use tpu:LOCAL_RANK).")
    return idx


def current_device() -> int:
    _lazy_init()
    return _C._process_device()


def set_device(device: _Device) -> None:
    """Validates the index: each process owns exactly one device (tpu:0, or
    tpu:LOCAL_RANK under torchrun)."""
    _index(device)


class device:
    """Context manager that selects a device (validated; one per process)."""

    def __init__(self, device: _Device):
        self.idx = _index(device) if device is not None else _C._process_device()

    def __enter__(self):
        return self

    def __exit__(self, *args):
        return False


class device_of(device):
    def __init__(self, obj):
        super().__init__(obj.device if obj.device.type == "tpu" else None)


def synchronize(device: _Device = None) -> None:
    """Waits for all work submitted to the device; raises a deferred error."""
    _index(device)
    _C._synchronize()


def get_device_name(device: _Device = None) -> str:
    _index(device)
    _lazy_init()
    return _C._device_name()


def get_device_capability(device: _Device = None):
    _index(device)
    return (0, 0)


class _DeviceProperties:
    def __init__(self, name: str, total_memory: int, platform: str):
        self.name = name
        self.total_memory = total_memory
        self.platform = platform

    def __repr__(self):
        return (f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', "
                f"total_memory={self.total_memory // (1024 * 1024)}MB)")


def get_device_properties(device: _Device = None) -> _DeviceProperties:
    _index(device)
    _lazy_init()
    stats = _C._memory_stats()
    total = stats.get("device.bytes_limit", 0)
    if not total and _C._platform() == "cpu":
        # XLA's CPU device memory is host memory.
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return _DeviceProperties(_C._device_name(), int(total), _C._platform())


def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True
