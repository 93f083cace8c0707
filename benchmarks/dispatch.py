"""Dispatch cost: a chain of small elementwise ops.

Runs the same chain of N ops (add / mul / tanh on a 32x32 tensor) with
PyTorch CPU eager, tpu Strict Eager and tpu Fused Eager in one process and
prints microseconds per op and ratios. The first repetition warms the
compile caches; the figure is the best of the timed repetitions.
Usage: python benchmarks/dispatch.py [--ops 1000] [--reps 5]
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


def per_op_us(x, n, reps, finish):
    best = float("inf")
    for rep in range(reps + 1):
        t0 = time.perf_counter()
        finish(chain(x, n))
        dt = time.perf_counter() - t0
        if rep > 0:
            best = min(best, dt)
    return best / n * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=1000)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    x = torch.randn(32, 32)
    cpu = per_op_us(x, args.ops, args.reps, lambda y: y.sum().item())
    xt = x.to("tpu")
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
        strict = per_op_us(xt, args.ops, args.reps, lambda y: y.sum().item())
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
        fused = per_op_us(xt, args.ops, args.reps, lambda y: y.sum().item())
    print(f"device: {torch.tpu.get_device_name()}; chain of {args.ops} elementwise ops on 32x32 f32")
    print(f"{'mode':24s} {'us/op':>8s} {'vs CPU eager':>13s}")
    print(f"{'PyTorch CPU eager':24s} {cpu:8.2f} {1.0:12.2f}x")
    print(f"{'tpu Strict Eager':24s} {strict:8.2f} {strict / cpu:12.2f}x")
    print(f"{'tpu Fused Eager':24s} {fused:8.2f} {fused / cpu:12.2f}x")
    print(f"Fused vs Strict: {strict / fused:.2f}x faster")


if __name__ == "__main__":
    main()
