"""``python -m torch_tpu.check [--quick]``: the one command to run on a new
machine (a TPU VM, a GPU box, a laptop) to see torch_tpu work there.

On whatever plugin torch_tpu picks it
1. checks results against PyTorch's CPU backend: a fixed set of ops, the
   three eager modes, torch.compile(backend="tpu"), and a few training
   steps of a small GPT;
2. measures, side by side with the machine's native PyTorch device where
   there is one (torch CUDA on a GPU; PyTorch CPU otherwise): matmul
   TFLOP/s in bf16 and f32, the GPT training step's steps/s in Strict,
   Fused and compiled, and the first step's time (compiles included).

``--quick`` uses small sizes (about a minute on a 2-core CPU). Exits with
status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings

import torch

import torch_tpu
from torch_tpu import EagerMode

MODES = {"Strict": EagerMode.DEFER_NEVER, "Fused": EagerMode.DEFER_AND_FUSE,
         "Debug": EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING}


class GPT(torch.nn.Module):
    def __init__(self, vocab, d, heads, layers, seq):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(seq, d) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True,
                                                 norm_first=True, activation="gelu")
        self.blocks = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d, vocab)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(seq),
                             persistent=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        x = self.blocks(x, mask=self.mask[: idx.shape[1], : idx.shape[1]], is_causal=True)
        return self.head(x)


def _close(a, b, rtol, atol):
    return torch.allclose(a.detach().cpu().float(), b.detach().cpu().float(), rtol=rtol, atol=atol)


def _op_checks():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=g)
    w = torch.randn(16, 12, generator=g)
    img = torch.randn(2, 3, 10, 10, generator=g)
    k = torch.randn(4, 3, 3, 3, generator=g)
    idx = torch.randint(0, 8, (5,), generator=g)
    return {
        "matmul": (lambda d: x.to(d) @ w.to(d), 1e-5, 1e-5),
        "conv2d": (lambda d: torch.nn.functional.conv2d(img.to(d), k.to(d), padding=1), 1e-4, 1e-4),
        "softmax": (lambda d: torch.softmax(x.to(d), dim=-1), 1e-5, 1e-6),
        "layer_norm": (lambda d: torch.nn.functional.layer_norm(x.to(d), (16,)), 1e-4, 1e-5),
        "index_select": (lambda d: x.to(d)[idx.to(d)], 0, 0),
        "sum/max": (lambda d: torch.stack([x.to(d).sum(0), x.to(d).amax(0)]), 1e-5, 1e-5),
        "cumsum": (lambda d: x.to(d).cumsum(1), 1e-5, 1e-5),
        "sort": (lambda d: x.to(d).sort(dim=1).values, 0, 0),
    }


def run_checks(report) -> bool:
    ok = True
    with contextlib.ExitStack() as precise:
        with warnings.catch_warnings():  # (its advice is for TPU matrix units)
            warnings.filterwarnings("ignore", message=r"torch\.tpu\.precision\(HIGHEST\)")
            precise.enter_context(torch_tpu.precision(torch_tpu.Precision.HIGHEST))
        for mode_name, mode in MODES.items():
            failed = []
            with torch_tpu.eager_mode(mode):
                for name, (fn, rtol, atol) in _op_checks().items():
                    try:
                        if not _close(fn("tpu"), fn("cpu"), rtol, atol):
                            failed.append(name)
                    except Exception as e:  # noqa: BLE001 - reported
                        failed.append(f"{name} ({type(e).__name__}: {e})")
            report(f"ops in {mode_name} Eager", not failed, ", ".join(failed) or f"{len(_op_checks())} ops match CPU")
            ok &= not failed
        lin = torch.nn.Linear(16, 8)
        x = torch.randn(4, 16)
        try:
            f = torch.compile(lin.to("tpu"), backend="tpu")
            good = _close(f(x.to("tpu")), lin.cpu()(x), 1e-5, 1e-5)
            report("torch.compile(backend='tpu')", good, "matches CPU" if good else "differs from CPU")
        except Exception as e:  # noqa: BLE001
            good = False
            report("torch.compile(backend='tpu')", False, f"{type(e).__name__}: {e}")
        ok &= good
        torch.manual_seed(0)
        ref = GPT(64, 32, 2, 2, 16)
        model = GPT(64, 32, 2, 2, 16)
        model.load_state_dict(ref.state_dict())
        model.to("tpu")
        data = torch.randint(0, 64, (4, 17))
        losses = []
        for m, dev in ((ref, "cpu"), (model, "tpu")):
            opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
            out = []
            for _ in range(3):
                inp, tgt = data[:, :-1].to(dev), data[:, 1:].to(dev)
                loss = torch.nn.functional.cross_entropy(m(inp).flatten(0, 1), tgt.flatten())
                loss.backward()
                opt.step()
                opt.zero_grad()
                out.append(loss.item())
            losses.append(out)
        good = all(abs(a - b) <= 1e-3 * max(1.0, abs(a)) for a, b in zip(*losses))
        report("GPT training, 3 AdamW steps", good,
               "losses " + " / ".join(f"{a:.4f} vs {b:.4f}" for a, b in zip(*losses)))
        ok &= good
    return ok


def _sync(device):
    if device == "tpu":
        torch_tpu.synchronize()
    elif device == "cuda":
        torch.cuda.synchronize()


def _matmul_tflops(device, dtype, n, reps):
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    c = a @ b
    _sync(device)
    t = time.perf_counter()
    for _ in range(reps):
        c = a @ b
    _sync(device)
    del c
    return 2 * n ** 3 * reps / (time.perf_counter() - t) / 1e12


def _gpt_rate(device, steps, cfg, mode=None, compiled=False):
    torch.manual_seed(0)
    model = GPT(*cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    vocab, seq = cfg[0], cfg[4]
    data = torch.randint(0, vocab, (8, seq + 1), device=device)
    fwd = torch.compile(model, backend="tpu" if device == "tpu" else "inductor") if compiled else model

    def step():
        loss = torch.nn.functional.cross_entropy(fwd(data[:, :-1]).flatten(0, 1), data[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()

    ctx = torch_tpu.eager_mode(mode) if mode is not None else contextlib.nullcontext()
    with ctx:
        t = time.perf_counter()
        step()
        _sync(device)
        first = time.perf_counter() - t
        for _ in range(3):  # Fused Eager finds the step's period over the first steps
            step()
        _sync(device)
        t = time.perf_counter()
        for _ in range(steps):
            step()
        _sync(device)
        return steps / (time.perf_counter() - t), first


def run_perf(quick, print_line):
    native = "cuda" if torch.cuda.is_available() else "cpu"
    n, reps = (512, 3) if quick else (4096, 10)
    cfg = (256, 64, 4, 2, 64) if quick else (8192, 512, 8, 4, 256)
    steps = 3 if quick else 10
    print_line(f"{'measure':44s} {'tpu':>10s} {'native ' + native:>14s} {'ratio':>7s}")
    for dtype, label in ((torch.bfloat16, "bf16"), (torch.float32, "f32")):
        with torch_tpu.precision(torch_tpu.Precision.HIGHEST if dtype == torch.float32
                                 else torch_tpu.Precision.DEFAULT):
            t = _matmul_tflops("tpu", dtype, n, reps)
        nat = _matmul_tflops(native, dtype, n, reps)
        print_line(f"{f'matmul {n}x{n} {label}, TFLOP/s':44s} {t:10.3f} {nat:14.3f} {t / nat:6.2f}x")
    nat_rate, nat_first = _gpt_rate(native, steps, cfg)
    for name, kwargs in (("Strict", {"mode": EagerMode.DEFER_NEVER}),
                         ("Fused", {"mode": EagerMode.DEFER_AND_FUSE}),
                         ("compiled", {"compiled": True})):
        rate, first = _gpt_rate("tpu", steps, cfg, **kwargs)
        print_line(f"{f'GPT step {name}, steps/s (native: eager)':44s} {rate:10.2f} {nat_rate:14.2f} "
                   f"{rate / nat_rate:6.2f}x")
        print_line(f"{f'GPT step {name}, first step s (compiles)':44s} {first:10.2f} {nat_first:14.2f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m torch_tpu.check")
    p.add_argument("--quick", action="store_true", help="small sizes (about a minute on a CPU)")
    p.add_argument("--no-perf", action="store_true", help="correctness checks only")
    args = p.parse_args(argv)
    from torch_tpu import info

    rows, error = info.collect()
    for label, value in rows[:12]:
        print(f"  {label:<18s} {value}")
    if error is not None:
        print(f"\nNo tpu device can be used: {error}", file=sys.stderr)
        return 1
    print("\ncorrectness (against PyTorch CPU)")
    results = []

    def report(name, good, detail):
        results.append(good)
        print(f"  {'PASS' if good else 'FAIL'}  {name}: {detail}")

    ok = run_checks(report)
    if not args.no_perf:
        print("\nspeed")
        run_perf(args.quick, lambda line: print("  " + line))
    print(f"\n{sum(results)}/{len(results)} checks passed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
