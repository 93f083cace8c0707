"""Device memory: live and peak bytes of tpu tensors, the plugin's figures,
the per-process limit (``torch.cuda.memory``'s API)."""

import torch

from .. import _C
from ._device import _Device, _index, _lazy_init

# Figures are the bytes of live PJRT buffers held by tpu tensors (current
# and peak), and what the plugin reports for the device.

def memory_stats(device: _Device = None) -> dict:
    _index(device)
    _lazy_init()
    return dict(_C._memory_stats())


def memory_allocated(device: _Device = None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: _Device = None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: _Device = None) -> int:
    # PJRT owns device memory; what it holds for us is what we allocated.
    return memory_allocated(device)


def max_memory_reserved(device: _Device = None) -> int:
    return max_memory_allocated(device)


def reset_peak_memory_stats(device: _Device = None) -> None:
    _index(device)
    _C._reset_peak_memory_stats()


def empty_cache() -> None:
    """Nothing is cached: a buffer is freed when its last tensor dies."""


def set_per_process_memory_fraction(fraction: float, device: _Device = None) -> None:
    """Limits this process's tpu memory to `fraction` of the device's total
    (physical memory on the CPU plugin). An allocation past the limit raises
    torch.OutOfMemoryError, as on CUDA."""
    _index(device)
    _lazy_init()
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(fraction)


def get_per_process_memory_fraction(device: _Device = None) -> float:
    _index(device)
    _lazy_init()
    return _C._memory_fraction()


def mem_get_info(device: _Device = None):
    """(free, total) bytes for this process on the device."""
    _index(device)
    _lazy_init()
    total = _C._total_memory()
    limit = int(total * _C._memory_fraction())
    return max(limit - memory_allocated(device), 0), total
