"""Cost of HIGH and HIGHEST relative to DEFAULT for a large f32 matmul on
the current plugin (on XLA CPU the bf16 passes are emulated, so the ratios
show the emulation's cost, not a TPU's).
Usage: python benchmarks/precision_cost.py [--n 1024] [--reps 5]
"""

import argparse
import time
import warnings

import torch
import torch_tpu
from torch_tpu import Precision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    a, b = torch.randn(args.n, args.n).to("tpu"), torch.randn(args.n, args.n).to("tpu")
    times = {}
    warnings.simplefilter("ignore")
    for mode in Precision:
        with torch_tpu.precision(mode):
            (a @ b).cpu()  # compile
            best = float("inf")
            for _ in range(args.reps):
                torch_tpu.synchronize()
                t0 = time.perf_counter()
                c = a @ b
                torch_tpu.synchronize([c])
                best = min(best, time.perf_counter() - t0)
        times[mode] = best
    print(f"device: {torch.tpu.get_device_name()}; {args.n}x{args.n} @ {args.n}x{args.n} f32, best of {args.reps}")
    for mode in Precision:
        print(f"{mode.name:8s} {times[mode] * 1e3:9.2f} ms  {times[mode] / times[Precision.DEFAULT]:5.2f}x DEFAULT")


if __name__ == "__main__":
    main()
