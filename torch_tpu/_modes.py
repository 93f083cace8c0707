"""Eager execution modes and materialization helpers."""

import contextlib
import enum
from typing import Iterable, Optional

import torch

from . import _C


class EagerMode(enum.IntEnum):
    """When recorded ops run. All modes share one compilation cache."""
    DEFER_NEVER = 0                      # Strict: each op launched at once, asynchronously
    DEFER_NEVER_AND_LAUNCH_BLOCKING = 1  # Debug: each op launched and waited for
    DEFER_AND_FUSE = 2                   # Fused: ops run as one program when a value is needed


def set_eager_mode(mode: EagerMode) -> None:
    """Sets the process-wide mode (pending fused work is launched first)."""
    _C._set_eager_mode(int(EagerMode(mode)))


def get_eager_mode() -> EagerMode:
    """The calling thread's mode."""
    return EagerMode(_C._get_eager_mode())


@contextlib.contextmanager
def eager_mode(mode: EagerMode):
    """Uses `mode` on this thread inside the block."""
    prev = _C._get_thread_eager_mode()
    _C._set_thread_eager_mode(int(EagerMode(mode)))
    try:
        yield
    finally:
        _C._set_thread_eager_mode(prev)


def synchronize(tensors: Optional[Iterable[torch.Tensor]] = None, wait: bool = True) -> None:
    """Launches all recorded work; with `wait`, waits for `tensors` (or for
    everything when None) and raises a deferred error."""
    if tensors is None:
        if wait:
            _C._synchronize()
        else:
            _C._flush()
        return
    _C._materialize([t for t in tensors if t.device.type == "tpu"], wait)
    if wait:
        _C._raise_index_errors()


def is_materialized(t: torch.Tensor) -> bool:
    """False while `t` is the result of recorded ops that have not run."""
    return _C._is_materialized(t)


class cpu_fallback_mode:
    """Ops without a tpu lowering run on the CPU (one warning per op) while
    enabled; off by default, when such an op raises NotImplementedError.

    Call it to set the mode (``torch_tpu.cpu_fallback_mode(True)``) or use it
    as a context manager (``with torch_tpu.cpu_fallback_mode(True): ...``).
    """

    def __init__(self, enabled: bool = True):
        self._prev = _C._cpu_fallback_enabled()
        _C._set_cpu_fallback(bool(enabled))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_cpu_fallback(self._prev)
        return False


class index_checks:
    """Ops that take indices check them on the device and raise the error
    CPU raises (IndexError / RuntimeError) at the next read of a tpu value,
    or at the op in Debug Eager. On by default (TORCH_TPU_INDEX_CHECKS=0
    starts with them off); off, an out-of-range index is clamped or dropped
    by XLA, silently.

    Call it to set the switch (``torch_tpu.index_checks(False)``) or use it
    as a context manager (``with torch_tpu.index_checks(False): ...``);
    ``torch_tpu.index_checks.enabled()`` reads it.
    """

    def __init__(self, enabled: bool = True):
        self._prev = _C._index_checks_enabled()
        _C._set_index_checks(bool(enabled))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_index_checks(self._prev)
        return False

    @staticmethod
    def enabled() -> bool:
        return _C._index_checks_enabled()
