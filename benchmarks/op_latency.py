"""Per-op time of a cached op on tpu beside PyTorch CPU eager.

Runs the same op (elementwise ops on small and on 1 MB tensors, and a 64x64
matmul) N times on each side in one process and prints microseconds per op
and the tpu/CPU ratio. The 1 MB cases show the cost of fresh output pages
on the CPU plugin (compare a run with TORCH_TPU_HOST_MALLOC_TUNING=0).
Usage: python benchmarks/op_latency.py [--iters N]
"""

import argparse
import time

import torch


def per_op_us(fn, x, y, iters, sync):
    for _ in range(20):  # warm-up: compile and cache
        out = fn(x, y)
    sync(out)
    t0 = time.perf_counter()
    for _ in range(iters):
        out = fn(x, y)
    sync(out)
    return (time.perf_counter() - t0) / iters * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=2000)
    args = p.parse_args()
    torch.set_float32_matmul_precision("highest")
    cases = [
        ("add 128 f32", lambda a, b: torch.add(a, b), (128,)),
        ("mul_ 1024 f32 (in-place)", lambda a, b: a.mul_(b), (1024,)),
        ("mm 64x64 f32", lambda a, b: a @ b, (64, 64)),
        ("add 512x512 f32 (1 MB)", lambda a, b: torch.add(a, b), (512, 512)),
        ("mul_ 512x512 f32 (in-place)", lambda a, b: a.mul_(b), (512, 512)),
    ]
    print(f"device: {torch.tpu.get_device_name()}; {args.iters} iterations per case")
    print(f"{'op':30s} {'cpu eager us':>13s} {'tpu strict us':>14s} {'tpu/cpu':>8s}")
    for name, fn, shape in cases:
        xc, yc = torch.rand(shape) + 0.5, torch.rand(shape) + 0.5
        cpu = per_op_us(fn, xc.clone(), yc, args.iters, lambda o: None)
        tpu = per_op_us(fn, xc.to("tpu"), yc.to("tpu"), args.iters, lambda o: o.cpu())
        print(f"{name:30s} {cpu:13.2f} {tpu:14.2f} {tpu / cpu:8.2f}")


if __name__ == "__main__":
    main()
