"""What the tpu runtime has done since start-up (or the last ``reset()``):
compiles and their time, cache hits by tier, programs executed, host syncs
and the lines that caused them, host<->device transfers, CPU fallbacks by
op, and recompiles by cause.

    import torch_tpu.metrics as tm
    for step in range(n):
        train_step()
        if step == 2:
            tm.reset()          # after warm-up
    print(tm.report())          # what a step costs, and what to fix

``metrics()`` returns the same figures as a dict.
"""

from __future__ import annotations

from . import _C

__all__ = ["metrics", "report", "reset"]


def metrics() -> dict:
    """The counters as a dict. Keys:

    ``compiles``, ``compile_seconds``: programs compiled (persistent-cache
    misses) and their time; ``disk_hits``, ``load_seconds``: executables
    loaded from the persistent cache; ``memory_hits``: programs found in the
    in-memory cache; ``programs_executed``; ``buffers_donated`` and
    ``donated_bytes``: old values of tensors updated in place whose memory
    the program that updated them reused; ``host_syncs`` and
    ``host_sync_sites`` ((reason at user line, count) pairs);
    ``h2d_copies``/``h2d_bytes`` and ``d2h_copies``/``d2h_bytes``;
    ``cpu_fallbacks`` ((op, count) pairs); ``recompiles`` ((cause, count)
    pairs: "new shape", "new dtype", "new precision", "new attributes") and
    ``recent_recompiles`` ((cause, program) pairs, the last 32);
    ``executables_cached`` and ``executables_evicted`` (the in-memory cache).
    """
    m = dict(_C._metrics())
    cache = _C._cache_stats()
    # The executor's own cache statistics, since the last reset.
    for key, name in _FROM_CACHE.items():
        m[name] = cache[key] - _baseline.get(key, 0)
    m["executables_cached"] = cache["cached"]
    m["executables_evicted"] = cache["evicted"] - _baseline.get("evicted", 0)
    return m


# metrics() key for each of _C._cache_stats()' counters it reports.
_FROM_CACHE = {"launches": "programs_executed", "hits": "memory_hits", "disk_hits": "disk_hits",
               "compiles": "compiles", "compile_seconds": "compile_seconds",
               "donated": "buffers_donated", "donated_bytes": "donated_bytes"}
_baseline: dict = {}


def reset() -> None:
    """Zeroes the counters (the caches are kept: a reset after warm-up shows
    what the steady state costs)."""
    _C._reset_metrics()
    cache = _C._cache_stats()
    _baseline.clear()
    _baseline.update({k: cache[k] for k in (*_FROM_CACHE, "evicted")})


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def report(top: int = 5) -> str:
    """A printable summary, with advice where the figures show a problem
    (recompiles, host syncs, CPU fallbacks)."""
    m = metrics()
    lookups = m["memory_hits"] + m["disk_hits"] + m["compiles"]
    lines = [
        "torch_tpu metrics",
        f"  programs executed      {m['programs_executed']}",
        f"  program lookups        {lookups}: {m['memory_hits']} in memory, "
        f"{m['disk_hits']} from disk ({m['load_seconds']:.2f} s), "
        f"{m['compiles']} compiled ({m['compile_seconds']:.2f} s)",
        f"  executables in memory  {m['executables_cached']} ({m['executables_evicted']} evicted)",
        f"  host -> device         {m['h2d_copies']} copies, {_bytes(m['h2d_bytes'])}",
        f"  device -> host         {m['d2h_copies']} copies, {_bytes(m['d2h_bytes'])}",
        f"  host syncs             {m['host_syncs']}",
    ]
    advice = []
    sites = sorted(m["host_sync_sites"], key=lambda kv: -kv[1])
    for site, n in sites[:top]:
        lines.append(f"    {n:6d}  {site}")
    recompiles = sum(n for _, n in m["recompiles"])
    lines.append(f"  recompiles             {recompiles}")
    for cause, n in sorted(m["recompiles"], key=lambda kv: -kv[1]):
        lines.append(f"    {n:6d}  {cause}")
    if m["recent_recompiles"]:
        lines.append("    last: " + "; ".join(f"{p} ({c})" for c, p in m["recent_recompiles"][-top:]))
    fallbacks = sorted(m["cpu_fallbacks"], key=lambda kv: -kv[1])
    lines.append(f"  CPU fallbacks          {sum(n for _, n in fallbacks)}")
    for op, n in fallbacks[:top]:
        lines.append(f"    {n:6d}  {op}")
    if recompiles:
        causes = dict(m["recompiles"])
        if causes.get("new shape"):
            advice.append("programs recompile for new shapes: pad inputs to a few fixed sizes "
                          "(bucketing), or use torch.compile(backend='tpu', dynamic=True) / "
                          "torch_tpu.mark_dynamic for a dimension that varies")
        if causes.get("new dtype"):
            advice.append("programs recompile for new dtypes: keep the step's dtypes fixed "
                          "(cast once, outside the loop)")
        if causes.get("new precision"):
            advice.append("the matmul precision changes between steps: set it once "
                          "(torch.set_float32_matmul_precision / torch_tpu.precision)")
        if causes.get("new attributes"):
            advice.append("programs recompile for new attributes (a Python scalar that changes "
                          "each step, such as a learning rate passed as a float): pass it as a "
                          "0-d tpu tensor")
    if sites:
        advice.append(f"the host waited for the device {m['host_syncs']} times "
                      f"(most at {sites[0][0]}): .item(), .cpu(), printing and bool() of a tpu "
                      "value wait for everything before it; keep them out of the step or do "
                      "them every N steps")
    if fallbacks:
        advice.append("ops ran on the CPU through the fallback (their data travels to the host "
                      f"and back): {', '.join(op for op, _ in fallbacks[:top])}")
    if advice:
        lines.append("  to look at:")
        lines.extend(f"    - {a}" for a in advice)
    return "\n".join(lines)
