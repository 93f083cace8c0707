"""torch_tpu: a PyTorch backend for TPUs and other XLA devices.

``import torch`` loads it through the ``torch.backends`` entry point; with
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``, ``import torch_tpu`` does.
"""

import os
import sys

import torch

from . import _C  # noqa: F401  (registers the device: allocator, guard, hooks, kernels)
from ._env import env

_C._configure(env.plugin_path, env.platform, [p for p in sys.path if p and os.path.isdir(p)])

if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")

from . import tpu as _tpu_module  # noqa: E402

torch._register_device_module("tpu", _tpu_module)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)

from .tpu import Precision, precision  # noqa: E402,F401

__all__ = ["Precision", "precision"]
