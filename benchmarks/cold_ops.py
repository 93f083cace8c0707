"""Cold and warm cost of one small op on tpu beside PyTorch CPU eager.

A test suite, a notebook or a data pipeline makes many small ops of shapes
not seen before; each new shape is a new program. For each op this runs the
op on `--shapes` shapes the process has not seen (the persistent cache off,
so each is compiled), timing each first call to its finished result, then
the per-call time of repeated calls of one shape (cached). The compile
column is the XLA compile time the executor measured (its compile_seconds
statistic); "other" is the rest of the cold call: tracing, lowering to
StableHLO, loading and running.

Usage: python benchmarks/cold_ops.py [--shapes 12] [--iters 300] [--mode strict|fused|debug]
Each mode runs in a child process of its own; the default runs strict.
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
            a = torch.randn(n, 17 + (base % 5)).to("tpu")
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", type=int, default=12)
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--mode", default="strict", choices=sorted(MODES))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    env = dict(os.environ, TORCH_TPU_COMPILATION_CACHE_DIR="off", **MODES[args.mode])
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--shapes", str(args.shapes),
           "--iters", str(args.iters)]
    res = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=True)
    data = json.loads(next(l for l in res.stdout.splitlines() if l.startswith("RESULT "))[7:])
    print(f"{args.mode}: cold = first call of a new shape (median of {args.shapes}), "
          f"warm = cached, per call")
    print(f"{'op':14s} {'cold ms':>8s} {'compile':>8s} {'other':>7s} {'first':>7s} "
          f"{'warm us':>8s} {'CPU us':>7s} {'warm/CPU':>8s}")
    for name, r in data.items():
        print(f"{name:14s} {r['cold_ms']:8.2f} {r['compile_ms']:8.2f} "
              f"{r['cold_ms'] - r['compile_ms']:7.2f} {r['first_ms']:7.1f} {r['warm_us']:8.1f} "
              f"{r['cpu_us']:7.1f} {r['warm_us'] / r['cpu_us']:7.2f}x")
    cold = statistics.median(r["cold_ms"] for r in data.values())
    print(f"median cold small op: {cold:.2f} ms")


if __name__ == "__main__":
    main()
