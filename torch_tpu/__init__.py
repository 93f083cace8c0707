"""torch_tpu: a PyTorch backend for TPUs and other XLA devices.

``import torch`` loads it through the ``torch.backends`` entry point; with
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``, ``import torch_tpu`` does.
"""

import atexit
import os
import sys

import torch

from . import _C  # noqa: F401  (registers the device: allocator, guard, hooks, kernels)
from ._env import env

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


def _keep_tied_parameters_on_conversion():
    """Module.to("tpu") (and back) keeps shared parameters shared.

    nn.Module._apply converts a parameter in place (``param.data = ...``)
    only between in-tree dense backends; for any other device it makes a
    new Parameter per module, so weights tied across modules (embeddings and
    LM heads) would come apart. Conversions that involve tpu therefore use
    PyTorch's swap path (torch.utils.swap_tensors, the future default),
    which keeps each Parameter object and so every tie; where a parameter
    cannot be swapped, the ordinary path runs.
    """
    import functools

    def wrap(method, target_device):
        @functools.wraps(method)
        def converted(self, *args, **kwargs):
            device = target_device(*args, **kwargs)
            involves_tpu = (device is not None and torch.device(device).type == "tpu") or any(
                p.device.type == "tpu" for p in self.parameters())
            if not involves_tpu or torch.__future__.get_swap_module_params_on_conversion():
                return method(self, *args, **kwargs)
            torch.__future__.set_swap_module_params_on_conversion(True)
            try:
                return method(self, *args, **kwargs)
            except RuntimeError as e:
                if "Couldn't swap" not in str(e):
                    raise
                torch.__future__.set_swap_module_params_on_conversion(False)
                return method(self, *args, **kwargs)
            finally:
                torch.__future__.set_swap_module_params_on_conversion(False)

        converted._torch_tpu_wrapped = True
        return converted

    module = torch.nn.Module
    if not getattr(module.to, "_torch_tpu_wrapped", False):
        module.to = wrap(module.to, lambda *a, **k: torch._C._nn._parse_to(*a, **k)[0])
    if hasattr(module, "tpu") and not getattr(module.tpu, "_torch_tpu_wrapped", False):
        module.tpu = wrap(module.tpu, lambda *a, **k: "tpu")
    if not getattr(module.cpu, "_torch_tpu_wrapped", False):
        module.cpu = wrap(module.cpu, lambda *a, **k: "cpu")


_keep_tied_parameters_on_conversion()
from ._dynamo import mark_dynamic  # noqa: E402,F401
from ._modes import (  # noqa: E402,F401
    EagerMode, cpu_fallback_mode, eager_mode, get_eager_mode, is_materialized, set_eager_mode,
    synchronize,
)

from . import distributed as _distributed  # noqa: E402

_distributed._register()

if env.cpu_fallback == "1":
    _C._set_cpu_fallback(True)

if env.launch_blocking == "1":
    set_eager_mode(EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING)
elif env.defer_and_fuse == "1":
    set_eager_mode(EagerMode.DEFER_AND_FUSE)

__all__ = [
    "EagerMode", "Precision", "cpu_fallback_mode", "eager_mode", "get_eager_mode", "is_materialized",
    "mark_dynamic", "precision",
    "set_eager_mode", "synchronize",
]
