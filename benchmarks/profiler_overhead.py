"""Profiler overhead: the dispatch benchmark's chain of small ops, per op,
with no profiler, under torch.profiler with the CPU activity only, and with
CPU + tpu (kernels, execute spans, copies), beside PyTorch CPU eager with
no profiler and with the CPU activity (the peer's own profiler cost).

"off" is the cost of the instrumentation when no profiler runs: the same
chain as benchmarks/dispatch.py, so its figures compare with that script's.
Each configuration runs in turn, several repetitions; the figure is each
one's best.
Usage: python benchmarks/profiler_overhead.py [--ops 600] [--reps 5] [--mode strict|fused]
"""

import argparse
import contextlib
import time

import torch
from torch.profiler import ProfilerActivity, profile

import torch_tpu
from torch_tpu import EagerMode
from dispatch import chain


def timed(x, n, ctx):
    with ctx():
        t0 = time.perf_counter()
        chain(x, n).sum().item()
        t = time.perf_counter() - t0
    return t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=600)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--mode", choices=("strict", "fused"), default="strict")
    args = p.parse_args()
    mode = EagerMode.DEFER_NEVER if args.mode == "strict" else EagerMode.DEFER_AND_FUSE
    x = torch.randn(32, 32)
    xt = x.to("tpu")
    off = contextlib.nullcontext
    cpu_prof = lambda: profile(activities=[ProfilerActivity.CPU])  # noqa: E731
    tpu_prof = lambda: profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])  # noqa: E731
    runs = {
        "PyTorch CPU eager, no profiler": lambda: timed(x, args.ops, off),
        "PyTorch CPU eager, CPU activity": lambda: timed(x, args.ops, cpu_prof),
        f"tpu {args.mode}, no profiler": lambda: timed(xt, args.ops, off),
        f"tpu {args.mode}, CPU activity": lambda: timed(xt, args.ops, cpu_prof),
        f"tpu {args.mode}, CPU + tpu": lambda: timed(xt, args.ops, tpu_prof),
    }
    with torch_tpu.eager_mode(mode):
        for run in runs.values():  # warm-up: compile caches, Kineto's start-up
            run()
        best = {k: float("inf") for k in runs}
        for _ in range(args.reps):
            for k, run in runs.items():
                best[k] = min(best[k], run())
    us = {k: v / args.ops * 1e6 for k, v in best.items()}
    keys = list(us)
    print(f"device: {torch.tpu.get_device_name()}; chain of {args.ops} elementwise ops on 32x32 f32, "
          f"tpu in {args.mode} mode; best of {args.reps}")
    print(f"{'configuration':34s} {'us/op':>8s} {'vs no profiler':>15s}")
    for k in keys:
        base = us[keys[0]] if k.startswith("PyTorch") else us[keys[2]]
        print(f"{k:34s} {us[k]:8.2f} {us[k] / base:14.2f}x")
    print(f"profiling-on overhead, tpu {args.mode}: CPU activity +{us[keys[3]] - us[keys[2]]:.2f} us/op, "
          f"CPU + tpu +{us[keys[4]] - us[keys[2]]:.2f} us/op "
          f"(PyTorch CPU eager's CPU activity: +{us[keys[1]] - us[keys[0]]:.2f} us/op)")


if __name__ == "__main__":
    main()
