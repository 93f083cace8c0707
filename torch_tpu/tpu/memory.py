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


def _format_size(n: int) -> str:
    # The units of torch.cuda.memory_summary.
    for unit in ("B  ", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 * 10 or unit == "TiB":
            return f"{n:6d} {unit}"
        n //= 1024
    return f"{n:6d} PiB"


def memory_summary(device: _Device = None, abbreviated: bool = False) -> str:
    """The memory figures in torch.cuda.memory_summary's table. PJRT owns
    device memory and torch_tpu caches none, so reserved equals allocated
    and nothing is inactive; the plugin's own figures follow the table."""
    stats = memory_stats(device)
    idx = _index(device)
    cur = stats["allocated_bytes.all.current"]
    peak = stats["allocated_bytes.all.peak"]
    width = 75
    lines = [
        "=" * width,
        " {:<21} | {:^50} ".format("PyTorch tpu memory summary, device ID " + str(idx), ""),
        "-" * width,
        "  PJRT owns the device memory; no blocks are cached, so reserved = allocated.  ",
        "=" * width,
        "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
        "-" * width,
    ]
    for name in ("Allocated memory", "Active memory", "Requested memory", "GPU reserved memory"):
        label = name.replace("GPU", "TPU")
        lines.append(f"{label:<23}| {_format_size(cur)} | {_format_size(peak)} | "
                     f"{'':>10} | {'':>10} ")
        lines.append("-" * width)
    lines.append(f"{'Non-releasable memory':<23}| {_format_size(0)} | {_format_size(0)} | "
                 f"{'':>10} | {'':>10} ")
    lines.append("-" * width)
    lines.append(f"{'Allocations':<23}| {stats.get('allocation.all.current', 0):10d} | "
                 f"{'':>10} | {'':>10} | {'':>10} ")
    lines.append("=" * width)
    plugin = [(k, v) for k, v in stats.items() if k.startswith("device.")]
    if plugin:
        lines.append(" Plugin figures (PJRT_Device_MemoryStats):")
        for k, v in plugin:
            lines.append(f"   {k[len('device.'):]:<30} {_format_size(int(v))}")
        lines.append("=" * width)
    return "\n".join(lines) + "\n"


def _record_memory_history(enabled: str | None = "all", context: str | None = "all",
                           stacks: str = "all", max_entries: int = 100000,
                           device: _Device = None) -> None:
    """Records every tpu storage made and freed, with the stack that made it
    (``torch.cuda.memory._record_memory_history``'s arguments: ``enabled``
    None stops recording and drops what was recorded; ``stacks`` "python"
    or "all" (with C++ frames); ``max_entries`` events kept)."""
    _index(device)
    if enabled not in (None, "state", "all"):
        raise ValueError(f"enabled must be None, 'state' or 'all', not {enabled!r}")
    _C._record_memory_history(enabled is not None, stacks,
                              0 if enabled == "state" else int(max_entries))


def _snapshot(device: _Device = None) -> dict:
    """Live tpu storages (``segments``, each with its block and the stack
    that made it) and the recorded events (``device_traces``), in the layout
    of ``torch.cuda.memory._snapshot()``."""
    _index(device)
    return _C._memory_snapshot()


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickles ``_snapshot()`` to ``filename``, which
    https://pytorch.org/memory_viz (torch/cuda/_memory_viz.py) opens."""
    import pickle

    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)
