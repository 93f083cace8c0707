"""The ``tpu_dist`` process-group backend.

``torch.distributed.init_process_group(backend="tpu_dist")`` (or
``"cpu:gloo,tpu:tpu_dist"``) gives a C++ ``c10d::Backend`` for tpu tensors,
so DDP, FSDP2, DTensor and functional collectives work unchanged, one
process per device, launched with ``torchrun``.

Engines (``TORCH_TPU_DIST_ENGINE``; unset = chosen from the plugin):
- ``xla`` (TPU and GPU plugins): each collective is a StableHLO collective
  in a program compiled for the group's devices, on the multi-process PJRT
  client that torch_tpu creates under torchrun (its key-value store is
  torchrun's store). On XLA's CPU plugin it runs only single-process groups.
- ``host`` (the CPU plugin): each collective moves its tensors through the
  host and runs with PyTorch's Gloo backend, built here on the group's own
  store; the CPU plugin cannot run collectives across processes.
"""

import torch
import torch.distributed as dist

from .. import _C
from .._env import env

BACKEND = "tpu_dist"


def _engine(group_size: int = 1) -> str:
    choice = env.dist_engine
    if choice not in (None, "", "host", "xla"):
        raise ValueError(f"TORCH_TPU_DIST_ENGINE={choice!r}: expected 'host' or 'xla'")
    cpu = _C._platform() == "cpu"
    if not choice:
        return "host" if cpu else "xla"
    if choice == "xla" and cpu and group_size > 1:
        raise RuntimeError(
            "tpu_dist: TORCH_TPU_DIST_ENGINE=xla needs a plugin that runs collectives across "
            "processes; XLA's CPU plugin cannot. Use TORCH_TPU_DIST_ENGINE=host (the default "
            "on the CPU plugin).")
    return choice


def _create_backend(opts, backend_options=None):
    """Called by c10d for each process group that uses tpu_dist."""
    # The fingerprint check (TORCH_TPU_DIST_CHECK, on unless "0"): before each
    # collective the ranks compare what they are about to run through the
    # store, so that diverging ranks raise instead of hanging.
    check = None
    if env.dist_check != "0" and opts.group_size > 1:
        check = dist.PrefixStore(f"{BACKEND}/check/", opts.store)
    if _engine(opts.group_size) == "xla":
        store = dist.PrefixStore(f"{BACKEND}/xla/", opts.store)
        return _C._TpuDistBackend(store, opts.group_rank, opts.group_size,
                                  opts.timeout.total_seconds(), check)
    store = dist.PrefixStore(f"{BACKEND}/host/", opts.store)
    host = dist.ProcessGroupGloo(store, opts.group_rank, opts.group_size, opts.timeout)
    return _C._TpuDistBackend(host, opts.group_rank, opts.group_size,
                              opts.timeout.total_seconds(), check)


def _register() -> None:
    if not dist.is_available() or BACKEND in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["tpu"])
