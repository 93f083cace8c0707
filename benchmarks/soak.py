"""Soak: a long, varied op mix in one process per eager mode, checked against CPU.

A user's training or serving process lives for days; state that builds up in
it (compiled programs, cached executables, buffers, index-check records,
errors raised and caught) must not crash it or change a value. Each mode runs
in a child process of its own for the given time; each iteration picks a task
at random (elementwise chains, reductions, matmuls, indexing and scatter with
duplicate indices, index_reduce with out= into a view, views written through,
shape ops, sorting, convolution, norms, an MLP's forward and backward with an
optimizer step, transfers, torch.compile graphs), with shapes drawn from a
range so that new programs keep being compiled, runs it on tpu and on CPU,
and compares. Every few tasks it makes an op fail on purpose (a bad view, an
out-of-range index, a dtype mismatch) and checks that the error is the one
CPU raises and that the device works after it.

Each child prints a line a minute (tasks done, mismatches, compiled programs,
executables in memory and evicted, the process's memory mappings and RSS);
the parent prints a summary per mode. A child that dies (a signal) or hangs
is reported as a crash. Exit status 1 on any crash or mismatch.

Usage: python benchmarks/soak.py [--minutes 10] [--modes strict,fused,debug]
         [--seed 0] [--shapes 48] [--cache-size N] [--map-budget N]
--cache-size sets TORCH_TPU_EXECUTABLE_CACHE_SIZE in the children (a small
value exercises eviction and reloading); --map-budget N lets the cache's
executables add at most about N memory mappings to the process (the cache
then shrinks under that budget, as it does near vm.max_map_count). Run it under the sanitizer build
(README, "Sanitizers") to check memory safety.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time

MODES = {
    "strict": {},
    "fused": {"TORCH_TPU_DEFER_AND_FUSE": "1"},
    "debug": {"TORCH_TPU_LAUNCH_BLOCKING": "1"},
}


def _maps():
    try:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    except OSError:
        return -1


def _rss_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return -1.0


def child(args):
    import torch
    import torch.nn.functional as F

    import torch_tpu  # noqa: F401

    torch.set_float32_matmul_precision("highest")
    if args.map_budget:
        # A budget of memory mappings this many above the process's count at
        # start: the executable cache then shrinks and regrows under it.
        from torch_tpu import _C
        torch.ones(1, device="tpu").cpu()
        _C._set_map_budget_for_testing(_maps() + args.map_budget)
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    dev = "tpu"
    sizes = [1 + (i * 7) % 61 for i in range(args.shapes)]

    def size():
        return rng.choice(sizes)

    def close(a, b, tol=1e-4):
        if isinstance(a, (tuple, list)):
            return all(close(x, y, tol) for x, y in zip(a, b))
        a = a.cpu()
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype.is_floating_point:
            return torch.allclose(a, b, rtol=tol, atol=tol, equal_nan=True)
        return torch.equal(a, b)

    # Each task takes a device and returns its results; the loop runs it
    # on tpu and on CPU from the same inputs.
    def t_elementwise():
        n, m = size(), size()
        x, y = torch.randn(n, m), torch.randn(n, m)

        def f(d):
            a, b = x.to(d), y.to(d)
            z = torch.sin(a) * b + torch.exp(-a.abs()) - b.clamp(-0.5, 0.5)
            z.add_(a, alpha=0.5).mul_(torch.sigmoid(b))
            return torch.where(z > 0, z, z * 0.1)
        return f

    def t_reduction():
        n, m = size(), size()
        x = torch.randn(n, m)

        def f(d):
            a = x.to(d)
            return (a.sum(0), a.mean(1), a.amax(0), a.std(1) if m > 1 else a.var(0),
                    a.logsumexp(1), a.argmax(1), a.cumsum(0))
        return f

    def t_matmul():
        n, k, m = size(), size(), size()
        x, w, b = torch.randn(n, k), torch.randn(k, m), torch.randn(m)

        def f(d):
            return torch.addmm(b.to(d), x.to(d), w.to(d)), torch.bmm(
                x.to(d).unsqueeze(0).expand(2, n, k), w.to(d).unsqueeze(0).expand(2, k, m))
        return f

    def t_indexing():
        n, m = size() + 1, size()
        x = torch.randn(n, m)
        idx = torch.randint(0, n, (size(),))
        src = torch.randn(idx.numel(), m)

        def f(d):
            a = x.to(d).clone()
            i = idx.to(d)
            a.index_put_((i,), src.to(d), accumulate=True)   # duplicate indices
            g = a[i] * 2
            s = torch.zeros(n, m, device=d).scatter_add_(0, i.unsqueeze(1).expand(-1, m), src.to(d))
            return a, g, s, a.index_select(0, i), torch.gather(a, 0, i.unsqueeze(1).expand(-1, m))
        return f

    def t_index_reduce_out():
        n, m = size() + 1, size()
        x = torch.randn(n, m)
        idx = torch.randint(0, n, (size(),))
        src = torch.randn(idx.numel(), m)
        reduce = rng.choice(["prod", "mean", "amax", "amin"])
        include_self = rng.random() < 0.5

        def f(d):
            a = x.to(d).index_reduce(0, idx.to(d), src.to(d), reduce, include_self=include_self)
            expected = torch.zeros(2, n, m, device=d)
            torch.maximum(a, x.to(d), out=expected[1])   # out= into a view
            return a, expected
        return f

    def t_views():
        n, m = size() + 1, size() + 1
        x = torch.randn(n, m)

        def f(d):
            a = x.to(d).clone()
            v = a.t()[1:, ::2]
            v.mul_(3).add_(1)
            w = a.view(-1)[: n]
            w.zero_()
            u = a.unsqueeze(0).expand(3, n, m).sum(0)
            return a, u, a.narrow(1, 1, m - 1).contiguous()
        return f

    def t_shape():
        n, m = size(), size()
        xs = [torch.randn(n, m) for _ in range(3)]

        def f(d):
            ys = [x.to(d) for x in xs]
            c = torch.cat(ys, 1)
            s = torch.stack(ys)
            parts = torch.split(c, max(1, m // 2), dim=1)
            return c, s.permute(2, 0, 1).reshape(m, -1), parts[-1], torch.flip(c, [0, 1]), c.roll(3, 1)
        return f

    def t_sort():
        n = size() + 1
        x = torch.randn(3, n)

        def f(d):
            v, i = torch.sort(x.to(d), dim=1, stable=True)
            tv, _ = torch.topk(x.to(d), min(3, n), dim=1)
            return v, i, tv, torch.argsort(x.to(d), dim=0, stable=True)
        return f

    def t_conv():
        c, hw = rng.choice([1, 2, 3]), rng.choice([5, 8, 11])
        x, w = torch.randn(2, c, hw, hw), torch.randn(4, c, 3, 3)

        def f(d):
            y = F.conv2d(x.to(d), w.to(d), padding=1)
            return F.max_pool2d(F.relu(y), 2), F.avg_pool2d(y, 2), F.batch_norm(
                y, None, None, training=True)
        return f

    def t_norms():
        n, m = size(), size() + 1
        x = torch.randn(n, m)
        g = torch.randn(m)

        def f(d):
            return (F.layer_norm(x.to(d), (m,), g.to(d)), F.softmax(x.to(d), 1),
                    F.log_softmax(x.to(d), 0), F.gelu(x.to(d)))
        return f

    def t_train():
        n, h = size(), size()
        torch.manual_seed(rng.randrange(1 << 30))
        net = torch.nn.Sequential(torch.nn.Linear(8, h), torch.nn.Tanh(), torch.nn.Linear(h, 3))
        x, y = torch.randn(n, 8), torch.randint(0, 3, (n,))
        state = {k: v.clone() for k, v in net.state_dict().items()}

        def f(d):
            m = torch.nn.Sequential(torch.nn.Linear(8, h), torch.nn.Tanh(), torch.nn.Linear(h, 3))
            m.load_state_dict(state)
            m.to(d)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
            losses = []
            for _ in range(3):
                loss = F.cross_entropy(m(x.to(d)), y.to(d))
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.detach())
            return torch.stack(losses), m[0].weight.detach()
        return f

    def t_transfer():
        n = size()
        x = torch.randn(n, 3).to(torch.float64)

        def f(d):
            a = x.to(d).to(torch.float32)
            b = a.cpu().to(d) + 1
            return b, a.to(torch.int32), torch.arange(n, device=d) * 2
        return f

    compiled = {}

    def t_compile():
        key = rng.choice([0, 1, 2])
        n = rng.choice([4, 8, 16])
        x = torch.randn(n, 8)

        def g(a):
            return torch.tanh(a @ a.t()).sum(1) + a.mean(1) * key

        def f(d):
            if d == "cpu":
                return g(x)
            if key not in compiled:
                compiled[key] = torch.compile(g, backend="tpu", dynamic=False)
            return compiled[key](x.to(d))
        return f

    tasks = [t_elementwise, t_reduction, t_matmul, t_indexing, t_index_reduce_out, t_views,
             t_shape, t_sort, t_conv, t_norms, t_train, t_transfer]
    if not args.no_compile:
        tasks.append(t_compile)

    # Errors made on purpose: each raises on CPU and must raise the same
    # type on tpu, after which the device keeps working.
    def e_view():
        return lambda d: torch.randn(2, 3, device=d).view(4)

    def e_index():
        n = size() + 1
        return lambda d: torch.randn(n, 2, device=d)[torch.tensor([0, n + 3], device=d)].cpu()

    def e_dtype():
        return lambda d: torch.randn(3, device=d).add_(torch.ones(3, dtype=torch.complex64, device=d))

    def e_shape():
        return lambda d: torch.randn(2, 3, device=d) @ torch.randn(4, 5, device=d)

    errors = [e_view, e_index, e_dtype, e_shape]

    def stats():
        return torch.tpu._get_cache_stats()

    t_end = time.time() + args.minutes * 60
    next_report = time.time() + 60
    done = mismatches = raised = 0
    by_task = {}
    first_bad = []
    while time.time() < t_end:
        if done % 7 == 6:
            make = rng.choice(errors)
            fn = make()
            ref_exc = got_exc = None
            try:
                fn("cpu")
            except Exception as e:  # noqa: BLE001
                ref_exc = type(e)
            try:
                fn(dev)
                torch_tpu.synchronize()
            except Exception as e:  # noqa: BLE001
                got_exc = type(e)
            raised += 1
            if ref_exc is None or got_exc is None or not issubclass(got_exc, ref_exc):
                mismatches += 1
                if len(first_bad) < 5:
                    first_bad.append(f"{make.__name__}: cpu raised {ref_exc}, tpu {got_exc}")
        make = rng.choice(tasks)
        fn = make()
        ref = fn("cpu")
        got = fn(dev)
        ok = close(got, ref)
        by_task[make.__name__] = by_task.get(make.__name__, 0) + 1
        done += 1
        if not ok:
            mismatches += 1
            if len(first_bad) < 5:
                first_bad.append(f"{make.__name__} (task {done}) differs from CPU")
        if time.time() >= next_report:
            next_report += 60
            s = stats()
            print(json.dumps({"progress": done, "mismatches": mismatches, "errors_raised": raised,
                              "compiles": s.get("compiles"), "cached": s.get("cached"),
                              "evicted": s.get("evicted"), "maps": _maps(),
                              "rss_mb": round(_rss_mb())}), flush=True)
    s = stats()
    print("RESULT " + json.dumps({"tasks": done, "mismatches": mismatches, "errors_raised": raised,
                                  "first_bad": first_bad, "by_task": by_task,
                                  "cache": {k: v for k, v in s.items() if k != "entries"},
                                  "maps": _maps(), "rss_mb": round(_rss_mb())}), flush=True)
    return 1 if mismatches else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--modes", default="strict,fused,debug")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shapes", type=int, default=48, help="distinct sizes drawn from")
    p.add_argument("--cache-size", type=int, default=0)
    p.add_argument("--map-budget", type=int, default=0,
                   help="memory mappings the executable cache may add (default: half of "
                        "vm.max_map_count for the process)")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        sys.exit(child(args))
    failed = False
    summary = []
    for mode in args.modes.split(","):
        env = dict(os.environ, **MODES[mode])
        if args.cache_size:
            env["TORCH_TPU_EXECUTABLE_CACHE_SIZE"] = str(args.cache_size)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--minutes", str(args.minutes),
               "--seed", str(args.seed), "--shapes", str(args.shapes),
               "--map-budget", str(args.map_budget)]
        if args.no_compile:
            cmd.append("--no-compile")
        print(f"== {mode}", flush=True)
        t0 = time.time()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
        result = None
        limit = args.minutes * 60 + 600
        try:
            for line in proc.stdout:
                print("  " + line.rstrip(), flush=True)
                if line.startswith("RESULT "):
                    result = json.loads(line[len("RESULT "):])
            rc = proc.wait(timeout=max(1, limit - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "hang"
        if isinstance(rc, int) and rc < 0:
            rc = f"crashed ({signal.Signals(-rc).name})"
        elapsed = time.time() - t0
        if result is None or rc != 0:
            failed = True
        tasks = result["tasks"] if result else "-"
        bad = result["mismatches"] if result else "-"
        maps = result["maps"] if result else "-"
        summary.append(f"{mode:<8} {str(rc):<22} {tasks:>7} {bad:>10} {maps:>7} {elapsed / 60:8.1f}")
    print(f"{'mode':<8} {'exit':<22} {'tasks':>7} {'mismatches':>10} {'maps':>7} {'minutes':>8}")
    for line in summary:
        print(line)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
