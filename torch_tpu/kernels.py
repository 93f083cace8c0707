"""Custom kernels written in JAX or Pallas, called on tpu tensors.

    import jax, jax.numpy as jnp
    import torch_tpu.kernels as tk

    def rms_norm(x, w, *, eps):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w

    rms = tk.jax_op("mylib::rms_norm", rms_norm, static_argnames=("eps",))
    y = rms(x, w, eps=1e-6)          # x, w: tpu tensors; y: a tpu tensor
    y.sum().backward()               # gradients through jax.vjp

``jax_op`` makes a ``torch.library`` custom op: a fake implementation from
the function's output shapes (``jax.eval_shape``), so Dynamo and FakeTensor
trace it; a tpu kernel; a CPU kernel (the function run by JAX on the host,
for references); autograd through ``jax.vjp`` of the same function (a
``jax.custom_vjp`` function brings its own rule).

The function is lowered to StableHLO once per (function, static arguments,
input shapes and dtypes, plugin), checked against the running plugin (its
StableHLO version, and custom calls it cannot run), and spliced into the
program that calls it: a private function beside the program's own, so the
kernel runs like any op in every mode — a program of its own in Strict
Eager, inside the fused program in Fused Eager, inside the graph under
``torch.compile(backend="tpu")`` (no graph break; XLA fuses across it). The
compiled programs go to the persistent compilation cache like any other.

Pallas kernels (``pl.pallas_call``) run on the CPU plugin with
``interpret=True`` (pure StableHLO); on a TPU their Mosaic custom call and
on the CUDA plugin the Triton custom call are accepted.

JAX is optional (``pip install torch_tpu[jax]``) and imported only when a
kernel is defined or called.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import threading
from typing import Any, Callable, Sequence

import torch

from . import _C

__all__ = ["jax_op", "call_jax", "KernelError"]


class KernelError(RuntimeError):
    """A JAX kernel that cannot run on the loaded plugin."""


# Custom-call targets each platform's compiler handles itself (XLA's own,
# kept by jax.jit lowerings) and the kernel calls a platform runs.
_XLA_BUILTIN = {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                "annotate_device_placement", "MoveToHost", "MoveToDevice"}
_PLATFORM_CALLS = {
    "cpu": set(),
    "tpu": {"tpu_custom_call"},
    "cuda": {"__gpu$xla.gpu.triton", "mosaic_gpu", "mosaic_gpu_v2"},
}

_lock = threading.Lock()
_ops: dict[str, "_JaxOp"] = {}


def _jax():
    try:
        import jax
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("torch_tpu.kernels needs JAX: pip install 'torch_tpu[jax]' "
                          "(or pip install jax)") from e
    return jax


@functools.lru_cache(maxsize=None)
def _plugin() -> tuple[str, str]:
    """(platform, StableHLO version) of the loaded plugin."""
    torch.tpu.init()
    info = _C._plugin_info()
    return info["platform"], info["attributes"].get("stablehlo_current_version", "")


def _jax_dtype(dt: torch.dtype):
    jnp = _jax().numpy
    import ml_dtypes  # noqa: F401  (JAX's own dependency: bfloat16 and float8 for numpy)
    table = {
        torch.float32: jnp.float32, torch.float64: jnp.float64, torch.float16: jnp.float16,
        torch.bfloat16: jnp.bfloat16, torch.int8: jnp.int8, torch.int16: jnp.int16,
        torch.int32: jnp.int32, torch.int64: jnp.int64, torch.uint8: jnp.uint8,
        torch.bool: jnp.bool_, torch.complex64: jnp.complex64, torch.complex128: jnp.complex128,
    }
    if dt not in table:
        raise TypeError(f"torch_tpu.kernels: dtype {dt} has no JAX counterpart")
    return table[dt]


def _torch_dtype(dt) -> torch.dtype:
    import numpy as np

    name = np.dtype(dt).name
    table = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
             "bfloat16": torch.bfloat16, "int8": torch.int8, "int16": torch.int16,
             "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8, "bool": torch.bool,
             "complex64": torch.complex64, "complex128": torch.complex128}
    if name not in table:
        raise TypeError(f"torch_tpu.kernels: JAX dtype {name} has no torch counterpart")
    return table[name]


def _x64():
    """JAX traces in 64-bit mode, so int64 and float64 tensors keep their
    dtypes (JAX's default would narrow them to 32 bits)."""
    return _jax().enable_x64(True)


def _flat_outputs(out) -> tuple[list, bool]:
    """The function's outputs as a list, and whether it returned one array."""
    if isinstance(out, (tuple, list)):
        return list(out), False
    return [out], True


class _Lowered:
    __slots__ = ("symbol", "outs", "single")

    def __init__(self, symbol, outs, single):
        self.symbol, self.outs, self.single = symbol, outs, single


def _check_custom_calls(module_text: str, name: str, platform: str) -> None:
    allowed = _XLA_BUILTIN | _PLATFORM_CALLS.get(platform, set())
    # Pretty form `stablehlo.custom_call @target(...)`, generic form
    # `call_target_name = "target"`.
    targets = set(re.findall(r'stablehlo\.custom_call @([\w$.-]+)', module_text))
    targets |= set(re.findall(r'call_target_name = "([^"]+)"', module_text))
    for target in sorted(targets):
        if target not in allowed:
            hint = (" (a Pallas kernel runs on the CPU plugin with interpret=True)"
                    if platform == "cpu" and target in ("tpu_custom_call", "__gpu$xla.gpu.triton",
                                                        "mosaic_gpu", "mosaic_gpu_v2") else "")
            raise KernelError(
                f"torch_tpu.kernels: {name} lowers to custom call '{target}', which the "
                f"{platform} plugin cannot run{hint}. Host callbacks, LAPACK and other "
                "library calls of JAX's own runtime are not available to a PJRT plugin.")


def _check_version(module_text: str, name: str) -> None:
    jax = _jax()
    from jaxlib.mlir.dialects import stablehlo as sh

    platform, target = _plugin()
    if not target:
        return
    try:
        sh.serialize_portable_artifact_str(module_text, target)
    except Exception as e:  # noqa: BLE001 - the serializer names the op it cannot express
        raise KernelError(
            f"torch_tpu.kernels: {name} uses StableHLO that the loaded {platform} plugin "
            f"(StableHLO {target}) cannot read: JAX {jax.__version__} writes StableHLO "
            f"{sh.get_current_version()}. Use a JAX release whose StableHLO is at most {target}, "
            f"or avoid the newer op. ({str(e).strip().splitlines()[0] if str(e).strip() else e})"
        ) from None


def _lower(name: str, fn: Callable, args: Sequence[torch.Tensor]) -> _Lowered:
    """Lowers `fn` for the tensors' shapes and dtypes, checks it, registers
    its functions with the runtime (private, renamed after the text's hash)."""
    jax = _jax()
    from jaxlib.mlir import ir

    specs = [jax.ShapeDtypeStruct(tuple(a.shape), _jax_dtype(a.dtype)) for a in args]
    platform, _ = _plugin()
    with _x64():
        # Lowered for the plugin's platform (not JAX's own default backend),
        # so Pallas takes the lowering that platform runs.
        lowered = jax.jit(fn, keep_unused=True).trace(*specs).lower(lowering_platforms=(platform,))
        out_avals = jax.eval_shape(fn, *specs)
    module = lowered.compiler_ir("stablehlo")
    text = str(module)
    _check_custom_calls(text, name, platform)
    _check_version(text, name)
    prefix = "tpu_kernel_" + hashlib.sha256(text.encode()).hexdigest()[:20]
    with module.context:
        funcs = list(module.body.operations)
        for op in funcs:
            old = ir.StringAttr(op.attributes["sym_name"]).value
            new = f"{prefix}_{old}"
            ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
            ir.SymbolTable.set_symbol_name(op, new)
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")
            for attr in ("arg_attrs", "res_attrs"):
                if attr in op.attributes:
                    del op.attributes[attr]
        body = "\n".join(op.operation.get_asm(print_generic_op_form=True) for op in funcs)
    symbol = f"{prefix}_main"
    _C._kernel_register(symbol, body)
    outs, single = _flat_outputs(out_avals)
    return _Lowered(symbol, [(list(o.shape), _torch_dtype(o.dtype)) for o in outs], single)


@torch._dynamo.assume_constant_result
def _statics_key(op: "_JaxOp", items: tuple) -> str:
    """The op's string argument for these static arguments (Dynamo takes it
    as a constant, so a compiled caller does not trace this)."""
    unknown = {k for k, _ in items} - set(op.static_argnames)
    if unknown:
        raise TypeError(f"{op.qualname}: unexpected keyword arguments {sorted(unknown)} "
                        f"(static arguments: {list(op.static_argnames)})")
    key = repr(items)
    op.statics.setdefault(key, dict(items))
    return key


class _JaxOp:
    """One custom op: the function, its statics by key, its lowerings."""

    def __init__(self, qualname: str, fn: Callable, static_argnames: Sequence[str],
                 donate_argnums: Sequence[int], differentiable: bool = True):
        self.qualname = qualname
        self.fn = fn
        self.static_argnames = tuple(static_argnames)
        self.donate_argnums = tuple(donate_argnums)
        self.statics: dict[str, dict] = {}
        self.lowered: dict[tuple, _Lowered] = {}
        self.compiled_cpu: dict[str, Callable] = {}
        self.lowerings = 0  # how many times a function was lowered (tests, metrics)
        # Whether the function returns one array (else a tuple), by statics
        # key: set by whichever kernel ran first (the fake one under Dynamo).
        self.singles: dict[str, bool] = {}
        ns, name = qualname.split("::")
        self._define(ns, name, differentiable)

    # -- statics ----------------------------------------------------------
    def key(self, statics: dict) -> str:
        return _statics_key(self, tuple(sorted(statics.items())))

    def bound(self, key: str) -> Callable:
        statics = self.statics[key]
        return functools.partial(self.fn, **statics) if statics else self.fn

    # -- kernels ------------------------------------------------------------
    def lowering(self, key: str, args: Sequence[torch.Tensor]) -> _Lowered:
        sig = (key, tuple((tuple(a.shape), a.dtype) for a in args))
        low = self.lowered.get(sig)
        if low is None:
            with _lock:
                low = self.lowered.get(sig)
                if low is None:
                    low = _lower(self.qualname, self.bound(key), args)
                    self.lowered[sig] = low
                    self.lowerings += 1
                    self.singles[key] = low.single
        return low

    def tpu(self, inputs: list[torch.Tensor], key: str) -> list[torch.Tensor]:
        low = self.lowering(key, inputs)
        return list(_C._kernel_call(low.symbol, [t.contiguous() for t in inputs], low.outs))

    def cpu(self, inputs: list[torch.Tensor], key: str) -> list[torch.Tensor]:
        jax = _jax()
        import numpy as np

        with _x64():
            fn = self.compiled_cpu.get(key)
            if fn is None:
                fn = self.compiled_cpu.setdefault(key, jax.jit(self.bound(key)))
            cpu = jax.devices("cpu")[0]
            arrays = [jax.device_put(np.asarray(t.detach().contiguous().numpy()) if t.dtype != torch.bfloat16
                                     else t.detach().float().numpy().astype(_jax_dtype(t.dtype)), cpu)
                      for t in inputs]
            out, self.singles[key] = _flat_outputs(fn(*arrays))
        result = []
        for o in out:
            a = np.asarray(o)
            t = torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16) if a.dtype.name == "bfloat16" \
                else torch.from_numpy(np.array(a))
            result.append(t)
        return result

    def fake(self, inputs: list[torch.Tensor], key: str) -> list[torch.Tensor]:
        jax = _jax()
        specs = [jax.ShapeDtypeStruct(tuple(a.shape), _jax_dtype(a.dtype)) for a in inputs]
        with _x64():
            outs, self.singles[key] = _flat_outputs(jax.eval_shape(self.bound(key), *specs))
        device = inputs[0].device if inputs else torch.device("tpu")
        return [torch.empty(tuple(o.shape), dtype=_torch_dtype(o.dtype), device=device) for o in outs]


    # -- registration ---------------------------------------------------------
    def _define(self, ns: str, name: str, differentiable: bool) -> None:
        self.lib = torch.library.Library(ns, "FRAGMENT")
        self.lib.define(f"{name}(Tensor[] inputs, str statics) -> Tensor[]")
        self.op = getattr(getattr(torch.ops, ns), name).default
        self.lib.impl(name, self.tpu, "PrivateUse1")
        self.lib.impl(name, self.cpu, "CPU")
        torch.library.register_fake(self.qualname, self.fake, lib=self.lib)
        if differentiable:
            self.bwd = _JaxOp(f"{ns}::{name}_jax_vjp", self._vjp_fn, ("n", "key"), (),
                              differentiable=False)
            torch.library.register_autograd(self.qualname, self._backward,
                                            setup_context=self._setup_context, lib=self.lib)

    def _vjp_fn(self, *arrays, n: int, key: str):
        """The vjp of the op's function: the first `n` arrays are the
        primals, the rest the cotangents of its outputs; grads are returned
        for the floating-point primals (zeros elsewhere are not returned)."""
        jax = _jax()
        jnp = jax.numpy
        primals, cts = list(arrays[:n]), list(arrays[n:])
        diff = [i for i, p in enumerate(primals) if jnp.issubdtype(p.dtype, jnp.inexact)]
        fn = self.bound(key)

        def of_diff(*d):
            full = list(primals)
            for i, v in zip(diff, d):
                full[i] = v
            return fn(*full)

        out, vjp = jax.vjp(of_diff, *[primals[i] for i in diff])
        flat, single = _flat_outputs(out)
        grads = vjp(cts[0] if single else type(out)(cts))
        return tuple(grads)

    def _setup_context(self, ctx, inputs, output):
        tensors, key = inputs
        ctx.key = key
        ctx.outs = [(o.shape, o.dtype, o.device) for o in output]
        ctx.save_for_backward(*tensors)

    def _backward(self, ctx, grads):
        primals = ctx.saved_tensors
        cts = [g if g is not None else torch.zeros(shape, dtype=dtype, device=device)
               for g, (shape, dtype, device) in zip(grads, ctx.outs)]
        bkey = self.bwd.key({"n": len(primals), "key": ctx.key})
        diff = [i for i, p in enumerate(primals) if p.dtype.is_floating_point or p.dtype.is_complex]
        got = self.bwd.op(list(primals) + list(cts), bkey)
        full = [None] * len(primals)
        for i, g in zip(diff, got):
            full[i] = g
        return full, None

    def __call__(self, *tensors: torch.Tensor, **statics: Any):
        key = self.key(statics)
        outs = self.op(list(tensors), key)
        for i in self.donate_argnums:
            # A donated input aliases the output of its shape and dtype: the
            # output's value is written into it and it is returned in the
            # output's place (its old buffer is freed, as a donated one).
            src = tensors[i]
            for j, o in enumerate(outs):
                if o.shape == src.shape and o.dtype == src.dtype and o is not src:
                    with torch.no_grad():
                        src.copy_(o)
                    outs = list(outs)
                    outs[j] = src
                    break
        if len(outs) == 1 and self.singles.get(key, False):
            return outs[0]
        return tuple(outs)


def jax_op(qualname: str, fn: Callable, *, static_argnames: Sequence[str] = (),
           donate_argnums: Sequence[int] = ()) -> Callable:
    """Turns the JAX function `fn` (arrays in, an array or a tuple of arrays
    out) into the custom op `qualname` ("namespace::name") on tpu (and CPU)
    tensors. Keyword arguments named in `static_argnames` are static: each
    value gets its own lowering. Inputs in `donate_argnums` are donated: the
    output of the same shape and dtype is written into them (they alias it)."""
    if "::" not in qualname:
        raise ValueError(f"jax_op: qualname must be 'namespace::name', got {qualname!r}")
    _jax()
    with _lock:
        if qualname in _ops:
            raise RuntimeError(f"jax_op: {qualname} is already defined")
        op = _JaxOp(qualname, fn, static_argnames, donate_argnums)
        _ops[qualname] = op
    return op


_anon = itertools.count()
_by_fn: dict[tuple, _JaxOp] = {}


def call_jax(fn: Callable, *tensors: torch.Tensor, **static: Any):
    """Calls the JAX function `fn` once on `tensors` (keyword arguments are
    static); the op behind it is made on first use of `fn` and reused."""
    _jax()
    key = (fn, tuple(sorted(static)))
    op = _by_fn.get(key)
    if op is None:
        with _lock:
            op = _by_fn.get(key)
            if op is None:
                name = re.sub(r"\W", "_", getattr(fn, "__name__", "fn"))
                op = _JaxOp(f"torch_tpu_jax::{name}_{next(_anon)}", fn, tuple(sorted(static)), ())
                _by_fn[key] = op
    return op(*tensors, **static)
