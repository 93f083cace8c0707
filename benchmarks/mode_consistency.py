"""Strict Eager against Debug Eager, bit for bit, over a short training run.

Strict and Debug launch the same programs; only Debug waits after each one,
so their losses should be identical. A large difference means that Strict's
asynchrony (the host running ahead of the device) changed a value: a buffer
released or reused while a program still used it. A difference in the last
bits can also come from XLA CPU's multi-threaded matmuls, which split a
contraction differently when programs overlap (compare a run with
XLA_FLAGS=--xla_cpu_multi_thread_eigen=false). Prints each run's first
differing step and a summary line.
--big uses benchmarks/train_step.py's model (4 layers, d_model 256,
sequence 128), where Strict runs that drift from Debug by 0.02-0.7% within
5-11 steps are still seen (an open Strict Eager bug; see the README).
--grads also copies every gradient to the host after each backward and
reports the first step and parameters whose gradients differ (and by how
much, relative to the gradient's largest entry).
Usage: python benchmarks/mode_consistency.py [--runs 6] [--steps 10] [--big] [--grads]
"""

import argparse
import copy
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_tpu  # noqa: E402
from gpt import GPT, train_step  # noqa: E402
from torch_tpu import EagerMode  # noqa: E402


def losses(model, idx, mode, steps, grads=None):
    """Per-step losses; with a list `grads`, also each step's gradients (on the host)."""
    m = copy.deepcopy(model).to("tpu")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    x = idx.to("tpu")
    out = []
    with torch_tpu.eager_mode(mode):
        for _ in range(steps):
            if grads is None:
                out.append(train_step(m, opt, x, x).item())
                continue
            logits = m(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            out.append(loss.item())
            grads.append([q.grad.cpu() for q in m.parameters()])
            opt.step()
    return out


def first_grad_difference(names, got, ref):
    for step, (g1, g0) in enumerate(zip(got, ref)):
        bad = [(((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item(), n)
               for n, a, b in zip(names, g1, g0) if not torch.equal(a, b)]
        if bad:
            bad.sort(reverse=True)
            worst = ", ".join(f"{n} {r:.2g}" for r, n in bad[:3])
            return f"gradients differ from step {step} in {len(bad)} of {len(names)} parameters (worst: {worst})"
    return "gradients identical"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=6)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--big", action="store_true")
    p.add_argument("--grads", action="store_true")
    args = p.parse_args()
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(0)
    seq = 128 if args.big else 64
    model = GPT(seq=seq) if args.big else GPT(d=128, heads=4, layers=2, seq=seq)
    idx = torch.randint(0, 1024, (8, seq))
    names = [n for n, _ in model.named_parameters()]
    ref_grads = [] if args.grads else None
    ref = losses(model, idx, EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING, args.steps, ref_grads)
    bad = 0
    for r in range(args.runs):
        got_grads = [] if args.grads else None
        got = losses(model, idx, EagerMode.DEFER_NEVER, args.steps, got_grads)
        torch_tpu.synchronize()
        first = next((i for i, (a, b) in enumerate(zip(got, ref)) if a != b), None)
        bad += first is not None
        print(f"run {r}: " + ("identical" if first is None else
                              f"differs from step {first}: {got[first]!r} vs {ref[first]!r}; "
                              f"last step {got[-1]!r} vs {ref[-1]!r}") +
              (f"; {first_grad_difference(names, got_grads, ref_grads)}" if args.grads else ""),
              flush=True)
    print(f"strict vs debug: {args.runs - bad}/{args.runs} runs bit-identical over {args.steps} steps")


if __name__ == "__main__":
    main()
