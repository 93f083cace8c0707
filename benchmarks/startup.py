"""Start-up: time to the first finished training step in a fresh process,
with a cold and with a warm persistent compilation cache.

Each measurement starts a new Python process that imports torch, builds the
GPT-style model of benchmarks/gpt.py, runs one training step on tpu and
reads the loss. Cold uses an empty cache directory; warm reuses it. The same
step with PyTorch CPU eager in a fresh process (torch only) is the floor.
PyTorch's optimizer imports torch._dynamo on its first step (about 1 s
here, in every PyTorch process); each child imports it up front and reports
it as its own column, so "first step" is the step itself: compiling or
loading its programs, and running them.
Usage: python benchmarks/startup.py [--mode strict|fused] [--seq 128]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {here!r})
import torch
if {device!r} == "tpu":
    import torch_tpu
    torch.tpu.init()
from gpt import GPT, train_step
t_import = time.perf_counter() - t0
import torch._dynamo  # what the optimizer's first step would import
t_dynamo = time.perf_counter() - t0 - t_import
torch.manual_seed(0)
model = GPT(seq={seq}).to({device!r})
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
idx = torch.randint(0, 1024, (8, {seq})).to({device!r})
loss = train_step(model, opt, idx, idx).item()
if {device!r} == "tpu":
    torch.tpu.synchronize()  # the step's backward and optimizer too, not just its loss
s = torch.tpu._get_cache_stats() if {device!r} == "tpu" else dict(compiles=0, disk_hits=0)
print("RESULT", time.perf_counter() - t0, s["compiles"], s["disk_hits"], loss, t_import, t_dynamo)
"""


def run(cache_dir, mode, seq, device="tpu"):
    env = dict(os.environ, TORCH_TPU_COMPILATION_CACHE_DIR=cache_dir)
    if mode == "fused":
        env["TORCH_TPU_DEFER_AND_FUSE"] = "1"
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD.format(here=HERE, seq=seq, device=device)], env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(p.stderr)
    line = [l for l in p.stdout.splitlines() if l.startswith("RESULT")][-1].split()
    return wall, float(line[1]), int(line[2]), int(line[3]), float(line[5]), float(line[6])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["strict", "fused"], default="strict")
    ap.add_argument("--seq", type=int, default=128)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cold = run(d, args.mode, args.seq)
        warm = run(d, args.mode, args.seq)
        cpu = run(d, args.mode, args.seq, device="cpu")
    print(f"time to first training step, GPT 4x256 seq {args.seq}, {args.mode} eager, fresh process")
    print(f"{'cache':6s} {'process s':>10s} {'in-script s':>12s} {'import+init s':>14s} "
          f"{'dynamo s':>9s} {'first step s':>13s} {'compiles':>9s} {'disk loads':>11s}")
    first = lambda r: r[1] - r[4] - r[5]  # noqa: E731
    for name, r in (("cold", cold), ("warm", warm), ("CPU", cpu)):
        print(f"{name:6s} {r[0]:10.2f} {r[1]:12.2f} {r[4]:14.2f} {r[5]:9.2f} {first(r):13.2f} "
              f"{r[2]:9d} {r[3]:11d}")
    print(f"warm/cold speed-up: whole process {cold[0] / warm[0]:.1f}x, "
          f"first step {first(cold) / first(warm):.1f}x")
    print(f"first step vs PyTorch CPU eager's in a fresh process: cold {first(cold) / first(cpu):.1f}x, "
          f"warm {first(warm) / first(cpu):.1f}x")


if __name__ == "__main__":
    main()
