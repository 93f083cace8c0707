"""``torch.compile(backend="tpu")``: the Dynamo backend (``backend``)."""

from .backend import _CompiledGraph, mark_dynamic, stats, tpu_backend  # noqa: F401
