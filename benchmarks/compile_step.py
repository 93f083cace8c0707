"""torch.compile(backend="tpu") against its peers, in one run.

Two workloads:
  gpt     a training step (forward, backward, AdamW) of the GPT-style decoder
          of benchmarks/gpt.py (4 layers, d_model 256, seq 128, batch 8);
  resnet  an inference batch of a small ResNet (basic blocks, 3 stages,
          batch 16, 3x64x64 images).
Rows: PyTorch CPU eager, Inductor on CPU, tpu Fused Eager, tpu compile. The
tpu side runs at HIGHEST precision (numerics equal to the CPU peers'); tpu
compile at DEFAULT is reported beside it.

Every row runs in a fresh process with empty compile caches (Inductor's and
tpu's in a temporary directory), so "first step" is the cold time to the
first finished step: tracing, compiling and running it. The tpu compile row
is then run again on the same cache directory: the warm first step.
Usage: python benchmarks/compile_step.py [--workload gpt|resnet|both]
           [--steps 10] [--warmup 2] [--skip-inductor]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------ the workloads --

def resnet():
    import torch.nn as nn

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.b2(self.c2(self.b1(self.c1(x)).relu()))
            return (y + (x if self.down is None else self.down(x))).relu()

    return nn.Sequential(
        nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        Basic(32, 32, 1), Basic(32, 64, 2), Basic(64, 128, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).eval()


def worker(args):
    import torch

    t_start = time.perf_counter()
    sys.path.insert(0, HERE)
    import torch_tpu
    from torch_tpu import EagerMode, Precision

    from gpt import GPT, train_step

    torch.manual_seed(0)
    device = "cpu" if args.case in ("cpu", "inductor") else "tpu"
    if args.workload == "gpt":
        model = GPT(seq=args.seq).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        data = torch.randint(0, 1024, (args.batch, args.seq))
        idx, tgt = data.to(device), data.roll(-1, 1).to(device)

        def step():
            return train_step(model, opt, idx, tgt)
    else:
        model = resnet().to(device)
        x = torch.randn(16, 3, 64, 64).to(device)

        @torch.no_grad()
        def step():
            return model(x).sum()

    run = step
    if args.case == "inductor":
        run = torch.compile(step)
    elif args.case == "tpu_compile":
        run = torch.compile(step, backend="tpu")
    mode = EagerMode.DEFER_AND_FUSE if args.case == "tpu_fused" else EagerMode.DEFER_NEVER
    prec = Precision[args.precision]
    torch.set_float32_matmul_precision("highest")  # the CPU peers' f32 numerics
    with torch_tpu.eager_mode(mode), torch_tpu.precision(prec):
        t0 = time.perf_counter()
        first_loss = run().item()
        if device == "tpu":
            torch.tpu.synchronize()  # the step's backward and optimizer, not just its loss
        first = time.perf_counter() - t0
        for _ in range(args.warmup):
            run().item()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            loss = run().item()
        if device == "tpu":
            torch.tpu.synchronize()
        sps = args.steps / (time.perf_counter() - t0)
    stats = torch.tpu._get_cache_stats()
    print("RESULT " + json.dumps({
        "first": first, "sps": sps, "loss": loss, "first_loss": first_loss,
        "process": time.perf_counter() - t_start, "compiles": stats["compiles"],
        "disk_hits": stats["disk_hits"]}))


# ------------------------------------------------------------------ driver --

def spawn(case, workload, precision, args, cache):
    env = dict(os.environ, TORCH_TPU_COMPILATION_CACHE_DIR=os.path.join(cache, "tpu"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
               TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--case", case,
           "--workload", workload, "--precision", precision, "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--seq", str(args.seq), "--batch", str(args.batch)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def bench(workload, args):
    rows = []
    cases = [("cpu", "PyTorch CPU eager", "HIGHEST"), ("inductor", "Inductor (CPU)", "HIGHEST"),
             ("tpu_fused", "tpu Fused Eager, HIGHEST", "HIGHEST"),
             ("tpu_compile", "tpu compile, HIGHEST", "HIGHEST"),
             ("tpu_compile", "tpu compile, DEFAULT", "DEFAULT")]
    warm = None
    for case, name, prec in cases:
        if case == "inductor" and args.skip_inductor:
            continue
        with tempfile.TemporaryDirectory() as cache:
            r = spawn(case, workload, prec, args, cache)
            if case == "tpu_compile" and prec == "HIGHEST" and "error" not in r:
                warm = spawn(case, workload, prec, args, cache)
        rows.append((name, r))
    what = (f"GPT 4x256 training step (AdamW), seq {args.seq}, batch {args.batch}"
            if workload == "gpt" else "ResNet (3 stages, basic blocks) inference, batch 16, 3x64x64")
    print(f"\n{what}; {args.steps} timed steps after {args.warmup} warm-up; cold caches")
    print(f"{'run':28s} {'steps/s':>8s} {'vs CPU':>7s} {'first step s':>13s} {'loss':>10s}")
    cpu = rows[0][1].get("sps")
    for name, r in rows:
        if "error" in r:
            print(f"{name:28s} FAILED: {r['error']}")
            continue
        print(f"{name:28s} {r['sps']:8.2f} {r['sps'] / cpu:6.2f}x {r['first']:13.2f} {r['loss']:10.5f}")
    by = dict((n, r) for n, r in rows)
    tc, ind = by.get("tpu compile, HIGHEST", {}), by.get("Inductor (CPU)", {})
    if warm and "error" not in warm:
        print(f"tpu compile warm persistent cache: first step {warm['first']:.2f} s "
              f"({warm['disk_hits']} programs loaded, {warm['compiles']} compiled), "
              f"cold/warm {tc['first'] / warm['first']:.2f}x")
    if "sps" in tc and "sps" in ind:
        print(f"tpu compile / Inductor: steps/s {tc['sps'] / ind['sps']:.2f}x, "
              f"cold first step {ind['first'] / tc['first']:.2f}x faster")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=["gpt", "resnet", "both"], default="both")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--skip-inductor", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--precision", default="HIGHEST", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    import torch
    import torch_tpu  # noqa: F401
    print(f"device: {torch.tpu.get_device_name()}; torch {torch.__version__}; "
          f"{os.cpu_count()} CPU cores")
    for w in (["gpt", "resnet"] if args.workload == "both" else [args.workload]):
        bench(w, args)


if __name__ == "__main__":
    main()
