"""Training steps per second of a small GPT-style decoder (4 layers,
d_model 256, sequence 128, batch 8): PyTorch CPU eager, tpu Strict Eager and
tpu Fused Eager, measured in one run. The tpu side runs at HIGHEST precision
(numerics equal to the CPU peer's) with DEFAULT reported beside it. Each
step reads the loss (loss.item()), as a training loop that logs does; each
timed stretch ends when the device is done (torch.tpu.synchronize()).

The runs take turns: every configuration keeps its model and optimizer and
runs --steps timed steps per round, for --rounds rounds in rotation, and the
median round is reported, so that a machine whose speed drifts slows all of
them alike. Usage: python benchmarks/train_step.py [--steps 10] [--rounds 3]
[--warmup 3]
"""

import argparse
import contextlib
import copy
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_tpu  # noqa: E402
from gpt import GPT, train_step  # noqa: E402
from torch_tpu import EagerMode, Precision  # noqa: E402


class Run:
    """One configuration: its own model, optimizer and data on its device."""

    def __init__(self, name, model, device, data, mode=None, prec=None):
        self.name, self.device, self.mode, self.prec = name, device, mode, prec
        self.model = copy.deepcopy(model).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.idx, self.tgt = (d.to(device) for d in data)
        self.rates, self.loss = [], None

    def context(self):
        if self.device != "tpu":
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        stack.enter_context(torch_tpu.eager_mode(self.mode))
        stack.enter_context(torch_tpu.precision(self.prec))
        return stack

    def steps(self, n, timed):
        with self.context():
            t0 = time.perf_counter()
            for _ in range(n):
                self.loss = train_step(self.model, self.opt, self.idx, self.tgt).item()
            if self.device == "tpu":
                # loss.item() waits for the forward only: the last backward
                # and optimizer step may still be running.
                torch.tpu.synchronize()
            if timed:
                self.rates.append(n / (time.perf_counter() - t0))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    args = p.parse_args()
    torch.manual_seed(0)
    model = GPT(seq=args.seq)
    data = (torch.randint(0, 1024, (args.batch, args.seq)), torch.randint(0, 1024, (args.batch, args.seq)))
    torch.set_float32_matmul_precision("highest")
    runs = [Run("PyTorch CPU eager", model, "cpu", data)]
    for prec in (Precision.HIGHEST, Precision.DEFAULT):
        for mode, name in ((EagerMode.DEFER_NEVER, "Strict"), (EagerMode.DEFER_AND_FUSE, "Fused")):
            runs.append(Run(f"tpu {name} Eager, {prec.name}", model, "tpu", data, mode, prec))
    for r in runs:
        r.steps(args.warmup, timed=False)
    for _ in range(args.rounds):
        for r in runs:
            r.steps(args.steps, timed=True)
    print(f"device: {torch.tpu.get_device_name()}; GPT 4x256, seq {args.seq}, batch {args.batch}, "
          f"AdamW; median of {args.rounds} rounds of {args.steps} steps in rotation, "
          f"after {args.warmup} warm-up")
    print(f"{'run':34s} {'steps/s':>8s} {'vs CPU':>7s} {'rounds':>20s} {'final loss':>11s}")
    sps = {r.name: statistics.median(r.rates) for r in runs}
    cpu = sps[runs[0].name]
    for r in runs:
        rounds = " ".join(f"{x:.2f}" for x in r.rates)
        print(f"{r.name:34s} {sps[r.name]:8.2f} {sps[r.name] / cpu:6.2f}x {rounds:>20s} {r.loss:11.5f}")
    strict, fused = sps[runs[1].name], sps[runs[2].name]
    print(f"Fused / Strict at HIGHEST: {fused / strict:.2f}x")


if __name__ == "__main__":
    main()
