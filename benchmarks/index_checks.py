"""The cost of the device-side index checks (torch_tpu.index_checks): the
benchmarks' GPT training step (which checks its embedding and cross-entropy
indices) and single indexing ops, with the checks on and off, beside
PyTorch CPU eager. The configurations take turns in rounds and the median
round is reported, so drift in the machine's speed hits all of them alike.

Usage: python benchmarks/index_checks.py [--steps 5] [--rounds 3] [--iters 2000]
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
from torch_tpu import EagerMode  # noqa: E402


def step_rate(model, opt, idx, tgt, n, device, mode, checks):
    ctx = contextlib.ExitStack()
    if device == "tpu":
        ctx.enter_context(torch_tpu.eager_mode(mode))
        ctx.enter_context(torch_tpu.index_checks(checks))
    with ctx:
        t0 = time.perf_counter()
        for _ in range(n):
            train_step(model, opt, idx, tgt).item()
        if device == "tpu":
            torch.tpu.synchronize()
        return n / (time.perf_counter() - t0)


def op_us(fn, iters, device, checks):
    with contextlib.ExitStack() as ctx:
        if device == "tpu":
            ctx.enter_context(torch_tpu.index_checks(checks))
        for _ in range(20):
            out = fn()
        out.cpu()
        t0 = time.perf_counter()
        for _ in range(iters):
            out = fn()
        out.cpu()  # the read where the checks surface
        return (time.perf_counter() - t0) / iters * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--ops-only", action="store_true", help="skip the GPT step")
    args = p.parse_args()
    torch.set_float32_matmul_precision("highest")
    if not args.ops_only:
        gpt_step(args)
    per_op(args)


def gpt_step(args):
    torch.manual_seed(0)
    base = GPT()
    data = (torch.randint(0, 1024, (8, 128)), torch.randint(0, 1024, (8, 128)))
    configs = [("PyTorch CPU eager", "cpu", None, None)]
    for mode, mname in ((EagerMode.DEFER_NEVER, "Strict"), (EagerMode.DEFER_AND_FUSE, "Fused")):
        configs += [(f"tpu {mname}, checks on", "tpu", mode, True),
                    (f"tpu {mname}, checks off", "tpu", mode, False)]
    runs = []
    for name, device, mode, checks in configs:
        model = copy.deepcopy(base).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        idx, tgt = (d.to(device) for d in data)
        step_rate(model, opt, idx, tgt, 4, device, mode, checks)  # warm-up, compile
        runs.append((name, device, mode, checks, model, opt, idx, tgt, []))
    for _ in range(args.rounds):
        for name, device, mode, checks, model, opt, idx, tgt, rates in runs:
            rates.append(step_rate(model, opt, idx, tgt, args.steps, device, mode, checks))

    print(f"device: {torch.tpu.get_device_name()}; GPT step (4 layers, d 256, seq 128, batch 8), "
          f"median of {args.rounds} rounds of {args.steps} steps")
    print(f"{'run':30s} {'steps/s':>8s} {'vs CPU':>7s}   rounds")
    med = {r[0]: statistics.median(r[-1]) for r in runs}
    cpu = med["PyTorch CPU eager"]
    for r in runs:
        print(f"{r[0]:30s} {med[r[0]]:8.2f} {med[r[0]] / cpu:6.2f}x   "
              + " ".join(f"{x:.2f}" for x in r[-1]))
    for mname in ("Strict", "Fused"):
        on, off = med[f"tpu {mname}, checks on"], med[f"tpu {mname}, checks off"]
        print(f"{mname}: checks cost {100 * (off - on) / off:+.1f}% of the step "
              f"({1000 / on - 1000 / off:+.2f} ms)")


def per_op(args):
    x = torch.randn(1000, 64)
    i = torch.randint(0, 1000, (256,))
    t = torch.randint(0, 64, (256,))
    cases = [
        ("x[idx] (1000x64, 256 rows)", lambda x, i, t: x[i]),
        ("index_select", lambda x, i, t: x.index_select(0, i)),
        ("embedding", lambda x, i, t: torch.nn.functional.embedding(i, x)),
        ("cross_entropy (256x64)", lambda x, i, t: torch.nn.functional.cross_entropy(x[:256], t)),
    ]
    print(f"\nper op, Strict Eager, {args.iters} iterations: us")
    print(f"{'op':30s} {'CPU':>8s} {'checks on':>10s} {'checks off':>11s} {'on/off':>7s}")
    xt, it, tt = x.to("tpu"), i.to("tpu"), t.to("tpu")
    for name, fn in cases:
        cpu_us = op_us(lambda: fn(x, i, t), args.iters, "cpu", None)
        res = {True: [], False: []}
        for _ in range(args.rounds):
            for checks in (True, False):
                res[checks].append(op_us(lambda: fn(xt, it, tt), args.iters, "tpu", checks))
        on, off = statistics.median(res[True]), statistics.median(res[False])
        print(f"{name:30s} {cpu_us:8.1f} {on:10.1f} {off:11.1f} {on / off:6.2f}x")


if __name__ == "__main__":
    main()
