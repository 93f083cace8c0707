"""The in-memory compile cache: one program per op structure, reused.

Every op is followed by torch_tpu.synchronize(), so in each eager mode the
same programs run and the counts below hold.
"""

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
