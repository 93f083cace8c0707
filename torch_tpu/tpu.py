"""``torch.tpu``: the device module, following ``torch.cuda``'s conventions."""

import contextlib
import enum
import os
import threading
import time
import warnings
from typing import Any, Optional, Union

import torch

from . import _C

_Device = Union[torch.device, str, int, None]


# ---------------------------------------------------------------- device ----

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


# ------------------------------------------------------------------- rng ----

def _generator():
    return _C._default_generator()


def _is_in_bad_fork() -> bool:
    # The PJRT client is not fork-safe, but it is created lazily; a forked
    # child that never used the device is fine.
    return False


def manual_seed(seed: int) -> None:
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    seed()


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: _Device = "tpu") -> torch.Tensor:
    _index(device)
    return _generator().get_state()


def set_rng_state(new_state: torch.Tensor, device: _Device = "tpu") -> None:
    _index(device)
    _generator().set_state(new_state)


def get_rng_state_all():
    return [get_rng_state()]


def set_rng_state_all(new_states) -> None:
    for s in new_states:
        set_rng_state(s)


# ---------------------------------------------------------------- memory ----
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


# --------------------------------------------------------------- streams ----
# One in-order stream per device: work is ordered by data dependencies
# inside PJRT, and synchronizing waits for everything submitted.

class Stream:
    def __init__(self, device: _Device = None, priority: int = 0):
        self.device = torch.device("tpu", _index(device))
        self.priority = priority

    def synchronize(self) -> None:
        synchronize()

    def query(self) -> bool:
        return True

    def wait_stream(self, stream: "Stream") -> None:
        pass

    def wait_event(self, event: "Event") -> None:
        pass

    def record_event(self, event: Optional["Event"] = None) -> "Event":
        event = event or Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and other.device == self.device

    def __hash__(self):
        return hash(("tpu-stream", self.device))


_default_stream = None


def default_stream(device: _Device = None) -> Stream:
    global _default_stream
    if _default_stream is None:
        _default_stream = Stream(device)
    return _default_stream


def current_stream(device: _Device = None) -> Stream:
    return default_stream(device)


@contextlib.contextmanager
def stream(s: Optional[Stream]):
    yield s


class Event:
    """Marks a point in the device's work; timing waits for the work."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        self.enable_timing = enable_timing
        self._time = None

    def record(self, stream: Optional[Stream] = None) -> None:
        if self.enable_timing:
            synchronize()
        self._time = time.perf_counter()

    def synchronize(self) -> None:
        synchronize()

    def query(self) -> bool:
        return True

    def wait(self, stream: Optional[Stream] = None) -> None:
        pass

    def elapsed_time(self, end_event: "Event") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Events were not created with enable_timing=True")
        if self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._time - self._time) * 1000.0


# ------------------------------------------------------------- precision ----

class Precision(enum.IntEnum):
    """f32 matmul precision on TPU matrix units: bf16 passes per product."""
    DEFAULT = 0   # 1 pass  (torch.set_float32_matmul_precision("medium"))
    HIGH = 1      # 3 passes ("high")
    HIGHEST = 2   # 6 passes, f32-accurate ("highest")


_warned_slow_precision = False


@contextlib.contextmanager
def precision(mode: Precision):
    """Overrides the f32 matmul precision on this thread inside the block.

    HIGH and HIGHEST cost about 3x and 6x DEFAULT's matrix-unit passes on a
    TPU; choosing them warns once.
    """
    global _warned_slow_precision
    mode = Precision(mode)
    if mode != Precision.DEFAULT and not _warned_slow_precision:
        _warned_slow_precision = True
        warnings.warn(
            f"torch.tpu.precision({mode.name}): f32 matmuls will take "
            f"{3 if mode == Precision.HIGH else 6} bf16 passes on TPU matrix units, about "
            f"{3 if mode == Precision.HIGH else 6}x the cost of Precision.DEFAULT (medium); "
            "use DEFAULT unless the extra accuracy is needed.", stacklevel=3)
    prev = _C._get_precision_override()
    _C._set_precision_override(int(mode))
    try:
        yield
    finally:
        _C._set_precision_override(prev)


# ------------------------------------------------------------ statistics ----

def _get_cache_stats() -> dict:
    """Compile-cache requests, hits and per-entry compile seconds."""
    return dict(_C._cache_stats())
