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
import warnings

import torch

from .. import _C
from .._modes import EagerMode, eager_mode, get_eager_mode

# Different input signatures one graph keeps programs for before it stops
# capturing new ones (Dynamo's own guards recompile first in most cases).
_MAX_VARIANTS = 16

# Graphs captured as programs (each is one compile, or one load from the
# persistent cache); graphs loaded from AOTAutograd's cache.
stats = {"captures": 0, "cache_loads": 0}


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


def _register_fake_rules() -> None:
    """Fake-tensor rules for tpu tensors where torch's own meta function
    encodes another backend's limits. ``_grouped_mm``'s meta function accepts
    only bfloat16 (the CUDA kernel's rule); tpu's kernel takes every float
    dtype, so a float32 MoE model (transformers' default DeepSeek-V3 / Qwen3-MoE
    path) would otherwise fail while Dynamo traces it, before any backend runs."""
    from torch._subclasses import fake_impls
    from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager

    if not hasattr(torch.ops.aten, "_grouped_mm"):
        return
    grouped_mm = torch.ops.aten._grouped_mm.default

    def _grouped_mm_fake(fake_mode, func, mat_a, mat_b, offs=None, bias=None, out_dtype=None):
        if mat_a.device.type != "tpu" or mat_a.dtype == torch.bfloat16:
            return NotImplemented  # torch's own rule
        torch._check(mat_a.dtype == mat_b.dtype and mat_a.dtype.is_floating_point,
                     lambda: f"_grouped_mm: expected floating inputs of one dtype, got {mat_a.dtype} "
                             f"and {mat_b.dtype}")
        torch._check(mat_a.dim() in (2, 3) and mat_b.dim() in (2, 3),
                     lambda: "_grouped_mm: multiplicands must be 2D or 3D")
        torch._check(mat_a.size(-1) == mat_b.size(-2) or (mat_a.dim() == 2 and mat_b.dim() == 2),
                     lambda: "_grouped_mm: contraction dimensions differ")
        if mat_a.dim() == 2 and mat_b.dim() == 2:      # groups along K
            size = [offs.size(0), mat_a.size(0), mat_b.size(1)]
        elif mat_a.dim() == 2:                         # groups of rows of mat_a
            size = [mat_a.size(0), mat_b.size(-1)]
        elif mat_b.dim() == 2:                         # groups of columns of mat_b
            size = [mat_a.size(1), mat_b.size(1)]
        else:                                          # batched
            size = [mat_a.size(0), mat_a.size(1), mat_b.size(-1)]
        with in_kernel_invocation_manager(fake_mode):
            out = torch.empty(size, dtype=out_dtype or mat_a.dtype, device="meta")
        return FakeTensor(fake_mode, out, mat_a.device)

    fake_impls.register_op_impl(lambda func: func is grouped_mm)(_grouped_mm_fake)


_register_fake_rules()


def mark_dynamic(t: torch.Tensor, dim: int, lower: int, upper: int) -> None:
    """Bounded dynamism for ``torch.compile(backend="tpu")``: dimension
    ``dim`` of ``t`` may take any size in ``[lower, upper]`` without a
    recompile. The graph is compiled once at ``upper``; each call pads its
    inputs to that size and passes the real size to the program as a
    run-time value (``stablehlo.set_dimension_size``), so XLA masks the
    padding in reductions, matmuls and softmax; results are sliced back to
    the real size. A size outside the range raises ``ValueError``."""
    if not 0 <= lower <= upper:
        raise ValueError(f"mark_dynamic: expected 0 <= lower <= upper, got [{lower}, {upper}]")
    if not lower <= t.size(dim) <= upper:
        raise ValueError(f"mark_dynamic: dimension {dim} has size {t.size(dim)}, outside "
                         f"[{lower}, {upper}]")
    torch._dynamo.mark_dynamic(t, dim, min=lower, max=upper)


class _DynamicSpec:
    """Which graph inputs carry bounded dynamic sizes, and how the outputs'
    sizes follow from them (from the graph's symbolic shapes)."""

    def __init__(self, syms, bounds, int_args, dims, out_exprs):
        self.syms = syms            # sympy symbols, one per run-time size
        self.bounds = bounds        # (lower, upper) per symbol
        self.int_args = int_args    # (input, symbol index): SymInt inputs
        self.dims = dims            # (input, dim, symbol index): tensor dims
        self.out_exprs = out_exprs  # per output: None, sympy expr, or per-dim exprs

    @staticmethod
    def build(gm, example_inputs):
        import sympy
        from torch.utils._sympy.numbers import int_oo

        fake_mode = torch._guards.detect_fake_mode(example_inputs)
        env = getattr(fake_mode, "shape_env", None)
        if env is None:
            return None
        syms, bounds, int_args, dims = [], [], [], []

        def index_of(expr):
            """The symbol's index if expr is a bounded symbol; None if it is
            not symbolic; raises LookupError for anything else."""
            if not isinstance(expr, sympy.Expr) or expr.is_number:
                return None
            if not isinstance(expr, sympy.Symbol):
                raise LookupError
            vr = env.var_to_range.get(expr)
            if vr is None or vr.upper == int_oo:
                raise LookupError
            if expr not in syms:
                syms.append(expr)
                bounds.append((int(vr.lower), int(vr.upper)))
            return syms.index(expr)

        try:
            for i, a in enumerate(example_inputs):
                if isinstance(a, torch.SymInt):
                    k = index_of(a.node.expr)
                    if k is not None:
                        int_args.append((i, k))
                elif isinstance(a, torch.Tensor):
                    for d, size in enumerate(a.shape):
                        if isinstance(size, torch.SymInt):
                            k = index_of(size.node.expr)
                            if k is not None:
                                dims.append((i, d, k))
        except LookupError:
            return None  # unbounded or derived sizes: one program per size
        if not syms:
            return None
        # Bounds come from torch_tpu.mark_dynamic, on tensor dimensions. A
        # size that reaches the graph only as an int (Dynamo makes ints it
        # saw change dynamic; split sizes taken from a tensor's values, for
        # one) may have a finite range from guards alone, and padding it to
        # that bound changes what the graph computes.
        if {k for _, k in int_args} - {k for _, _, k in dims}:
            return None
        for n in gm.graph.nodes:
            if n.op != "call_function":
                continue
            name = getattr(n.target, "__name__", str(n.target))
            # Graphs that write their inputs or draw random numbers are not
            # run twice by the check in _CompiledGraph; they compile per size.
            if name.split(".")[0].endswith("_") or name.split(".")[0] in _RANDOM_OPS:
                return None
        out_exprs = []
        out_node = next(n for n in gm.graph.nodes if n.op == "output")
        for n in out_node.args[0]:
            val = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
            if isinstance(val, torch.SymInt):
                out_exprs.append(val.node.expr)
            elif isinstance(val, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in val.shape):
                out_exprs.append([s.node.expr if isinstance(s, torch.SymInt) else None
                                  for s in val.shape])
            else:
                out_exprs.append(None)
        return _DynamicSpec(syms, bounds, int_args, dims, out_exprs)

    def sizes(self, args):
        values = [None] * len(self.syms)
        where = [None] * len(self.syms)
        for i, k in self.int_args:
            values[k], where[k] = int(args[i]), f"size argument {i}"
        for i, d, k in self.dims:
            v = args[i].size(d)
            if values[k] is not None and values[k] != v:
                raise ValueError(f"tpu: dimension {d} of graph input {i} has size {v}, but "
                                 f"{where[k]} gives {values[k]} for the same dynamic size")
            values[k], where[k] = v, f"dimension {d} of graph input {i}"
        for k, v in enumerate(values):
            lo, hi = self.bounds[k]
            if not lo <= v <= hi:
                raise ValueError(
                    f"tpu: {where[k]} has size {v}, outside the bounds [{lo}, {hi}] given to "
                    "torch_tpu.mark_dynamic; mark it with wider bounds")
        return values

    def pad_inputs(self, args):
        padded = list(args)
        for i, k in self.int_args:
            padded[i] = self.bounds[k][1]
        targets = {}
        for i, d, k in self.dims:
            targets.setdefault(i, list(args[i].shape))[d] = self.bounds[k][1]
        for i, shape in targets.items():
            padded[i] = _pad_to(args[i], shape)
        return padded

    def slice_outputs(self, outs, values):
        subs = dict(zip(self.syms, values))
        result = list(outs)
        for n, expr in enumerate(self.out_exprs):
            if expr is None or result[n] is None:
                continue
            if isinstance(expr, list):
                t = result[n]
                for d, e in enumerate(expr):
                    if e is not None:
                        real = int(e.xreplace(subs))
                        if real != t.size(d):
                            t = t.narrow(d, 0, real)
                result[n] = t
            else:
                result[n] = int(expr.xreplace(subs))
        return result


_RANDOM_OPS = {"rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "bernoulli",
               "native_dropout", "normal", "uniform", "multinomial", "randperm", "rrelu_with_noise"}


def _outputs_match(got, ref) -> bool:
    if len(got) != len(ref):
        return False
    for g, r in zip(got, ref):
        if isinstance(r, torch.Tensor):
            if not isinstance(g, torch.Tensor) or g.shape != r.shape or g.dtype != r.dtype:
                return False
            g, r = g.cpu(), r.cpu()
            if r.is_floating_point() or r.is_complex():
                scale = max(1.0, r.abs().nan_to_num(0, 0, 0).max().item()) if r.numel() else 1.0
                if not torch.allclose(g, r, rtol=1e-3, atol=1e-4 * scale, equal_nan=True):
                    return False
            elif not torch.equal(g, r):
                return False
        elif g != r:
            return False
    return True


def _pad_to(t: torch.Tensor, shape) -> torch.Tensor:
    """t grown to `shape` (the upper bounds) as a whole contiguous tensor.
    A result of an earlier dynamic program already lies in such a storage
    (it is a slice of it): that storage is used as it is. Other tensors are
    padded through the host, which compiles nothing."""
    shape = list(shape)
    if t.device.type == "tpu" and t.storage_offset() == 0:
        strides, expected = [], 1
        for s in reversed(shape):
            strides.insert(0, expected)
            expected *= s
        if (list(t.stride()) == strides and
                t.untyped_storage().nbytes() == expected * t.element_size()):
            return t.as_strided(shape, strides, 0)
    host = torch.zeros(shape, dtype=t.dtype)
    host[tuple(slice(0, s) for s in t.shape)] = t.cpu()
    return host.to(t.device)


def _has_tpu_tensor(args) -> bool:
    return any(isinstance(a, torch.Tensor) and a.device.type == "tpu" for a in args)


def _views_as_reshapes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``aten.view`` in the graph becomes ``aten.reshape``.

    AOTAutograd writes a view where the fake tensors' strides allow one, and
    those strides come from torch's meta functions (an elementwise op follows
    its inputs' memory layout, ``constant_pad_nd`` keeps a permuted input's
    order). tpu's kernels often return another layout (contiguous), which
    holds the same values but can make such a view impossible on the real
    tensor ("view size is not compatible with input tensor's size and
    stride"). The graph is functional, so a reshape (a view where possible,
    else a copy) computes the same values; in a captured program the copy is
    only a layout change."""
    if not isinstance(gm, torch.fx.GraphModule):
        return gm
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in (torch.ops.aten.view.default,
                                                           torch.ops.aten._unsafe_view.default):
            node.target = torch.ops.aten.reshape.default
            changed = True
    if changed:
        gm.recompile()
    return gm


class _CompiledGraph:
    """One AOTAutograd graph: captured programs keyed by input signature."""

    def __init__(self, gm: torch.fx.GraphModule, kind: str, dynamic: "_DynamicSpec" = None):
        # AOTAutograd passes the arguments as one list. (An instance
        # attribute, so that Dynamo's wrappers of the backward copy it.)
        self._boxed_call = True
        self.gm = _views_as_reshapes(gm)
        self.kind = kind
        self.variants = []
        self.eager_only = False
        self.dynamic = dynamic
        self.dynamic_checked = False

    def __call__(self, *call_args):
        # Boxed (one list, which we may empty to free inputs early) or not.
        if len(call_args) == 1 and type(call_args[0]) is list:
            args = call_args[0]
        else:
            args = list(call_args)
        if self.dynamic is not None and _has_tpu_tensor(args):
            spec = self.dynamic
            values = spec.sizes(args)
            outs = spec.slice_outputs(self._call(spec.pad_inputs(args), values), values)
            if not self.dynamic_checked and any(v < hi for v, (_, hi) in zip(values, spec.bounds)):
                # XLA's dynamic padder cannot follow every program (a reshape
                # that splits a padded dimension after other ops, for one):
                # the first padded call is checked against this graph run at
                # its real sizes, and a mismatch turns bounded dynamism off.
                ref = self._run_eager(list(args))
                if not _outputs_match(outs, ref):
                    warnings.warn(
                        "torch_tpu.mark_dynamic: this graph's results at a padded size differ "
                        "from its results at the real size (XLA's dynamic padder cannot follow "
                        "it, e.g. a dynamic dimension merged with a leading batch dimension and "
                        "split again); it is compiled once per size instead.", stacklevel=2)
                    self.dynamic = None
                    self.variants = []
                    outs = ref
                else:
                    self.dynamic_checked = True
            args.clear()
            return outs
        outs = self._call(args)
        args.clear()
        return outs

    def _call(self, args, sizes=()):
        for v in self.variants:
            out = v.run(args, list(sizes))
            if out is not None:
                return out
        if self.eager_only or len(self.variants) >= _MAX_VARIANTS or not _has_tpu_tensor(args):
            if sizes:
                raise RuntimeError("tpu: a graph with bounded dynamic sizes could not be "
                                   "captured as one program")
            return self._run_eager(args)
        dims = [(i, d, k) for i, d, k in self.dynamic.dims] if sizes else []
        capture = _C._CapturedGraph(args, dims, list(sizes))
        try:
            outs = self.gm(*args)
        except BaseException:
            capture.abort()
            raise
        if capture.finish(args, outs):
            self.variants.append(capture)
            stats["captures"] += 1
        else:
            self.eager_only = True
        return outs

    def _run_eager(self, args):
        mode = get_eager_mode()
        if mode == EagerMode.DEFER_NEVER:
            mode = EagerMode.DEFER_AND_FUSE
        with eager_mode(mode):
            return self.gm(*args)


def _compiler(kind):
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        return _CompiledGraph(gm, kind, _DynamicSpec.build(gm, example_inputs))

    return compile_graph


def make_optimizers_capturable(optimizer_module) -> None:
    """Dynamo traces an optimizer's first step with `capturable=True` for
    CUDA and XPU parameters: the step counters then live on the device and
    the bias corrections are device math. For tpu parameters it left the
    counters on the CPU, whose values the captured program folds in: a new
    capture (and compile) every step until the graph fell back to eager.
    The same rule for tpu: a group of tpu parameters with no state yet is
    made capturable before Dynamo's own rule runs."""
    cls = optimizer_module.OptimizerVariable
    original = cls._set_capturable
    if getattr(original, "_torch_tpu_wrapped", False):
        return

    def _set_capturable(self, tx):
        opt = self.value
        for group in opt.param_groups:
            params = group.get("params", [])
            if ("capturable" in group and params and all(p.device.type == "tpu" for p in params)
                    and not any(p in opt.state for p in params)):
                group["capturable"] = True
        return original(self, tx)

    _set_capturable._torch_tpu_wrapped = True
    cls._set_capturable = _set_capturable


def tpu_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """``torch.compile(model, backend="tpu")``.

    The graphs AOTAutograd produces go to its cache (PyTorch's
    ``TORCHINDUCTOR_AUTOGRAD_CACHE``, under ``TORCHINDUCTOR_CACHE_DIR``) as
    bundled entries, so that a warm start skips AOTAutograd's tracing
    (``output_code.py``)."""
    from torch._dynamo.backends.common import aot_autograd

    from . import output_code

    with torch._functorch.config.patch(bundled_autograd_cache=True,
                                       # the backward too is compiled (and
                                       # its entry saved) here, not lazily
                                       force_non_lazy_backward_lowering=True), \
            torch.compiler.config.patch(cache_key_tag=output_code.cache_key_tag(example_inputs)), \
            output_code.safe_entry_pickling():
        return aot_autograd(
            fw_compiler=output_code.serializable_compiler("forward"),
            bw_compiler=output_code.serializable_compiler("backward"),
            inference_compiler=output_code.serializable_compiler("inference"),
            decompositions=_decompositions(),
            keep_inference_input_mutations=True,
        )(gm, example_inputs, **kwargs)
