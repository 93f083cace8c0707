"""The lowering harness of tpu_dist's XLA engine.

Every program the XLA engine emits (csrc/dist/collective_program.cc) runs
here on one process, on a CPU client with several devices (replica i on the
device the layout names), and each replica's result is checked against
NumPy: every collective x reduce op x dtype x group layout. The engine's
own programs are the flat, one-group ones (``flat`` layouts); the others
(several dims, several replica groups in one program, permuted and partial
device assignments, odd group sizes) check the emitter beyond what the
engine asks of it today.
"""

import numpy as np
import pytest
import torch

from torch_tpu import _C

pytestmark = pytest.mark.strict_pass("the harness runs programs directly, in no eager mode")

# name: (devices per replica, replica groups (None = one group of all), input shape per replica)
LAYOUTS = {
    "flat4": ([0, 1, 2, 3], None, (24,)),            # the engine's form: 1-D, one group
    "flat2_subset": ([5, 6], None, (12,)),           # a two-rank subgroup's program
    "permuted": ([3, 1, 0, 2], None, (8, 3)),
    "odd3": ([1, 4, 7], None, (6, 2)),
    "pairs": ([0, 1, 2, 3], [[0, 1], [2, 3]], (4, 5)),
    "strided": ([0, 1, 2, 3], [[0, 2], [1, 3]], (6,)),
    "eight": (list(range(8)), None, (16,)),
}
FAST_LAYOUTS = ["flat4", "pairs", "odd3"]

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64,
          torch.int64, torch.int32, torch.uint8, torch.bool]
REDUCES = ["sum", "avg", "product", "min", "max", "premul_sum"]


def tolerance(dtype):
    return {torch.float32: (1e-5, 1e-5), torch.float64: (1e-12, 1e-12),
            torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3)}.get(dtype, (0, 0))


def make_inputs(n, shape, dtype, reduce, gen):
    out = []
    for _ in range(n):
        if dtype == torch.bool:
            t = torch.rand(shape, generator=gen) > 0.5
        elif dtype.is_floating_point:
            t = (torch.rand(shape, generator=gen) + 0.5) if reduce == "product" else torch.randn(shape, generator=gen)
            t = t.to(dtype)
        elif dtype == torch.uint8:
            t = torch.randint(0, 4 if reduce == "product" else 60, shape, generator=gen, dtype=dtype)
        else:
            lo, hi = (-3, 4) if reduce == "product" else (-1000, 1000)
            t = torch.randint(lo, hi, shape, generator=gen, dtype=dtype)
        out.append(t)
    return out


def np_of(t):
    return t.float().numpy() if t.dtype in (torch.bfloat16, torch.float16) else t.numpy()


def np_reduce(arrays, reduce, dtype, factor):
    a = np.stack(arrays)
    if dtype == torch.bool:
        return a.any(0) if reduce in ("sum", "max") else a.all(0)
    if reduce == "premul_sum":
        return (a * factor).sum(0)
    if reduce in ("sum", "avg"):
        s = a.sum(0, dtype=a.dtype)
        if reduce == "sum":
            return s
        if a.dtype.kind == "f":
            return s / len(arrays)
        return (np.sign(s) * (np.abs(s) // len(arrays))).astype(a.dtype)  # truncates toward zero
    if reduce == "product":
        return a.prod(0, dtype=a.dtype)
    return a.min(0) if reduce == "min" else a.max(0)


def groups_of(layout):
    devices, groups, _ = LAYOUTS[layout]
    return groups or [list(range(len(devices)))]


def expected(kind, reduce, inputs, layout, dtype, root=0, pairs=(), factor=None):
    xs = [np_of(t) for t in inputs]
    out = [None] * len(xs)
    for g in groups_of(layout):
        n = len(g)
        for p, r in enumerate(g):
            if kind == "all_reduce":
                out[r] = np_reduce([xs[q] for q in g], reduce, dtype, factor)
            elif kind == "all_gather":
                out[r] = np.concatenate([xs[q] for q in g])
            elif kind == "reduce_scatter":
                out[r] = np.split(np_reduce([xs[q] for q in g], reduce, dtype, factor), n)[p]
            elif kind == "all_to_all":
                out[r] = np.concatenate([np.split(xs[q], n)[p] for q in g])
            elif kind == "broadcast":
                out[r] = xs[g[root]]
            elif kind == "scatter":
                out[r] = np.split(xs[g[root]], n)[p]
    if kind == "permute":
        out = [np.zeros_like(x) for x in xs]
        for s, d in pairs:
            out[d] = xs[s]
    return out


def run_case(kind, reduce, dtype, layout, root=0, pairs=(), seed=0):
    devices, groups, shape = LAYOUTS[layout]
    gen = torch.Generator().manual_seed(seed)
    inputs = make_inputs(len(devices), shape, dtype, reduce, gen)
    factor = 0.75 if reduce == "premul_sum" else None
    results, mlir = _C._dist_harness(kind, reduce, inputs, devices, groups or [], root,
                                     list(pairs), factor)
    op = {"broadcast": "all_reduce", "scatter": "all_to_all", "permute": "collective_permute"}.get(kind, kind)
    assert f'"stablehlo.{op}"' in mlir, mlir
    want = expected(kind, reduce, inputs, layout, dtype, root, pairs, factor)
    rtol, atol = tolerance(dtype)
    for r, (got, ref) in enumerate(zip(results, want)):
        assert got.dtype == dtype
        g = np_of(got)
        assert g.shape == ref.shape, (r, g.shape, ref.shape)
        if rtol == 0:
            np.testing.assert_array_equal(g, ref, err_msg=f"replica {r}")
        else:
            np.testing.assert_allclose(g, ref, rtol=rtol, atol=atol, err_msg=f"replica {r}")
    return results


def reduce_cases():
    for kind in ("all_reduce", "reduce_scatter"):
        for dtype in DTYPES:
            for reduce in REDUCES:
                if dtype == torch.bool and reduce in ("avg", "premul_sum"):
                    continue
                if reduce == "premul_sum" and not dtype.is_floating_point:
                    continue
                layouts = LAYOUTS if dtype in (torch.float32, torch.int32) else FAST_LAYOUTS
                for layout in layouts:
                    yield pytest.param(kind, reduce, dtype, layout,
                                       id=f"{kind}-{reduce}-{str(dtype)[6:]}-{layout}")


@pytest.mark.parametrize("kind,reduce,dtype,layout", list(reduce_cases()))
def test_reducing_collectives(kind, reduce, dtype, layout):
    run_case(kind, reduce, dtype, layout)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("kind", ["all_gather", "all_to_all", "broadcast", "scatter"])
def test_data_movement(kind, dtype, layout):
    if layout not in FAST_LAYOUTS and dtype not in (torch.float32, torch.int64, torch.bool):
        pytest.skip("the full layout sweep runs for float32, int64 and bool")
    n = len(groups_of(layout)[0])
    for root in sorted({0, n - 1}) if kind in ("broadcast", "scatter") else [0]:
        run_case(kind, "sum", dtype, layout, root=root)


def test_broadcast_keeps_every_bit():
    # -0.0, NaN payloads, infinities and denormals arrive unchanged.
    bits = torch.tensor([0x80000000, 0x7FC00001, 0xFFC12345, 0x7F800000, 0x00000001, 0x3F800000],
                        dtype=torch.int64).to(torch.int32).view(torch.float32)
    other = torch.zeros(6)
    results, _ = _C._dist_harness("broadcast", "sum", [other, bits, other], [0, 1, 2], [], 1, [], None)
    for r in results:
        assert torch.equal(r.view(torch.int32), bits.view(torch.int32))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("pairs", [[(0, 1)], [(1, 0)], [(0, 1), (1, 2), (2, 3), (3, 0)], [(2, 0), (0, 3)]],
                         ids=["send01", "send10", "ring", "partial"])
def test_permute(dtype, pairs):
    n = 1 + max(max(p) for p in pairs)
    n = 2 if n <= 2 else 4
    layout = "flat2_subset" if n == 2 else "flat4"
    run_case("permute", "sum", dtype, layout, pairs=pairs)


def test_programs_are_the_engine_form():
    # The engine sends flat 1-D tensors through one-group programs.
    _, mlir = _C._dist_harness("all_reduce", "sum", [torch.ones(5)] * 2, [0, 1], [], 0, [], None)
    assert "mhlo.num_replicas = 2" in mlir
    assert "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>" in mlir
    assert "tensor<5xf32>" in mlir


@pytest.mark.parametrize("call,match", [
    (lambda: _C._dist_harness("reduce_scatter", "sum", [torch.ones(5)] * 2, [0, 1]), "divisible"),
    (lambda: _C._dist_harness("all_reduce", "avg", [torch.ones(4, dtype=torch.bool)] * 2, [0, 1]), "bool"),
    (lambda: _C._dist_harness("all_reduce", "premul_sum", [torch.ones(4, dtype=torch.int32)] * 2, [0, 1],
                              factor=2.0), "floating"),
    (lambda: _C._dist_harness("broadcast", "sum", [torch.ones(4)] * 2, [0, 1], root=2), "root"),
    (lambda: _C._dist_harness("all_reduce", "sum", [torch.ones(4)] * 4, [0, 1, 2, 3], [[0, 1], [2]]), "same size"),
    (lambda: _C._dist_harness("permute", "sum", [torch.ones(4)] * 2, [0, 1], pairs=[(0, 1), (0, 1)]), "at most once"),
    (lambda: _C._dist_harness("all_reduce", "mean", [torch.ones(4)] * 2, [0, 1]), "unknown reduce"),
])
def test_bad_specs_raise(call, match):
    with pytest.raises((ValueError, RuntimeError), match=match):
        call()
