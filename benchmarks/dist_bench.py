"""tpu_dist on the CPU plugin (host engine), with Gloo on CPU tensors beside
it in the same runs.

1. all_reduce bandwidth (2 processes): tpu tensors through tpu_dist against
   CPU tensors through Gloo, for several message sizes;
2. DDP training throughput of an MLP (1 and 2 processes): samples/s for
   tpu (tpu_dist) and CPU (Gloo).
Usage: python benchmarks/dist_bench.py [--steps 20]
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)


def worker(args):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torch_tpu

    dist.init_process_group(backend="cpu:gloo,tpu:tpu_dist")
    r, w = dist.get_rank(), dist.get_world_size()
    result = {}
    if args.what == "bandwidth":
        for size in (1 << 10, 1 << 16, 1 << 20, 1 << 24):
            n = size // 4
            for dev in ("tpu", "cpu"):
                x = torch.ones(n, device=dev)
                for _ in range(2):
                    dist.all_reduce(x)
                torch_tpu.synchronize()
                iters = max(3, min(50, (1 << 26) // size))
                t0 = time.perf_counter()
                for _ in range(iters):
                    dist.all_reduce(x)
                if dev == "tpu":
                    x.cpu()
                dt = (time.perf_counter() - t0) / iters
                # Bus bandwidth of a ring all-reduce: 2 (w-1)/w bytes per byte.
                result[f"{dev}:{size}"] = (dt, size * 2 * (w - 1) / w / dt / 1e9)
    else:
        for dev in ("tpu", "cpu"):
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(),
                                  nn.Linear(1024, 10)).to(dev)
            ddp = DDP(model)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
            x = torch.randn(args.batch, 256).to(dev)
            y = torch.randint(0, 10, (args.batch,)).to(dev)

            def step():
                loss = F.cross_entropy(ddp(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                return loss

            for _ in range(3):
                step().item()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                loss = step()
            loss.item()
            if dev == "tpu":
                torch_tpu.synchronize()  # the last backward and optimizer step too
            result[dev] = args.steps * args.batch * w / (time.perf_counter() - t0)
    if r == 0:
        print("RESULT " + json.dumps(result))
    dist.destroy_process_group()


def run(what, nproc, args):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           HERE, "--worker", what, "--steps", str(args.steps), "--batch", str(args.batch)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(p.stderr[-4000:])
    line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--worker", choices=["bandwidth", "ddp"])
    args = ap.parse_args()
    if args.worker:
        args.what = args.worker
        return worker(args)
    bw = run("bandwidth", 2, args)
    print("all_reduce, 2 processes (host engine vs Gloo on CPU tensors)")
    print(f"{'bytes':>10s} {'tpu_dist ms':>12s} {'GB/s':>7s} {'gloo ms':>9s} {'GB/s':>7s} {'tpu/gloo':>9s}")
    for size in (1 << 10, 1 << 16, 1 << 20, 1 << 24):
        t, g = bw[f"tpu:{size}"], bw[f"cpu:{size}"]
        print(f"{size:>10d} {t[0] * 1e3:12.3f} {t[1]:7.3f} {g[0] * 1e3:9.3f} {g[1]:7.3f} {g[0] / t[0]:8.2f}x")
    print(f"\nDDP MLP 256-1024-1024-10, batch {args.batch} per process, SGD; samples/s")
    print(f"{'processes':>9s} {'tpu (tpu_dist)':>15s} {'CPU (gloo)':>11s} {'tpu/CPU':>8s}")
    for n in (1, 2):
        d = run("ddp", n, args)
        print(f"{n:>9d} {d['tpu']:15.1f} {d['cpu']:11.1f} {d['tpu'] / d['cpu']:7.2f}x")


if __name__ == "__main__":
    main()
