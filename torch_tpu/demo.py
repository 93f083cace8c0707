"""Trains a small MLP classifier on synthetic data on the tpu device.

Prints the platform it ran on, the loss curve, steps per second, and the
final-loss difference against the identical run on CPU (same seed, weights
created on CPU and moved). Run: python -m torch_tpu.demo [--steps N]
"""

import argparse
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu


def make_data(n: int, features: int, classes: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    teacher = torch.randn(features, classes, generator=g)
    y = (x @ teacher + 0.5 * torch.randn(n, classes, generator=g)).argmax(dim=1)
    return x, y


def make_model(features: int, hidden: int, classes: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(features, hidden), nn.GELU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, classes),
    )


def train(model, x, y, device, steps, batch, log_every):
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    xd, yd = x.to(device), y.to(device)
    n = x.shape[0]
    losses = []
    curve = []
    warmup = min(10, steps // 2)  # the first steps compile the programs

    def wait():
        if torch.device(device).type == "tpu":
            torch.tpu.synchronize()

    t0 = time.perf_counter()
    for step in range(steps):
        if step == warmup:
            losses[-1].item()
            wait()
            t_warm = time.perf_counter()
        lo = (step * batch) % n
        xb, yb = xd[lo:lo + batch], yd[lo:lo + batch]
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        if (step + 1) % log_every == 0 or step == 0:
            curve.append((step + 1, losses[-1].item()))
    final = losses[-1].item()
    wait()  # the last step's backward and optimizer too, not just its loss
    t_end = time.perf_counter()
    return curve, final, (steps - warmup) / (t_end - t_warm), t_warm - t0


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    features, classes = 64, 10
    x, y = make_data(16384, features, classes, args.seed)
    model_cpu = make_model(features, args.hidden, classes, args.seed)
    model_tpu = copy.deepcopy(model_cpu)

    info = torch_tpu._C._plugin_info()
    print(f"device: tpu:0 = {torch.tpu.get_device_name()} "
          f"(PJRT plugin {info['path']}, API {info['api_version'][0]}.{info['api_version'][1]})")
    print(f"model: MLP {features}-{args.hidden}-{args.hidden}-{classes}, AdamW, batch {args.batch}, "
          f"{args.steps} steps, f32 matmuls at HIGHEST precision (parity with CPU)")

    # f32-accurate matmuls on both sides, so the runs must agree.
    torch.set_float32_matmul_precision("highest")
    curve, final_tpu, sps_tpu, warm_tpu = train(model_tpu, x, y, "tpu", args.steps, args.batch,
                                      max(args.steps // 6, 1))
    print("loss curve (tpu):")
    for step, loss in curve:
        print(f"  step {step:5d}  loss {loss:.5f}")
    _, final_cpu, sps_cpu, _ = train(model_cpu, x, y, "cpu", args.steps, args.batch, args.steps)
    rel = abs(final_tpu - final_cpu) / max(abs(final_cpu), 1e-12)
    stats = torch.tpu._get_cache_stats()
    print(f"speed after warm-up: tpu {sps_tpu:.1f} steps/s, PyTorch CPU eager {sps_cpu:.1f} "
          f"steps/s (tpu/cpu = {sps_tpu / sps_cpu:.2f}x); tpu warm-up (first compiles) "
          f"{warm_tpu:.1f} s")
    print(f"compile cache: {stats['compiles']} programs compiled in "
          f"{stats['compile_seconds']:.2f} s, {stats['hits']}/{stats['requests']} hits")
    print(f"final loss: tpu {final_tpu:.6f}  cpu {final_cpu:.6f}  relative difference {rel:.2e}")
    if rel > 1e-3:
        raise SystemExit(f"FAIL: final loss differs from CPU by {rel:.2e} (> 1e-3)")
    print("OK: tpu matches CPU within 1e-3")


if __name__ == "__main__":
    main()
