"""Dispatch cost: a chain of small elementwise ops.

Runs the same chain of N ops (add / mul / tanh on a 32x32 tensor; --size
sets the side, where larger tensors measure memory traffic as well) with
PyTorch CPU eager, tpu Strict Eager and tpu Fused Eager in one process and
prints microseconds per op and ratios. The first repetition warms the
compile caches; the modes then take turns for the timed repetitions and
the figure is each one's best.
Usage: python benchmarks/dispatch.py [--ops 1000] [--reps 5] [--size 32]
"""

import argparse
import time

import torch
import torch_tpu
from torch_tpu import EagerMode


def chain(x, n):
    for i in range(n):
        k = i % 3
        if k == 0:
            x = x + 0.5
        elif k == 1:
            x = x * 0.9
        else:
            x = torch.tanh(x)
    return x


def _in_mode(mode, fn):
    with torch_tpu.eager_mode(mode):
        return fn()


def timed(x, n, finish):
    t0 = time.perf_counter()
    finish(chain(x, n))
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=1000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--size", type=int, default=32)
    args = p.parse_args()
    x = torch.randn(args.size, args.size)
    xt = x.to("tpu")
    finish = lambda y: y.sum().item()  # noqa: E731
    runs = {
        "cpu": lambda: timed(x, args.ops, finish),
        "strict": lambda: _in_mode(EagerMode.DEFER_NEVER, lambda: timed(xt, args.ops, finish)),
        "fused": lambda: _in_mode(EagerMode.DEFER_AND_FUSE, lambda: timed(xt, args.ops, finish)),
    }
    for run in runs.values():  # warm-up: compile caches, allocators
        run()
    # The modes take turns, so a slow spell of the machine hits all of them.
    best = {k: float("inf") for k in runs}
    for _ in range(args.reps):
        for k, run in runs.items():
            best[k] = min(best[k], run())
    cpu, strict, fused = (best[k] / args.ops * 1e6 for k in ("cpu", "strict", "fused"))
    print(f"device: {torch.tpu.get_device_name()}; chain of {args.ops} elementwise ops on {args.size}x{args.size} f32")
    print(f"{'mode':24s} {'us/op':>8s} {'vs CPU eager':>13s}")
    print(f"{'PyTorch CPU eager':24s} {cpu:8.2f} {1.0:12.2f}x")
    print(f"{'tpu Strict Eager':24s} {strict:8.2f} {strict / cpu:12.2f}x")
    print(f"{'tpu Fused Eager':24s} {fused:8.2f} {fused / cpu:12.2f}x")
    print(f"Fused vs Strict: {strict / fused:.2f}x faster")


if __name__ == "__main__":
    main()
