"""The ``tpu_dist`` process-group backend.

``torch.distributed.init_process_group(backend="tpu_dist")`` (or
``"cpu:gloo,tpu:tpu_dist"``) gives a C++ ``c10d::Backend`` for tpu tensors,
so DDP, FSDP2, DTensor and functional collectives work unchanged, one
process per device, launched with ``torchrun``.

Engines (``TORCH_TPU_DIST_ENGINE``):
- ``host``: each collective moves its tensors through the host and runs
  with PyTorch's Gloo backend, built here on the group's own store. This is
  the engine for plugins that cannot run collectives across processes
  (XLA's CPU plugin).
- ``xla``: collectives as StableHLO ops in compiled programs on a
  multi-process PJRT client (TPU and GPU plugins) -- not available yet.
"""

import torch
import torch.distributed as dist

from . import _C
from ._env import env

BACKEND = "tpu_dist"


def _engine() -> str:
    choice = env.dist_engine or "host"
    if choice not in ("host", "xla"):
        raise ValueError(f"TORCH_TPU_DIST_ENGINE={choice!r}: expected 'host' or 'xla'")
    if choice == "xla":
        raise NotImplementedError(
            "tpu_dist: the XLA collective engine is not available in this build; "
            "use TORCH_TPU_DIST_ENGINE=host")
    return choice


def _create_backend(opts, backend_options=None):
    """Called by c10d for each process group that uses tpu_dist."""
    _engine()
    store = dist.PrefixStore(f"{BACKEND}/host/", opts.store)
    host = dist.ProcessGroupGloo(store, opts.group_rank, opts.group_size, opts.timeout)
    return _C._TpuDistBackend(host, opts.group_rank, opts.group_size)


def _register() -> None:
    if not dist.is_available() or BACKEND in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["tpu"])
