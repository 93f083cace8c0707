"""The ``torch.compile`` backend "tpu".

Dynamo hands us an FX graph; AOTAutograd splits it into functional forward
and backward ATen graphs. Each ATen graph becomes one XLA program through
the eager lowerings: its first call runs the graph's ops on the real
inputs while the executor records instead of launching (a *capture*), and
the recorded batch is compiled as one program through the same memory and
disk caches as eager mode. Later calls whose inputs match the captured
signature (shapes, strides, dtypes, aliasing, the matmul precision) launch
that program directly; a new signature captures again.

A graph that needs a value on the host part-way (data-dependent shapes)
cannot be captured; it then runs op by op in Fused Eager, which is still
correct and batched.

The backend is found by Dynamo through the ``torch_dynamo_backends`` entry
point, so importing torch_tpu does not import Dynamo.
"""

import functools

import torch

from . import _C
from ._modes import EagerMode, eager_mode, get_eager_mode

# Different input signatures one graph keeps programs for before it stops
# capturing new ones (Dynamo's own guards recompile first in most cases).
_MAX_VARIANTS = 16


@functools.cache
def _decompositions():
    """Core-ATen decompositions for the ops tpu has no kernel for."""
    from torch._decomp import core_aten_decompositions

    table = {}
    for op, fn in core_aten_decompositions().items():
        name = op.name()
        if not torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"):
            table[op] = fn
    return table


def _has_tpu_tensor(args) -> bool:
    return any(isinstance(a, torch.Tensor) and a.device.type == "tpu" for a in args)


class _CompiledGraph:
    """One AOTAutograd graph: captured programs keyed by input signature."""

    def __init__(self, gm: torch.fx.GraphModule, kind: str):
        # AOTAutograd passes the arguments as one list. (An instance
        # attribute, so that Dynamo's wrappers of the backward copy it.)
        self._boxed_call = True
        self.gm = gm
        self.kind = kind
        self.variants = []
        self.eager_only = False

    def __call__(self, *call_args):
        # Boxed (one list, which we may empty to free inputs early) or not.
        if len(call_args) == 1 and type(call_args[0]) is list:
            args = call_args[0]
        else:
            args = list(call_args)
        for v in self.variants:
            out = v.run(args)
            if out is not None:
                args.clear()
                return out
        if self.eager_only or len(self.variants) >= _MAX_VARIANTS or not _has_tpu_tensor(args):
            return self._run_eager(args)
        capture = _C._CapturedGraph(args)
        try:
            outs = self.gm(*args)
        except BaseException:
            capture.abort()
            raise
        if capture.finish(args, outs):
            self.variants.append(capture)
        else:
            self.eager_only = True
        args.clear()
        return outs

    def _run_eager(self, args):
        mode = get_eager_mode()
        if mode == EagerMode.DEFER_NEVER:
            mode = EagerMode.DEFER_AND_FUSE
        with eager_mode(mode):
            outs = self.gm(*args)
        args.clear()
        return outs


def _compiler(kind):
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        return _CompiledGraph(gm, kind)

    return compile_graph


def tpu_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """``torch.compile(model, backend="tpu")``."""
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(
        fw_compiler=_compiler("forward"),
        bw_compiler=_compiler("backward"),
        inference_compiler=_compiler("inference"),
        decompositions=_decompositions(),
        keep_inference_input_mutations=True,
    )(gm, example_inputs, **kwargs)
