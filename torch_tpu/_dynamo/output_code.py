"""The tpu backend's graphs in AOTAutograd's cache.

A warm start of ``torch.compile(backend="tpu")`` repeats Dynamo's tracing
and AOTAutograd's (functionalization, the joint forward-backward trace, the
partition); the XLA executables themselves come from the persistent
compilation cache. PyTorch's AOTAutograd cache skips the second part for
any backend whose compiled graphs are ``OutputCode`` objects it can pickle
("bundled" entries: the entry holds the backend's own result). Ours is the
ATen graph AOTAutograd gave the backend; a hit rebuilds a
``_CompiledGraph`` from it, whose first call captures its program (a load
from the persistent cache when the program was compiled before).

The cache key is AOTAutograd's (the Dynamo graph, the inputs' metadata,
the AOT configuration, torch's version and configuration) plus a tag of
ours: what else decides the graph the backend gets or what it does with it
(this package's backend sources, the extension build, the decompositions
applied, the bounds of dynamic sizes). Imported only by the backend, once
Dynamo runs: ``torch._inductor.output_code`` is costly to import alone.
"""

import contextlib
import copyreg
import dataclasses
import functools
import hashlib
import os

import torch
from torch._inductor.output_code import OutputCode

from . import backend as _backend


@dataclasses.dataclass
class TpuOutputCode(OutputCode):
    """A ``_CompiledGraph`` as AOTAutograd's cache stores it: the graph
    pickled (without node metadata), its kind and its dynamic-size spec.
    A fresh compile holds the live graph; a loaded entry rebuilds it."""

    graph: "_backend._CompiledGraph | None" = None
    kind: str = ""
    # What a pickled entry keeps of the graph besides its code (set when
    # it is pickled).
    _dynamic: "_backend._DynamicSpec | None" = dataclasses.field(default=None, init=False)
    _pickled_gm: "bytes | None" = dataclasses.field(default=None, init=False)
    # get_attr targets whose tpu tensors were pickled as CPU copies
    _tpu_constants: "list | None" = dataclasses.field(default=None, init=False)

    def __post_init__(self):
        self._boxed_call = True

    def __call__(self, inputs):
        return self.graph(inputs)

    # Both run where AOTAutograd saves or loads, which for a backward graph
    # is inside the user's frame: Dynamo must not trace them.
    @torch._dynamo.disable
    def prepare_for_serialization(self) -> None:
        # Called on a shallow copy: the live graph is read, never changed.
        from torch.fx._graph_pickler import GraphPickler, Options

        gm, self._tpu_constants = _with_host_constants(self.graph.gm)
        self._dynamic = self.graph.dynamic
        self._pickled_gm = GraphPickler.dumps(
            gm, Options(ops_filter=None, node_metadata_key_filter=lambda key: False))
        self.graph = None

    @torch._dynamo.disable
    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        if self.graph is not None:
            return
        from torch._subclasses import FakeTensorMode
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        from torch.fx._graph_pickler import GraphPickler
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        gm = GraphPickler.loads(self._pickled_gm, FakeTensorMode(shape_env=ShapeEnv()))
        with unset_fake_temporarily():
            for target in self._tpu_constants or ():
                _set_attr(gm, target, _get_attr(gm, target).to("tpu"))
        gm.recompile()
        self.graph = _backend._CompiledGraph(gm, self.kind, self._dynamic)
        self._pickled_gm = None
        _backend.stats["cache_loads"] += 1

    def set_triton_bundle(self, triton_bundle) -> None:
        pass


def _get_attr(mod, target):
    for part in target.split("."):
        mod = getattr(mod, part)
    return mod


def _set_attr(mod, target, value):
    # A constant is a buffer or a plain attribute (AOTAutograd's graphs take
    # parameters as inputs); Module.__setattr__ keeps either kind.
    parent, _, name = target.rpartition(".")
    setattr(_get_attr(mod, parent) if parent else mod, name, value)


def _with_host_constants(gm):
    """gm, or a copy of it whose tpu tensor constants (a tensor the traced
    code made, e.g. ``torch.tensor([...], device=x.device)``) are CPU
    copies, which pickle; and the names of those constants."""
    targets = sorted({n.target for n in gm.graph.nodes if n.op == "get_attr"
                      and isinstance(_get_attr(gm, n.target), torch.Tensor)
                      and _get_attr(gm, n.target).device.type == "tpu"})
    if not targets:
        return gm, []
    import copy

    from torch._subclasses.fake_tensor import unset_fake_temporarily

    host = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    with unset_fake_temporarily():  # AOTAutograd saves inside its fake mode
        for target in targets:
            _set_attr(host, target, _get_attr(gm, target).detach().cpu())
    return host, targets


def serializable_compiler(kind):
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler

    def compile_graph(gm, example_inputs):
        graph = _backend._compiler(kind)(gm, example_inputs)
        return TpuOutputCode(graph=graph, kind=kind)

    return SerializableAOTDispatchCompiler(TpuOutputCode, compile_graph)


@functools.cache
def _sources_and_build() -> str:
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    # The extension: which kernels exist decides the decompositions; its
    # fake-tensor rules decide the graph's metadata. A rebuild is a miss.
    from .. import _C

    st = os.stat(_C.__file__)
    h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    h.update(",".join(sorted(op.name() for op in _backend._decompositions())).encode())
    return h.hexdigest()[:32]


def cache_key_tag(example_inputs) -> str:
    """Our part of AOTAutograd's cache key (``torch.compiler.config.
    cache_key_tag``, appended to the user's own tag)."""
    bounds = ""
    fake_mode = torch._guards.detect_fake_mode(example_inputs)
    env = getattr(fake_mode, "shape_env", None)
    if env is not None:
        bounds = ";".join(f"{s}:{r.lower}:{r.upper}"
                          for s, r in sorted(env.var_to_range.items(), key=lambda kv: str(kv[0])))
    tag = hashlib.sha256(f"{_sources_and_build()}|{bounds}".encode()).hexdigest()[:32]
    user = torch.compiler.config.cache_key_tag
    return f"{user}|torch_tpu:{tag}" if user else f"torch_tpu:{tag}"


def _reduce_view_meta_sequence(seq):
    # How AOTAutograd replays the views of an output that aliases an input.
    # In PyTorch 2.13 an `_unsafe_view` ViewMeta does not own its size: once
    # the traced tensors are gone its sizes are whatever the memory holds
    # (seen on ProphetNet: [93846469088703, -2605141294625105288, 16, 256]),
    # and pickling them dereferences garbage as symbolic SymInts, which
    # crashed the process. Such a sequence, and one with symbolic inputs
    # (never replayed), is stored as None, the value AOTAutograd itself
    # leaves where it has no sequence: the output is then regenerated from
    # its base by view replay or as_strided. Any other sequence pickles as
    # it always does.
    if any(type(vm).__name__ == "_unsafe_view_ViewMeta" or vm.has_symbolic_inputs
           for vm in seq.sequence):
        return type(None), ()
    return seq.__reduce_ex__(2)


@contextlib.contextmanager
def safe_entry_pickling():
    """While the backend runs AOTAutograd (whose cache pickles the entry
    there): view-replay sequences that cannot be replayed are left out."""
    from torch._functorch._aot_autograd.functional_utils import ViewMetaSequence

    previous = copyreg.dispatch_table.get(ViewMetaSequence)
    copyreg.pickle(ViewMetaSequence, _reduce_view_meta_sequence)
    try:
        yield
    finally:
        if previous is None:
            copyreg.dispatch_table.pop(ViewMetaSequence, None)
        else:
            copyreg.dispatch_table[ViewMetaSequence] = previous
