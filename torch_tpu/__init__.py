"""torch_tpu: a PyTorch backend for TPUs and other XLA devices.

``import torch`` loads it through the ``torch.backends`` entry point; with
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``, ``import torch_tpu`` does.
"""

import atexit
import os
import sys

import torch

from ._env import env

if env.extension:
    # Another build of the extension (the sanitizer build): loaded under the
    # package's name before `from . import _C` would find the package's own.
    import importlib.util as _util

    _spec = _util.spec_from_file_location(__name__ + "._C", env.extension)
    _ext = _util.module_from_spec(_spec)
    sys.modules[_spec.name] = _ext
    _spec.loader.exec_module(_ext)
from . import _C  # noqa: E402, F401  (registers the device: allocator, guard, hooks, kernels)

_C._configure(env.plugin_path, env.platform, [p for p in sys.path if p and os.path.isdir(p)])


def _cache_dir() -> str:
    value = env.compilation_cache_dir
    if value.lower() in ("off", "0", "none", "false"):
        return ""
    if value:
        return os.path.abspath(os.path.expanduser(value))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch_tpu")


_C._configure_cache(_cache_dir())


def _program_name() -> str:
    """What names this program's start-up manifest: the script's real path,
    or what Python was given instead (``-c``, ``-m`` runs name their module's
    file; an interactive session has '')."""
    argv = getattr(sys, "argv", None) or [""]
    name = argv[0] or ""
    return os.path.realpath(name) if name and os.path.isfile(name) else name


_C._configure_cache_prefetch(_program_name(), env.cache_prefetch not in ("0", "off", "false"))
atexit.register(_C._cache_shutdown)
_C._set_max_pending_ops(int(env.max_pending_ops))

if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")

from . import tpu as _tpu_module  # noqa: E402

torch._register_device_module("tpu", _tpu_module)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)

from .tpu import Precision, precision  # noqa: E402,F401
from . import backends as _backends  # noqa: E402

_backends._install()


def _wrap_set_float32_matmul_precision():
    """tpu f32 matmuls run at DEFAULT (one bf16 pass, "medium") until the
    program calls torch.set_float32_matmul_precision; from then on they
    follow torch's setting ("medium"/"high"/"highest")."""
    import functools

    original = torch.set_float32_matmul_precision
    if getattr(original, "_torch_tpu_wrapped", False):
        return

    @functools.wraps(original)
    def set_float32_matmul_precision(precision: str) -> None:
        original(precision)
        _C._set_follow_torch_precision(True)

    set_float32_matmul_precision._torch_tpu_wrapped = True
    torch.set_float32_matmul_precision = set_float32_matmul_precision


_wrap_set_float32_matmul_precision()


from . import _dynamo  # noqa: E402
from ._dynamo import mark_dynamic  # noqa: E402,F401
from ._modes import (  # noqa: E402,F401
    EagerMode, cpu_fallback_mode, eager_mode, get_eager_mode, index_checks, is_materialized,
    set_eager_mode, synchronize,
)

from . import distributed as _distributed  # noqa: E402

_distributed._register()

from . import integrations as _integrations  # noqa: E402

_integrations.install()
_integrations.when_imported("torch._dynamo.variables.optimizer",
                            _dynamo.backend.make_optimizers_capturable)

# torch.autocast("tpu") casts to bfloat16 unless told otherwise: the low
# precision a TPU's matrix unit takes (CUDA's default, float16, is a GPU's).
torch.set_autocast_dtype("tpu", torch.bfloat16)

from . import _logging  # noqa: E402

_logging._from_env(env.logs, env.slow_compile_seconds)

if env.cpu_fallback == "1":
    _C._set_cpu_fallback(True)

if env.launch_blocking == "1":
    set_eager_mode(EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING)
elif env.defer_and_fuse == "1":
    set_eager_mode(EagerMode.DEFER_AND_FUSE)

__all__ = [
    "EagerMode", "Precision", "cpu_fallback_mode", "eager_mode", "get_eager_mode", "index_checks",
    "is_materialized", "mark_dynamic", "precision",
    "set_eager_mode", "synchronize",
]
