"""Cold and warm cost of one small op on tpu beside PyTorch CPU eager.

A test suite, a notebook or a data pipeline makes many small ops of shapes
not seen before; each new shape is a new program. For each op this runs the
op on `--shapes` shapes the process has not seen (the persistent cache off,
so each is compiled), timing each first call to its finished result, then
the per-call time of repeated calls of one shape (cached). The compile
column is the XLA compile time the executor measured (its compile_seconds
statistic); "other" is the rest of the cold call: tracing, lowering to
StableHLO, loading and running. Each table row is measured twice, in two
processes: with every program fully optimized (TORCH_TPU_QUICK_COMPILE_ELEMENTS=0)
and with the default quick tier for small programs.

Usage: python benchmarks/cold_ops.py [--shapes 12] [--iters 300] [--mode strict|fused|debug]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODES = {"strict": {}, "fused": {"TORCH_TPU_DEFER_AND_FUSE": "1"},
         "debug": {"TORCH_TPU_LAUNCH_BLOCKING": "1"}}


def ops(torch):
    F = torch.nn.functional
    return {
        "add": lambda a, i: a + a,
        "mul scalar": lambda a, i: a * 3.0,
        "sum(dim=1)": lambda a, i: a.sum(1),
        "softmax": lambda a, i: F.softmax(a, 1),
        "matmul": lambda a, i: a @ a.t(),
        "index_select": lambda a, i: a.index_select(0, i),
        "x[idx]": lambda a, i: a[i],
        "cat": lambda a, i: torch.cat([a, a], 1),
        "where": lambda a, i: torch.where(a > 0, a, 0.0),
    }


def child(args):
    import torch

    import torch_tpu

    stats = torch.tpu._get_cache_stats
    out = {}
    # Sizes the process sees once each: row counts no op repeats.
    base = 3
    for name, fn in ops(torch).items():
        cold, comp = [], []
        for k in range(args.shapes):
            n = base + k
            a = torch.randn(n, 7).to("tpu")
            i = torch.arange(n).flip(0).to("tpu")
            torch_tpu.synchronize()
            s0 = stats()["compile_seconds"]
            t0 = time.perf_counter()
            r = fn(a, i)
            r.cpu()
            cold.append(time.perf_counter() - t0)
            comp.append(stats()["compile_seconds"] - s0)
        base += args.shapes
        a = torch.randn(16, 16).to("tpu")
        i = torch.arange(16).flip(0).to("tpu")
        fn(a, i).cpu()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            r = fn(a, i)
        r.cpu()
        warm = (time.perf_counter() - t0) / args.iters
        ac, ic = a.cpu(), i.cpu()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            fn(ac, ic)
        cpu = (time.perf_counter() - t0) / args.iters
        # Each first call's own figures, then the median of the shapes
        # (the first shape also pays one-off set-up: see "first").
        out[name] = {"cold_ms": statistics.median(cold) * 1e3, "first_ms": cold[0] * 1e3,
                     "compile_ms": statistics.median(comp) * 1e3, "warm_us": warm * 1e6,
                     "cpu_us": cpu * 1e6}
    print("RESULT " + json.dumps(out), flush=True)


def run_child(args, extra_env):
    env = dict(os.environ, TORCH_TPU_COMPILATION_CACHE_DIR="off", **MODES[args.mode], **extra_env)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--shapes", str(args.shapes),
           "--iters", str(args.iters)]
    res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(next(l for l in res.stdout.splitlines() if l.startswith("RESULT "))[7:])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", type=int, default=12)
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--mode", default="strict", choices=sorted(MODES))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    # Small programs compiled with the full optimizations (the quick tier
    # off) and with the default quick tier, each in a process of its own.
    full = run_child(args, {"TORCH_TPU_QUICK_COMPILE_ELEMENTS": "0"})
    quick = run_child(args, {})
    print(f"{args.mode}: cold = first call of a new shape, median of {args.shapes} shapes "
          f"(n, 7); warm = cached, per call; full = every program optimized, quick = the "
          f"default (small programs compiled quickly)")
    print(f"{'op':14s} {'cold full':>9s} {'cold quick':>10s} {'compile':>8s} {'other':>6s} "
          f"{'warm full':>9s} {'warm quick':>10s} {'CPU us':>7s}")
    for name in quick:
        f, q = full[name], quick[name]
        print(f"{name:14s} {f['cold_ms']:7.2f}ms {q['cold_ms']:8.2f}ms {q['compile_ms']:6.2f}ms "
              f"{q['cold_ms'] - q['compile_ms']:6.2f} {f['warm_us']:7.1f}us {q['warm_us']:8.1f}us "
              f"{q['cpu_us']:7.1f}")
    cf = statistics.median(r["cold_ms"] for r in full.values())
    cq = statistics.median(r["cold_ms"] for r in quick.values())
    wf = statistics.median(r["warm_us"] for r in full.values())
    wq = statistics.median(r["warm_us"] for r in quick.values())
    print(f"median cold small op: full {cf:.2f} ms, quick {cq:.2f} ms ({cf / cq:.2f}x faster); "
          f"median warm: full {wf:.1f} us, quick {wq:.1f} us")


if __name__ == "__main__":
    main()
