"""How much of the GPT training step (benchmarks/gpt.py: 4 layers, d_model
256, seq 128, batch 8, AdamW) is matrix products, and what that leaves for
Fused Eager to win over Strict Eager on this device.

In one run, taking turns: the whole step (PyTorch CPU eager, tpu Strict,
tpu Fused) and, separately, every matrix product of one step replayed on
its own -- each Linear's forward (x @ Wᵀ), input gradient (dy @ W) and
weight gradient (dyᵀ @ x), with the operand orientations the step uses,
and each layer's attention forward and backward (the SDPA ops; on the CPU
PyTorch's flash attention). Both modes run these same kernels, so the
replayed time on tpu is a floor under either mode's step: Fused Eager
removes launches and fuses elementwise ops, but cannot make the products
faster. "cap" is Strict's step over that floor: the most Fused could gain
over Strict if everything but the products took no time at all.
The tpu side runs at HIGHEST precision (numerics equal to the CPU peer's).
Usage: python benchmarks/matmul_floor.py [--rounds 5] [--steps 5]
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_tpu  # noqa: E402
from gpt import GPT  # noqa: E402
from torch_tpu import EagerMode, Precision  # noqa: E402
from train_step import Run  # noqa: E402


def products(device, batch, seq, d=256, heads=4, layers=4, vocab=1024):
    """Closures, one per matrix product of a training step, on `device`."""
    tokens = batch * seq
    shapes = [(d, 3 * d), (d, d), (d, 4 * d), (4 * d, d)] * layers + [(d, vocab)]
    linear = []
    for fan_in, fan_out in shapes:
        x = torch.randn(tokens, fan_in, device=device)
        w = torch.randn(fan_out, fan_in, device=device)
        dy = torch.randn(tokens, fan_out, device=device)
        linear += [lambda x=x, w=w: x @ w.t(), lambda dy=dy, w=w: dy @ w,
                   lambda dy=dy, x=x: dy.t() @ x]
    attention = []
    for _ in range(layers):
        q, k, v = (torch.randn(batch, heads, seq, d // heads, device=device, requires_grad=True)
                   for _ in range(3))
        g = torch.randn(batch, heads, seq, d // heads, device=device)

        def attend(q=q, k=k, v=v, g=g):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.autograd.grad(out, (q, k, v), g)
        attention.append(attend)
    return {"linear layers (fwd, grad input, grad weight)": linear,
            "attention (SDPA fwd + bwd)": attention}


class Replay:
    """The products of one step on one device, timed a round at a time."""

    def __init__(self, device, batch, seq):
        self.device = device
        self.groups = products(device, batch, seq)
        self.ms = {name: [] for name in self.groups}

    def round(self, timed):
        with torch_tpu.eager_mode(EagerMode.DEFER_NEVER), torch_tpu.precision(Precision.HIGHEST):
            for name, fns in self.groups.items():
                t0 = time.perf_counter()
                for fn in fns:
                    fn()
                if self.device == "tpu":
                    torch.tpu.synchronize()
                if timed:
                    self.ms[name].append((time.perf_counter() - t0) * 1e3)

    def median(self, name):
        return statistics.median(self.ms[name])

    def total(self):
        return sum(self.median(name) for name in self.ms)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("highest")
    model = GPT(seq=args.seq)
    data = (torch.randint(0, 1024, (args.batch, args.seq)),
            torch.randint(0, 1024, (args.batch, args.seq)))
    steps = [Run("PyTorch CPU eager", model, "cpu", data),
             Run("tpu Strict Eager", model, "tpu", data, EagerMode.DEFER_NEVER, Precision.HIGHEST),
             Run("tpu Fused Eager", model, "tpu", data, EagerMode.DEFER_AND_FUSE, Precision.HIGHEST)]
    replays = [Replay("cpu", args.batch, args.seq), Replay("tpu", args.batch, args.seq)]
    for r in steps:
        r.steps(3, timed=False)
    for r in replays:
        r.round(timed=False)
    for _ in range(args.rounds):
        for r in steps:
            r.steps(args.steps, timed=True)
        for r in replays:
            r.round(timed=True)

    print(f"device: {torch.tpu.get_device_name()}; GPT 4x256, seq {args.seq}, batch {args.batch}, "
          f"HIGHEST; medians of {args.rounds} rounds in rotation")
    print(f"{'matrix products of one step':46s} {'CPU ms':>8s} {'tpu ms':>8s}")
    for name in replays[0].ms:
        print(f"{name:46s} {replays[0].median(name):8.1f} {replays[1].median(name):8.1f}")
    cpu_floor, tpu_floor = replays[0].total(), replays[1].total()
    print(f"{'all products':46s} {cpu_floor:8.1f} {tpu_floor:8.1f}")
    step_ms = {r.name: 1e3 / statistics.median(r.rates) for r in steps}
    print(f"{'whole step':28s} {'ms':>8s} {'products share':>15s} {'rounds ms':>20s}")
    for r in steps:
        floor = cpu_floor if r.device == "cpu" else tpu_floor
        rounds = " ".join(f"{1e3 / x:.1f}" for x in r.rates)
        print(f"{r.name:28s} {step_ms[r.name]:8.1f} {floor / step_ms[r.name]:14.0%} {rounds:>20s}")
    strict, fused = step_ms[steps[1].name], step_ms[steps[2].name]
    print(f"Fused / Strict: {strict / fused:.2f}x; cap with the products as they are "
          f"(Strict step / tpu products): {strict / tpu_floor:.2f}x")


if __name__ == "__main__":
    main()
