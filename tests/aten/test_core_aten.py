"""Coverage of the Core ATen opset on the tpu device.

The Core ATen opset is the set of aten overloads tagged ``torch.Tag.core`` in
the installed torch: the ops every other op decomposes to, which a backend
must lower. An overload counts as handled on tpu when

* it has a PrivateUse1 kernel (a lowering), or
* it has a CompositeImplicitAutograd or CompositeExplicitAutograd kernel (it
  runs as other ops), or
* it has a CompositeExplicitAutogradNonFunctional kernel that is a real
  composite (``aten::copy``, ``aten::slice_scatter``), or that is the generated
  wrapper of a structured op (``acos`` calling ``acos.out``) whose out=
  overload has a PrivateUse1 kernel.

A composite is counted as handled without checking that the ops it calls are
lowered; the OpInfo tests (tests/aten/test_opinfo.py) check that end to end.
"""

import pytest
import torch

has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key

# Core ATen overloads without a tpu lowering, at most. Coverage may only go up:
# when you add lowerings and this test reports fewer missing ops, lower this
# number to the new count in the same change.
MISSING_CORE_ATEN_BASELINE = 0  # of 193 Core ATen overloads in torch 2.13.0


def _overload(name):
    base, _, overload = name[len("aten::"):].partition(".")
    try:
        return getattr(getattr(torch.ops.aten, base), overload or "default")
    except (AttributeError, RuntimeError):
        return None


def core_aten_ops():
    """Names ('aten::add.Tensor') of the overloads tagged core, sorted."""
    out = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        op = _overload(name)
        if op is not None and torch.Tag.core in op.tags:
            out.append(name)
    return sorted(out)


def _arg_sig(schema, drop_out=False):
    return [(a.name, str(a.type)) for a in schema.arguments
            if not (drop_out and a.is_out)]


def _structured_out_variant(name):
    """The out= overload with the same (non-out) arguments as name, if it is a
    backend kernel (no composite of its own): then name is a structured op, and
    its CompositeExplicitAutogradNonFunctional kernel only calls that out=
    overload. None when there is no such overload (the NonFunctional kernel is
    then a real composite, like aten::copy or aten::slice_scatter)."""
    op = _overload(name)
    want = _arg_sig(op._schema)
    packet = getattr(torch.ops.aten, name[len("aten::"):].partition(".")[0])
    for ov in packet.overloads():
        schema = getattr(packet, ov)._schema
        if not any(a.is_out for a in schema.arguments):
            continue
        full = schema.name + ("." + schema.overload_name if schema.overload_name else "")
        if _arg_sig(schema, drop_out=True) == want and not (
                has_kernel(full, "CompositeExplicitAutograd")
                or has_kernel(full, "CompositeImplicitAutograd")):
            return full
    return None


def is_handled(name):
    if has_kernel(name, "PrivateUse1"):
        return True
    if has_kernel(name, "CompositeImplicitAutograd") or has_kernel(name, "CompositeExplicitAutograd"):
        return True
    if has_kernel(name, "CompositeExplicitAutogradNonFunctional"):
        out = _structured_out_variant(name)
        return out is None or has_kernel(out, "PrivateUse1")
    return False


def missing_core_aten_ops():
    return [n for n in core_aten_ops() if not is_handled(n)]


def test_core_aten_opset_is_not_empty():
    ops = core_aten_ops()
    assert len(ops) > 100, ops  # guards the enumeration itself
    assert "aten::add.Tensor" in ops and is_handled("aten::add.Tensor")


def test_every_core_aten_op_is_lowered():
    missing = missing_core_aten_ops()
    assert not missing, (f"{len(missing)} of {len(core_aten_ops())} Core ATen ops have no "
                         "tpu lowering:\n  " + "\n  ".join(missing))


def test_missing_core_aten_ops_not_above_baseline():
    missing = missing_core_aten_ops()
    assert len(missing) <= MISSING_CORE_ATEN_BASELINE, (
        f"{len(missing)} Core ATen ops lack a tpu lowering, more than the baseline "
        f"{MISSING_CORE_ATEN_BASELINE}; a lowering was lost or a registration broke:\n  "
        + "\n  ".join(missing))
    if len(missing) < MISSING_CORE_ATEN_BASELINE:
        print(f"note: {len(missing)} Core ATen ops missing, below the baseline "
              f"{MISSING_CORE_ATEN_BASELINE}: lower MISSING_CORE_ATEN_BASELINE in "
              "tests/aten/test_core_aten.py")
