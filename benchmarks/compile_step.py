"""torch.compile(backend="tpu") against its peers, in one run.

Two workloads:
  gpt     a training step (forward, backward, AdamW) of the GPT-style decoder
          of benchmarks/gpt.py (4 layers, d_model 256, seq 128, batch 8);
  resnet  an inference batch of a small ResNet (basic blocks, 3 stages,
          batch 16, 3x64x64 images).
Rows: PyTorch CPU eager, Inductor on CPU, tpu Strict Eager, tpu Fused Eager,
tpu compile, and for the GPT step the same step written in JAX (`jax.jit`
of forward, backward and an AdamW update written out, with the PyTorch
model's initial weights; JAX's own XLA CPU). The tpu side runs at HIGHEST
precision (numerics equal to the CPU peers'); tpu compile at DEFAULT is
reported beside it.

Peak memory: "peak MiB" is the process's resident-set high-water mark over
the timed steps less its resident set before the model was built (the
model, optimizer state, activations and the framework's caches: the same
measure for every row); "device MiB" is `torch.tpu.max_memory_allocated()`
over the timed steps (tpu rows) and, for the CPU rows of the GPT step, the
same figure for CPU tensors: those held when a step starts (parameters,
gradients, optimizer state, inputs) plus the highest running sum of the
allocations and frees that torch.profiler records during the step.

Every row runs in a fresh process with empty compile caches (Inductor's and
tpu's in a temporary directory), so "first step" is the cold time to the
first finished step: tracing, compiling and running it. The tpu compile row
and the Inductor row are then run again on the same cache directory (the
warm first step: the persistent XLA cache and PyTorch's AOTAutograd cache,
plus Inductor's FX graph cache for Inductor), and once more after a
one-line change to the training step (label smoothing in the loss): the
changed forward/backward graph misses the caches, the optimizer's hits.
Usage: python benchmarks/compile_step.py [--workload gpt|resnet|both]
           [--steps 10] [--warmup 2] [--skip-inductor] [--skip-jax]
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


def _rss_mib(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident set
    except OSError:
        pass


def _cpu_tensor_peak_mib(run, held):
    """Peak bytes of CPU tensors over one step, the CPU rows' counterpart of
    torch.tpu.max_memory_allocated(): the tensors held when the step starts
    (`held()`: parameters, gradients, optimizer state, inputs) plus the
    highest running sum of the allocations and frees that torch.profiler
    records during it. The profile covers the step before too, so that the
    frees of what that step allocated (its gradients) are recorded."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run().item()
        seen, base = set(), 0
        for t in held():
            if t is not None and t.untyped_storage().data_ptr() not in seen:
                seen.add(t.untyped_storage().data_ptr())
                base += t.untyped_storage().nbytes()
        with record_function("measured step"):
            run().item()
    events = prof.profiler.kineto_results.events()
    step = next(e for e in events if e.name() == "measured step")
    now = top = 0
    for t, nbytes in sorted((e.start_ns(), e.nbytes()) for e in events
                            if e.name() == "[memory]" and e.start_ns() >= step.start_ns()):
        if t > step.end_ns():
            break
        now += nbytes
        top = max(top, now)
    return (base + top) / 2**20


def jax_gpt_worker(args):
    """The GPT step of benchmarks/gpt.py in JAX, from the same initial
    weights: LayerNorm, fused QKV, causal attention, exact GELU, untied head,
    mean cross-entropy, AdamW (PyTorch's defaults: betas 0.9/0.999, eps
    1e-8, weight decay 0.01, lr 1e-3)."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_default_matmul_precision", "highest")
    t_start = time.perf_counter()
    import torch

    sys.path.insert(0, HERE)
    from gpt import GPT

    torch.manual_seed(0)
    base_rss = _rss_mib()
    tmodel = GPT(seq=args.seq)
    params = {k: jnp.asarray(v.detach().numpy()) for k, v in tmodel.state_dict().items()}
    heads, layers = tmodel.blocks[0].heads, len(tmodel.blocks)
    del tmodel
    data = torch.randint(0, 1024, (args.batch, args.seq))
    idx, tgt = jnp.asarray(data.numpy()), jnp.asarray(data.roll(-1, 1).numpy())

    def layer_norm(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * p["weight"] + p["bias"]

    def linear(x, p, bias=True):
        y = x @ p["weight"].T
        return y + p["bias"] if bias else y

    def sub(prefix, ps):
        return {k[len(prefix):]: v for k, v in ps.items() if k.startswith(prefix)}

    def forward(ps, idx):
        b, t = idx.shape
        x = ps["tok.weight"][idx] + ps["pos.weight"][:t]
        for i in range(layers):
            blk = sub(f"blocks.{i}.", ps)
            d = x.shape[-1]
            qkv = linear(layer_norm(x, sub("ln1.", blk)), sub("qkv.", blk))
            q, k, v = (z.reshape(b, t, heads, d // heads) for z in jnp.split(qkv, 3, axis=-1))
            a = jax.nn.dot_product_attention(q, k, v, is_causal=True)
            x = x + linear(a.reshape(b, t, d), sub("proj.", blk))
            h = jax.nn.gelu(linear(layer_norm(x, sub("ln2.", blk)), sub("fc.", blk)), approximate=False)
            x = x + linear(h, sub("out.", blk))
        return linear(layer_norm(x, sub("ln.", ps)), sub("head.", ps), bias=False)

    def loss_fn(ps, idx, tgt):
        logits = forward(ps, idx).reshape(-1, 1024)
        logp = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(logp, tgt.reshape(-1, 1), axis=1).mean()

    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.01

    @jax.jit
    def step(ps, m, v, count, idx, tgt):
        loss, g = jax.value_and_grad(loss_fn)(ps, idx, tgt)
        count = count + 1
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        c1, c2 = 1 - b1 ** count, 1 - b2 ** count

        def update(p, m, v):
            p = p * (1 - lr * wd)
            return p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps)

        return loss, jax.tree.map(update, ps, m, v), m, v, count

    m = jax.tree.map(jnp.zeros_like, params)
    v = jax.tree.map(jnp.zeros_like, params)
    count = jnp.zeros((), jnp.float32)
    state = [params, m, v, count]

    def run():
        loss, *state[:] = step(*state, idx, tgt)
        return float(loss)

    t0 = time.perf_counter()
    first_loss = run()
    first = time.perf_counter() - t0
    for _ in range(args.warmup):
        run()
    _reset_peak_rss()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = run()
    jax.block_until_ready(state)
    sps = args.steps / (time.perf_counter() - t0)
    print("RESULT " + json.dumps({
        "first": first, "sps": sps, "loss": loss, "first_loss": first_loss,
        "process": time.perf_counter() - t_start, "peak_mib": _rss_mib("VmHWM") - base_rss}))


def worker(args):
    if args.case == "jax":
        return jax_gpt_worker(args)
    import torch

    t_start = time.perf_counter()
    sys.path.insert(0, HERE)
    import torch_tpu
    from torch_tpu import EagerMode, Precision

    import torch.nn.functional as F
    from gpt import GPT, train_step

    torch.manual_seed(0)
    device = "cpu" if args.case in ("cpu", "inductor") else "tpu"
    if device == "tpu":
        torch.empty(1, device="tpu")  # the runtime's start-up is not the model's memory
    base_rss = _rss_mib()
    if args.workload == "gpt":
        model = GPT(seq=args.seq).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        data = torch.randint(0, 1024, (args.batch, args.seq))
        idx, tgt = data.to(device), data.roll(-1, 1).to(device)

        if not args.edit:
            def step():
                return train_step(model, opt, idx, tgt)
        else:
            def step():  # the user's one-line change
                logits = model(idx)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                                       label_smoothing=0.1)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                return loss
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
        if device == "tpu":
            torch.tpu.synchronize()
            torch.tpu.reset_peak_memory_stats()
        _reset_peak_rss()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            loss = run().item()
        if device == "tpu":
            torch.tpu.synchronize()
        sps = args.steps / (time.perf_counter() - t0)
        device_mib = torch.tpu.max_memory_allocated() / 2**20 if device == "tpu" else None
        if device == "cpu" and args.workload == "gpt":
            def held():
                return [*model.parameters(), *(p.grad for p in model.parameters()), idx, tgt,
                        *(v for st in opt.state.values() for v in st.values() if torch.is_tensor(v))]
            device_mib = _cpu_tensor_peak_mib(run, held)
    stats = torch.tpu._get_cache_stats()
    print("RESULT " + json.dumps({
        "first": first, "sps": sps, "loss": loss, "first_loss": first_loss,
        "process": time.perf_counter() - t_start, "compiles": stats["compiles"],
        "disk_hits": stats["disk_hits"], "peak_mib": _rss_mib("VmHWM") - base_rss,
        "device_mib": device_mib}))


# ------------------------------------------------------------------ driver --

def spawn(case, workload, precision, args, cache, edit=False):
    env = dict(os.environ, TORCH_TPU_COMPILATION_CACHE_DIR=os.path.join(cache, "tpu"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"))
    for name in ("TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_AUTOGRAD_CACHE"):
        env.pop(name, None)  # PyTorch's own caches, on as by default
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--case", case,
           "--workload", workload, "--precision", precision, "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--seq", str(args.seq), "--batch", str(args.batch)]
    if edit:
        cmd.append("--edit")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def bench(workload, args):
    rows = []
    cases = [("cpu", "PyTorch CPU eager", "HIGHEST"), ("inductor", "Inductor (CPU)", "HIGHEST"),
             ("tpu_strict", "tpu Strict Eager, HIGHEST", "HIGHEST"),
             ("tpu_fused", "tpu Fused Eager, HIGHEST", "HIGHEST"),
             ("tpu_compile", "tpu compile, HIGHEST", "HIGHEST"),
             ("tpu_compile", "tpu compile, DEFAULT", "DEFAULT")]
    if workload == "gpt" and not args.skip_jax:
        cases.append(("jax", "JAX jit (its XLA CPU)", "HIGHEST"))
    warm = {}  # case: (warm run, warm run after the edit)
    for case, name, prec in cases:
        if case == "inductor" and args.skip_inductor:
            continue
        with tempfile.TemporaryDirectory() as cache:
            r = spawn(case, workload, prec, args, cache)
            if case in ("tpu_compile", "inductor") and prec == "HIGHEST" and "error" not in r:
                again = spawn(case, workload, prec, args, cache)
                edited = spawn(case, workload, prec, args, cache, edit=True) if workload == "gpt" else None
                warm[case] = (again, edited)
        rows.append((name, r))
    what = (f"GPT 4x256 training step (AdamW), seq {args.seq}, batch {args.batch}"
            if workload == "gpt" else "ResNet (3 stages, basic blocks) inference, batch 16, 3x64x64")
    print(f"\n{what}; {args.steps} timed steps after {args.warmup} warm-up; cold caches")
    print(f"{'run':28s} {'steps/s':>8s} {'vs CPU':>7s} {'first step s':>13s} {'peak MiB':>9s} "
          f"{'device MiB':>11s} {'loss':>10s}")
    cpu = rows[0][1].get("sps")
    for name, r in rows:
        if "error" in r:
            print(f"{name:28s} FAILED: {r['error']}")
            continue
        dev = f"{r['device_mib']:11.1f}" if r.get("device_mib") is not None else f"{'-':>11s}"
        print(f"{name:28s} {r['sps']:8.2f} {r['sps'] / cpu:6.2f}x {r['first']:13.2f} "
              f"{r['peak_mib']:9.1f} {dev} {r['loss']:10.5f}")
    by = dict((n, r) for n, r in rows)
    jx = by.get("JAX jit (its XLA CPU)", {})
    if "sps" in jx:
        print("vs JAX (steps/s): " + ", ".join(
            f"{n.split(',')[0]} {r['sps'] / jx['sps']:.2f}x" for n, r in rows
            if "sps" in r and n.startswith("tpu") and "DEFAULT" not in n))
    tc, ind = by.get("tpu compile, HIGHEST", {}), by.get("Inductor (CPU)", {})
    for case, name, cold in (("tpu_compile", "tpu compile", tc), ("inductor", "Inductor", ind)):
        again, edited = warm.get(case, (None, None))
        if not again or "error" in again:
            continue
        line = (f"{name} warm start: first step cold {cold['first']:.2f} s, warm {again['first']:.2f} s "
                f"({again['first'] / cold['first']:.2f}x of cold")
        if case == "tpu_compile":
            line += f"; {again['disk_hits']} programs loaded, {again['compiles']} compiled"
        line += ")"
        if edited and "error" not in edited:
            line += f", after a one-line change {edited['first']:.2f} s"
            if case == "tpu_compile":
                line += f" ({edited['compiles']} compiled)"
        print(line)
    tw, iw = warm.get("tpu_compile", (None,))[0], warm.get("inductor", (None,))[0]
    if tw and iw and "first" in tw and "first" in iw:
        print(f"tpu compile / Inductor warm first step: {iw['first'] / tw['first']:.2f}x faster")
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
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--precision", default="HIGHEST", help=argparse.SUPPRESS)
    ap.add_argument("--edit", action="store_true", help=argparse.SUPPRESS)
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
