"""The f32 matmul precision of TPU matrix units, per thread."""

import contextlib
import enum
import warnings

from .. import _C

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
