"""Training steps per second of a small GPT-style decoder (4 layers,
d_model 256, sequence 128, batch 8): PyTorch CPU eager, tpu Strict Eager and
tpu Fused Eager, measured in one run. The tpu side runs at HIGHEST precision
(numerics equal to the CPU peer's) with DEFAULT reported beside it. Each
step reads the loss (loss.item()), as a training loop that logs does.
Usage: python benchmarks/train_step.py [--steps 20] [--warmup 3]
"""

import argparse
import copy
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_tpu  # noqa: E402
from gpt import GPT, train_step  # noqa: E402
from torch_tpu import EagerMode, Precision  # noqa: E402


def steps_per_second(model, device, steps, warmup, data):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx, tgt = (d.to(device) for d in data)
    for _ in range(warmup):
        train_step(model, opt, idx, tgt).item()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = train_step(model, opt, idx, tgt).item()
    return steps / (time.perf_counter() - t0), loss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    args = p.parse_args()
    torch.manual_seed(0)
    model = GPT(seq=args.seq)
    data = (torch.randint(0, 1024, (args.batch, args.seq)), torch.randint(0, 1024, (args.batch, args.seq)))
    rows = []
    torch.set_float32_matmul_precision("highest")
    cpu, loss_cpu = steps_per_second(model, "cpu", args.steps, args.warmup, data)
    rows.append(("PyTorch CPU eager", cpu, loss_cpu))
    for prec in (Precision.HIGHEST, Precision.DEFAULT):
        for mode, name in ((EagerMode.DEFER_NEVER, "Strict"), (EagerMode.DEFER_AND_FUSE, "Fused")):
            with torch_tpu.eager_mode(mode), torch_tpu.precision(prec):
                sps, loss = steps_per_second(model, "tpu", args.steps, args.warmup, data)
            rows.append((f"tpu {name} Eager, {prec.name}", sps, loss))
    print(f"device: {torch.tpu.get_device_name()}; GPT 4x256, seq {args.seq}, batch {args.batch}, "
          f"AdamW; {args.steps} timed steps after {args.warmup} warm-up")
    print(f"{'run':34s} {'steps/s':>8s} {'vs CPU':>7s} {'final loss':>11s}")
    for name, sps, loss in rows:
        print(f"{name:34s} {sps:8.2f} {sps / cpu:6.2f}x {loss:11.5f}")
    strict = rows[1][1]
    fused = rows[2][1]
    print(f"Fused / Strict at HIGHEST: {fused / strict:.2f}x")


if __name__ == "__main__":
    main()
