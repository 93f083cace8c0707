"""Runs ``torchtitan.train.main`` (torchtitan 0.3.0) under torchrun, with the
few shims that torch 2.13 and a CPU-only machine need; each names what it
works around. TorchTitan chooses the device itself
(``torch._utils._get_available_device_type()``: ``tpu`` with torch_tpu
loaded) and its process-group backend from it (``tpu_dist``).

TT_REFERENCE_CPU=1 makes the CPU/Gloo reference run (run it with
TORCH_DEVICE_BACKEND_AUTOLOAD=0).
"""

import contextlib
import importlib.util
import os
import sys
import types

import torch
import torch._utils
import torch.distributed as dist
import torch.nn.functional as F

CPU = os.environ.get("TT_REFERENCE_CPU") == "1"

# 1. torchtitan 0.3.0 imports triton unconditionally
#    (models/common/moe.py -> ... -> distributed/minimal_async_ep/kernels.py);
#    the dense Llama never calls those kernels.
if importlib.util.find_spec("triton") is None:
    kernels = types.ModuleType("torchtitan.distributed.minimal_async_ep.kernels")

    def _missing(name):
        if name.startswith("__"):
            raise AttributeError(name)

        def fail(*args, **kwargs):
            raise RuntimeError(f"triton kernel {name} is not available here")

        return fail

    kernels.__getattr__ = _missing
    sys.modules[kernels.__name__] = kernels

# 2. torchtitan calls torch.distributed.set_timeout, newer than torch 2.13
#    (which has the same function as distributed_c10d._set_pg_timeout).
if not hasattr(dist, "set_timeout"):
    from torch.distributed.distributed_c10d import _set_pg_timeout

    dist.set_timeout = _set_pg_timeout

if CPU:
    torch._utils._get_available_device_type = lambda: "cpu"
    # torchtitan's memory monitor and barrier use the device module's CUDA
    # API, which torch.cpu lacks.
    torch.cpu.get_device_name = lambda device=None: "cpu"
    torch.cpu.get_device_properties = lambda device=None: types.SimpleNamespace(
        total_memory=1 << 34)
    torch.cpu.reset_peak_memory_stats = lambda device=None: None
    torch.cpu.empty_cache = lambda: None
    torch.cpu.memory_stats = lambda device=None: {}
    torch.cpu.current_device = lambda: 0

import torchtitan.distributed.compile as tt_compile  # noqa: E402
import torchtitan.distributed.utils as tt_dist_utils  # noqa: E402
import torchtitan.models.common.attention as tt_attention  # noqa: E402
from torch.nn.attention.flex_attention import create_block_mask, create_mask  # noqa: E402

# 3. FlexAttention: PyTorch 2.13 accepts only CUDA, CPU, HPU and MPS tensors
#    and has no backward on CPU (flex_attention._validate_device), so both
#    runs take torchtitan's block-causal mask dense, through SDPA: the same
#    attention, unfused.


def _dense_flex(q, k, v, *, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                return_aux=None, kernel_options=None):
    assert score_mod is None and (return_aux is None or not return_aux.lse)
    mask = None
    if block_mask is not None:
        mask = create_mask(block_mask.mask_mod, q.shape[0], None, q.shape[-2], k.shape[-2],
                           q.device)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale,
                                         enable_gqa=enable_gqa)
    return out, None


tt_attention.FlexAttention._compiled_flex_attn = staticmethod(_dense_flex)
tt_attention._compiled_create_block_mask = create_block_mask
# No flex kernel left for torchtitan's regional Inductor compile to take.
tt_attention.maybe_regional_inductor = lambda *args, **kwargs: contextlib.nullcontext()
tt_compile._maybe_regional_inductor_backend = lambda model, backend: backend
_set_determinism = tt_dist_utils.set_determinism


def _set_determinism_keeping_dense(*args, **kwargs):
    _set_determinism(*args, **kwargs)  # it puts a compiled flex kernel back
    tt_attention.FlexAttention._compiled_flex_attn = staticmethod(_dense_flex)


tt_dist_utils.set_determinism = _set_determinism_keeping_dense

if CPU:
    # 4. Gloo has no PREMUL_SUM, which FSDP2's reduce-scatter uses once
    #    torchtitan sets the gradient divide factor to 1: plain SUM is the same.
    import torchtitan.distributed.fsdp as tt_fsdp

    _disable_division = tt_fsdp.disable_fsdp_gradient_division

    def _disable_division_summing(model):
        _disable_division(model)
        for m in model.modules():
            if isinstance(m, tt_fsdp.FSDPModule):
                m.set_force_sum_reduction_for_comms(True)

    tt_fsdp.disable_fsdp_gradient_division = _disable_division_summing

if __name__ == "__main__":
    from torchtitan.train import main

    main()
