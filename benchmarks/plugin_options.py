"""What XLA CPU's own options do to torch_tpu's speed, and whether the values
stay right.

Each configuration of `XLA_FLAGS` runs in its own process, with an empty
compile cache, and measures:
  matmul    f32 products of the GPT step's shapes (1024 tokens): GFLOP/s,
            median of 20 after 3 warm-up, and the largest error against
            PyTorch's CPU product relative to its largest value;
  reuse     60 products, each with a new weight allocated where the last
            one was freed (XLA's XNNPACK dots once reused a stale packing of
            such a weight: tests/models/test_regressions.py): largest error;
  per op    a chain of 300 small elementwise ops (32x32) in Strict Eager,
            microseconds per op, best of 5;
  GPT       the training step of benchmarks/gpt.py (4 layers, d_model 256,
            seq 128, batch 8, AdamW) in Strict and in Fused Eager: steps/s,
            median of 3 rounds of 4 steps after 2 warm-up, and the loss
            after the last step against PyTorch CPU eager's after the same
            steps.
Everything on the tpu side runs at HIGHEST precision; a configuration is
"right" when every error is within 1e-4 (products, relative) and the losses
within 1e-4 of CPU's. The first row is torch_tpu's default (it adds
`--xla_cpu_use_xnnpack=false` on the CPU plugin); the CPU eager row
is PyTorch's own kernels, measured in a process of its own. The default
runs again after the others, and "vs default" (GPT steps/s, the mean of
Strict's and Fused's ratios) is against the mean of its two runs: the
machine's speed drifts over a run. Passing the reuse check is not proof:
the stale packing of XNNPACK's dots hits about one product in eight.
Usage: python benchmarks/plugin_options.py [--only NAME,...] [--rounds 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = [
    ("default", ""),
    ("XNNPACK dots", "--xla_cpu_use_xnnpack=true"),
    ("XNNPACK graph fusion", "--xla_cpu_use_xnnpack=true "
                             "--xla_cpu_experimental_xnn_graph_fusion_mode=XNN_GRAPH_FUSION_MODE_GREEDY"),
    ("oneDNN dots", "--xla_cpu_use_onednn=true --xla_cpu_experimental_onednn_fusion_type=dot"),
    ("oneDNN dots+eltwise", "--xla_cpu_use_onednn=true "
                            "--xla_cpu_experimental_onednn_fusion_type=dot,eltwise"),
    ("YNNPACK dots", "--xla_cpu_experimental_ynn_fusion_type=dot"),
    ("YNNPACK dots+eltwise+reduce", "--xla_cpu_experimental_ynn_fusion_type=dot,eltwise,reduce"),
    ("Eigen on one thread", "--xla_cpu_multi_thread_eigen=false"),
    ("legacy elemental emitters", "--xla_cpu_use_fusion_emitters=false"),
]
SHAPES = [(1024, 256, 768), (1024, 256, 1024), (1024, 1024, 256), (1024, 1024, 1024)]


# ------------------------------------------------------------- the worker --

def _median_time(fn, sync, n=20, warm=3):
    for _ in range(warm):
        fn()
    sync()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def worker(args):
    import torch
    sys.path.insert(0, HERE)
    from gpt import GPT
    from train_step import Run
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(0)
    out = {}
    on_cpu = args.device == "cpu"
    if not on_cpu:
        import torch_tpu
        from torch_tpu import EagerMode, Precision
    dev = args.device
    sync = (lambda: None) if on_cpu else torch.tpu.synchronize

    mm, errs = [], []
    for m, k, n in SHAPES:
        a, b = torch.randn(m, k), torch.randn(k, n)
        x, w = a.to(dev), b.to(dev)
        box = {}

        def prod():
            box["y"] = x @ w
        sec = _median_time(prod, sync)
        mm.append(2 * m * k * n / sec / 1e9)
        errs.append(_rel_err(box["y"].cpu(), a @ b))
    out["matmul"] = mm
    out["matmul_err"] = max(errs)

    a = torch.randn(1024, 768)
    x = a.to(dev)
    reuse = 0.0
    for _ in range(60):
        fresh = torch.randn(768, 256, device=dev)
        reuse = max(reuse, _rel_err(torch.mm(x, fresh).cpu(), a @ fresh.cpu()))
        del fresh
    out["reuse_err"] = reuse

    chain_x = torch.randn(32, 32).to(dev)

    def chain():
        y = chain_x
        for i in range(300):
            y = y + 0.5 if i % 3 == 0 else (y * 0.9 if i % 3 == 1 else torch.tanh(y))
        y.sum().item()

    def best(fn):
        fn()
        return min(_time(fn) for _ in range(5))

    def _time(fn):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    if on_cpu:
        out["per_op_us"] = best(chain) / 300 * 1e6
    else:
        with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
            out["per_op_us"] = best(chain) / 300 * 1e6

    torch.manual_seed(0)
    model = GPT()
    data = (torch.randint(0, 1024, (8, 128)), torch.randint(0, 1024, (8, 128)))
    runs = {"cpu": Run("cpu", model, "cpu", data)} if on_cpu else {
        "strict": Run("strict", model, "tpu", data, EagerMode.DEFER_NEVER, Precision.HIGHEST),
        "fused": Run("fused", model, "tpu", data, EagerMode.DEFER_AND_FUSE, Precision.HIGHEST)}
    for r in runs.values():
        r.steps(2, timed=False)
    for _ in range(args.rounds):
        for r in runs.values():
            r.steps(4, timed=True)
    out["gpt"] = {k: statistics.median(r.rates) for k, r in runs.items()}
    out["loss"] = {k: r.loss for k, r in runs.items()}
    print("RESULT " + json.dumps(out))


# ------------------------------------------------------------- the driver --

def spawn(device, flags, rounds):
    env = dict(os.environ, XLA_FLAGS=flags,
               TORCH_TPU_COMPILATION_CACHE_DIR=tempfile.mkdtemp(prefix="plugin_options_"))
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--device", device,
           "--rounds", str(rounds)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
            res["seconds"] = time.perf_counter() - t0
            return res
    if p.returncode < 0:
        return {"error": f"the process died of signal {-p.returncode}"}
    lines = (p.stderr or p.stdout).strip().splitlines()
    errors = [line for line in lines if "Error" in line] or lines[-1:] or [f"exit {p.returncode}"]
    return {"error": errors[-1].strip()[:150]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="comma-separated configuration names")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--device", default="tpu", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    configs = CONFIGS
    if args.only:
        wanted = set(args.only.split(","))
        configs = [c for c in CONFIGS if c[0] in wanted or c[0] == "default"]
    cpu = spawn("cpu", "", args.rounds)
    if "error" in cpu:
        sys.exit(f"PyTorch CPU eager reference failed: {cpu['error']}")
    shapes = " ".join(f"{m}x{k}x{n}" for m, k, n in SHAPES)
    print(f"XLA CPU plugin options; f32 at HIGHEST; matmul GFLOP/s for (m x k x n) = {shapes}; "
          f"GPT 4x256 training step steps/s (median of {args.rounds} rounds); per-op us "
          "(Strict, 300-op chain)")
    head = (f"{'configuration':28s} {'matmul GFLOP/s':>27s} {'per op':>7s} {'Strict':>7s} "
            f"{'Fused':>7s} {'vs default':>11s}  {'values':s}")
    print(head)
    mm = " ".join(f"{g:6.1f}" for g in cpu["matmul"])
    print(f"{'PyTorch CPU eager':28s} {mm:>27s} {cpu['per_op_us']:7.2f} {cpu['gpt']['cpu']:7.2f} "
          f"{'-':>7s} {'-':>11s}  reference")
    # The default runs first and again last: the machine's speed drifts over
    # a run, and each configuration is compared with the mean of the two.
    results = []
    for name, flags in configs + [("default, again", "")]:
        results.append((name, flags, spawn("tpu", flags, args.rounds)))
    defaults = [r for name, _, r in results if name.startswith("default") and "error" not in r]
    base = {"gpt": {k: statistics.fmean(d["gpt"][k] for d in defaults) for k in ("strict", "fused")}} \
        if defaults else None
    for name, flags, r in results:
        if "error" in r:
            print(f"{name:28s} failed: {r['error']}")
            continue
        loss_errs = {k: abs(r["loss"][k] - cpu["loss"]["cpu"]) for k in ("strict", "fused")}
        loss_err = max(loss_errs.values())
        wrong = []
        if r["matmul_err"] > 1e-4:
            wrong.append(f"products {r['matmul_err']:.1e}")
        if r["reuse_err"] > 1e-4:
            wrong.append(f"reused weight {r['reuse_err']:.1e}")
        wrong += [f"GPT loss ({k}) {e:.1e}" for k, e in loss_errs.items() if e > 1e-4]
        values = ("WRONG: " + ", ".join(wrong)) if wrong else \
            f"right (products {r['matmul_err']:.0e}, loss {loss_err:.0e})"
        if base is None:
            base = r
        ratio = statistics.fmean([r["gpt"]["strict"] / base["gpt"]["strict"],
                                  r["gpt"]["fused"] / base["gpt"]["fused"]])
        mm = " ".join(f"{g:6.1f}" for g in r["matmul"])
        print(f"{name:28s} {mm:>27s} {r['per_op_us']:7.2f} {r['gpt']['strict']:7.2f} "
              f"{r['gpt']['fused']:7.2f} {ratio:10.2f}x  {values}", flush=True)
        if flags:
            print(f"{'':28s} XLA_FLAGS={flags}")


if __name__ == "__main__":
    main()
