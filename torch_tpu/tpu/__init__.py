"""``torch.tpu``: the device module, following ``torch.cuda``'s conventions.

Device selection and properties live in ``_device``; the generator in
``random``; memory figures in ``memory``; streams and events in
``streams``; the matmul precision override in ``_precision``.
"""

from .. import _C
from ._device import (  # noqa: F401
    is_available, device_count, is_initialized, init, _lazy_init, _index, current_device,
    set_device, device, device_of, synchronize, get_device_name, get_device_capability,
    _DeviceProperties, get_device_properties, get_amp_supported_dtype, is_bf16_supported,
)
from .random import (  # noqa: F401
    _generator, _is_in_bad_fork, manual_seed, manual_seed_all, seed, seed_all, initial_seed,
    get_rng_state, set_rng_state, get_rng_state_all, set_rng_state_all,
)
from .memory import (  # noqa: F401
    memory_stats, memory_allocated, max_memory_allocated, memory_reserved, max_memory_reserved,
    reset_peak_memory_stats, empty_cache, set_per_process_memory_fraction,
    get_per_process_memory_fraction, mem_get_info, memory_summary,
)
from .streams import (  # noqa: F401
    Stream, default_stream, current_stream, stream, Event,
)
from ._precision import (  # noqa: F401
    Precision, precision,
)
from ._device import _Device  # noqa: F401
from . import memory, random, streams  # noqa: F401,E402


def _get_cache_stats() -> dict:
    """Compile-cache requests, hits and per-entry compile seconds."""
    return dict(_C._cache_stats())
