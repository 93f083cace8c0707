"""``torch.backends.tpu``: the backend's global switches, in the style of
``torch.backends.cuda`` / ``torch.backends.mps``.

Libraries that look for a TPU backend read ``torch.backends.tpu.is_available()``
the way they read ``torch.backends.mps.is_available()``.
"""

from __future__ import annotations

import contextlib
import sys
import types

import torch

from . import _C


def is_built() -> bool:
    """Whether PyTorch has the tpu backend: true once torch_tpu is loaded."""
    return True


def is_available() -> bool:
    """Whether a tpu device can be used (a PJRT plugin loads and has a device)."""
    return torch.tpu.is_available()


class _BackendModule(types.ModuleType):
    """Module with properties, so that ``torch.backends.tpu.allow_excess_precision = x``
    is a switch, as ``torch.backends.cudnn.benchmark`` is."""

    @property
    def allow_excess_precision(self) -> bool:
        """Whether XLA may keep a bfloat16/float16 intermediate of one program
        (a Fused Eager batch, a compiled graph) at higher precision instead of
        rounding it after every op as PyTorch does. Off by default, so results
        match PyTorch's CPU and CUDA eager ops; on, the TPU and GPU compilers
        drop those rounding steps (often faster, slightly different values).
        Programs compiled under each setting are cached apart. Default from
        ``TORCH_TPU_ALLOW_EXCESS_PRECISION``."""
        return _C._allow_excess_precision()

    @allow_excess_precision.setter
    def allow_excess_precision(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"torch.backends.tpu.allow_excess_precision must be a bool, got "
                            f"{type(value).__name__}")
        # Ops recorded under the old setting compile under it.
        if torch.tpu.is_initialized():
            torch.tpu.synchronize()
        _C._set_allow_excess_precision(value)


@contextlib.contextmanager
def flags(allow_excess_precision: bool | None = None):
    """Set the switches for a block and restore them after it, like
    ``torch.backends.cudnn.flags``."""
    module = sys.modules[__name__]
    old = module.allow_excess_precision
    if allow_excess_precision is not None:
        module.allow_excess_precision = allow_excess_precision
    try:
        yield
    finally:
        module.allow_excess_precision = old


sys.modules[__name__].__class__ = _BackendModule


def _install() -> None:
    """Make this module ``torch.backends.tpu`` (``import torch.backends.tpu`` too)."""
    module = sys.modules[__name__]
    sys.modules["torch.backends.tpu"] = module
    torch.backends.tpu = module
