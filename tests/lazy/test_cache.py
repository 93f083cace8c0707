"""The in-memory compile cache: one program per op structure, reused.

Every op is followed by torch_tpu.synchronize(), so in each eager mode the
same programs run and the counts below hold.
"""

import pytest
import torch
import torch_tpu


def _compiles():
    """Misses of the in-memory cache (compiled, or loaded from disk)."""
    s = torch.tpu._get_cache_stats()
    return s["requests"] - s["hits"]


def test_slices_at_changing_offsets_compile_once():
    data = torch.randn(64, 8)
    torch_tpu.synchronize()  # Fused Eager: earlier tests' pending ops run first
    x = data.to("tpu")
    out = []
    (x[0:4] * 2).cpu()  # first use compiles
    before = _compiles()
    for lo in range(4, 60, 4):
        out.append((x[lo:lo + 4] * 2).cpu())
    assert _compiles() == before
    for i, lo in enumerate(range(4, 60, 4)):
        torch.testing.assert_close(out[i], data[lo:lo + 4] * 2)


def test_writes_at_changing_offsets_compile_once():
    dst_cpu = torch.zeros(32, 3)
    dst = dst_cpu.to("tpu")
    row = torch.randn(1, 3)
    dst[0:1] = row.to("tpu")
    torch_tpu.synchronize()
    before = _compiles()
    for i in range(1, 32):
        v = torch.full((1, 3), float(i))
        dst[i:i + 1] = v.to("tpu")
        torch_tpu.synchronize()
        dst_cpu[i:i + 1] = v
    dst_cpu[0:1] = row
    assert _compiles() == before
    torch.testing.assert_close(dst.cpu(), dst_cpu)


def test_changing_scalars_do_not_recompile():
    x = torch.randn(16).to("tpu")
    y = x * 0.5
    torch_tpu.synchronize()
    before = _compiles()
    for k in range(10):
        y = x * (0.1 * k + 0.7)  # a new learning-rate-like value each time
        torch_tpu.synchronize()
    assert _compiles() == before
    torch.testing.assert_close(y.cpu(), x.cpu() * (0.1 * 9 + 0.7))


def test_cache_stats_count_hits():
    a = torch.randn(5, 7).to("tpu")
    b = a + a
    torch_tpu.synchronize()
    s0 = torch.tpu._get_cache_stats()
    b = a + a
    torch_tpu.synchronize()
    s1 = torch.tpu._get_cache_stats()
    assert s1["requests"] == s0["requests"] + 1
    assert s1["hits"] == s0["hits"] + 1
    assert all(secs >= 0 for _, secs in s1["entries"])


def test_strided_views_at_changing_offsets_compile_once():
    # x[:, i] and x[:, i, :] = ... for every i: one program each, the offset
    # a run-time operand (a strided block read and written without a gather
    # or scatter), values as on CPU.
    data, src = torch.randn(6, 5, 4), torch.randn(6, 5, 4)
    torch_tpu.synchronize()
    x, s = data.to("tpu"), src.to("tpu")
    cols = [x[:, 0, :].clone().cpu()]
    x[:, 0, 1:3] = s[:, 0, 1:3]
    torch_tpu.synchronize()
    before = _compiles()
    for i in range(1, 5):
        cols.append(x[:, i, :].clone().cpu())
        x[:, i, 1:3] = s[:, i, 1:3]
        torch_tpu.synchronize()  # Fused Eager: the same batches as the first round
    assert _compiles() == before
    ref = data.clone()
    for i in range(5):
        torch.testing.assert_close(cols[i], data[:, i, :], rtol=0, atol=0)
        ref[:, i, 1:3] = src[:, i, 1:3]
    torch.testing.assert_close(x.cpu(), ref, rtol=0, atol=0)
    # A transposed block, written at changing offsets.
    y = torch.zeros(8, 9, device="tpu")
    yc = torch.zeros(8, 9)
    for i in range(3):
        blk = torch.randn(3, 4)
        y[i:i + 4, 2 * i:2 * i + 3] = blk.t().to("tpu")
        yc[i:i + 4, 2 * i:2 * i + 3] = blk.t()
    torch.testing.assert_close(y.cpu(), yc, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_slices_of_a_randomly_filled_tensor_compile_once(dtype):
    # randn fills a complex tensor through its real view; its complex rows,
    # read at changing offsets, then share one program per op.
    x = torch.randn(8, 16, dtype=dtype, device="tpu")
    torch_tpu.synchronize()

    def row(r):
        out = (torch.exp(r), r + 1)
        torch_tpu.synchronize()  # Fused Eager: the same batch for every row
        return out

    outs = [row(x[0])]
    before = _compiles()
    outs += [row(r) for r in x[1:]]
    assert _compiles() == before
    xc = x.cpu()
    for i, (e, a) in enumerate(outs):
        torch.testing.assert_close(e.cpu(), torch.exp(xc[i]))
        torch.testing.assert_close(a.cpu(), xc[i] + 1)


def test_a_quick_program_run_often_is_recompiled_fully_once():
    # A small op of a new shape compiles the quick way (cheap to compile, slow
    # code); after 100 runs it is compiled with every optimization, once, and
    # the results stay those of CPU.
    x = torch.randn(13, 29)
    xt = x.to("tpu")
    torch.tanh(xt).cpu()
    s0 = torch.tpu._get_cache_stats()
    for _ in range(120):
        y = torch.tanh(xt)
        torch_tpu.synchronize()  # one program per call in every mode
    torch.testing.assert_close(y.cpu(), torch.tanh(x))
    s1 = torch.tpu._get_cache_stats()
    assert s1["tier_ups"] == s0["tier_ups"] + 1
    assert s1["compiles"] == s0["compiles"]  # a tier-up is counted on its own
    for _ in range(120):
        y = torch.tanh(xt)
        torch_tpu.synchronize()
    torch.testing.assert_close(y.cpu(), torch.tanh(x))
    assert torch.tpu._get_cache_stats()["tier_ups"] == s1["tier_ups"]


def _mappings():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/maps"),
                    reason="counts the process's memory mappings in /proc")
def test_cache_stays_within_the_memory_mapping_budget():
    # Each cached executable holds memory mappings of its JIT code; a cache
    # bounded by entries alone once took a long run past vm.max_map_count,
    # where the JIT failed half-way and the next C++ exception crashed the
    # process. From an empty cache, under a budget 300 mappings above the
    # process's count, 150 new programs (3 or more mappings each) must evict
    # to fit.
    from torch_tpu import _C
    torch_tpu.synchronize()
    _C._clear_cache()
    budget = _mappings() + 300
    evicted = torch.tpu._get_cache_stats()["evicted"]
    _C._set_map_budget_for_testing(budget)
    try:
        for i in range(150):
            x = torch.randn(i + 1, 2)
            torch.testing.assert_close((x.to("tpu") * 3).cos().cpu(), (x * 3).cos())
            torch_tpu.synchronize()
        assert _C._map_limit_for_testing() > 0
        assert torch.tpu._get_cache_stats()["evicted"] > evicted
        # Checked every 16 new programs: at most that many over.
        assert _mappings() <= budget + 16 * 12
        assert torch.tpu._get_cache_stats()["cached"] < 150
        # The process's exceptions still unwind.
        with pytest.raises(RuntimeError, match="invalid for input of size"):
            torch.ones(2, device="tpu").view(3)
    finally:
        _C._set_map_budget_for_testing(0)
    assert _C._map_limit_for_testing() == 0
