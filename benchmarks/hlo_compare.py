"""The GPT training step's optimized programs, torch_tpu's beside JAX's.

Runs compile_step.py's `tpu compile` and `JAX jit` workers (the same GPT
step, AdamW, HIGHEST) with XLA dumping every program after optimization,
then prints, per program that does work, what XLA made of it: fusions by
kind, matrix products (count and result shapes), layout copies and
transposes left at the top level with the bytes they move, and the same
totals for the whole step. torch_tpu's step is three programs (the compiled
forward, the backward, the optimizer); JAX's is one.

    .venv/bin/python benchmarks/hlo_compare.py [--keep DIR]
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BYTES = {"f32": 4, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "s64": 8, "u64": 8, "pred": 1,
         "u8": 1, "s8": 1, "f64": 8}
INSTR = re.compile(r"\s*(?:ROOT )?%?[\w.\-]+ = (\w+)\[([\d,]*)\]\S* (\w[\w\-]*)\(")


def _bytes(dtype, dims):
    n = 1
    for d in filter(None, dims.split(",")):
        n *= int(d)
    return n * BYTES.get(dtype, 4)


def summarize(path):
    """Counts of one optimized module (its ENTRY computation and the
    computations it calls)."""
    s = collections.Counter()
    dots = collections.Counter()
    in_entry = False
    for line in open(path):
        if line.startswith("ENTRY"):
            in_entry = True
            continue
        if line.startswith("}"):
            in_entry = False
            continue
        m = INSTR.match(line)
        if not m:
            continue
        dtype, dims, op = m.groups()
        if op in ("dot", "convolution"):
            s["products"] += 1
            dots[f"{dtype}[{dims}]"] += 1
        if op == "transpose":
            s["transposes"] += 1
        if not in_entry:
            continue
        if op == "fusion":
            kind = re.search(r"kind=(\w+)", line)
            s["fusions " + (kind.group(1) if kind else "?")] += 1
            cfg = re.search(r'"kind":"(__\w+)"', line)
            if cfg:
                s["of them " + cfg.group(1)] += 1
        elif op == "copy":
            s["top-level copies"] += 1
            s["copied MiB"] += _bytes(dtype, dims) / 2**20
    return s, dots


def run_worker(case, dump, cache, args):
    env = dict(os.environ, TORCH_TPU_COMPILATION_CACHE_DIR=os.path.join(cache, case),
               XLA_FLAGS=f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=^$")
    cmd = [sys.executable, os.path.join(HERE, "compile_step.py"), "--worker", "--case", case,
           "--workload", "gpt", "--steps", "2", "--warmup", "1", "--seq", str(args.seq),
           "--batch", str(args.batch)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{case} failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")


def programs(dump):
    """The optimized modules that do work (a product or 20+ fusions)."""
    out = []
    for f in sorted(os.listdir(dump)):
        if not f.endswith("after_optimizations.txt"):
            continue
        s, dots = summarize(os.path.join(dump, f))
        if s["products"] or sum(v for k, v in s.items() if k.startswith("fusions")) >= 20:
            out.append((f.split(".")[0] + "." + f.split(".")[1], s, dots))
    return out


def show(label, progs):
    total = collections.Counter()
    products = collections.Counter()
    for name, s, dots in progs:
        total.update(s)
        products.update(dots)
        print(f"  {label} {name}: " + ", ".join(
            f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in sorted(s.items())))
    print(f"  {label} whole step: " + ", ".join(
        f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in sorted(total.items())))
    print(f"  {label} products by result shape: " + ", ".join(
        f"{n}x {k}" for k, n in sorted(products.items())))
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--keep", help="write the dumps here instead of a temporary folder")
    args = ap.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="hlo_compare_")
    try:
        with tempfile.TemporaryDirectory() as cache:
            for case in ("tpu_compile", "jax"):
                dump = os.path.join(root, case)
                shutil.rmtree(dump, ignore_errors=True)
                run_worker(case, dump, cache, args)
        print(f"GPT 4x256 training step (AdamW, HIGHEST), seq {args.seq}, batch {args.batch}: "
              "optimized programs")
        ours = show("torch_tpu", programs(os.path.join(root, "tpu_compile")))
        theirs = show("JAX", programs(os.path.join(root, "jax")))
        print(f"products: torch_tpu {ours['products']}, JAX {theirs['products']}; top-level copies: "
              f"torch_tpu {ours['top-level copies']} ({ours['copied MiB']:.1f} MiB), JAX "
              f"{theirs['top-level copies']} ({theirs['copied MiB']:.1f} MiB); transposes: torch_tpu "
              f"{ours['transposes']}, JAX {theirs['transposes']}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
