"""PyTorch's own device-generic tests, run on the tpu device.

PyTorch's device-generic test files (``test/test_indexing.py``,
``test/test_view_ops.py``, ...) are PyTorch's, not ours: they are not in this
repository. Put them in a directory (from the ``test/`` folder of the
pytorch/pytorch sources matching the installed torch) and pass it:

    python benchmarks/upstream/run.py --tests-dir DIR [--files a.py,b.py]
        [--mode strict|fused|debug] [--timeout 300] [--no-control] [-k EXPR]
        [--sample N]

Each file runs in child pytest processes with
``PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1``, so only the tpu test classes
(``...PRIVATEUSE1``, tests ``..._tpu_...``) are generated, from a scratch copy
of the directory. A child that dies (a signal: a crash) or makes no progress
for ``--timeout`` seconds (killed) is restarted without the tests it finished
and the one it died in, which is counted as crashed or timed out. Then a CPU
control run executes the CPU twins of the tests that did not pass on tpu
(``PYTORCH_TESTING_DEVICE_ONLY_FOR=cpu``): a test that fails on CPU too is
stale in this torch build and is not counted against tpu. Tests of classes
that are not device-generic (``TestAutograd``) run in the tpu children too;
their control runs the same tests, in order, with the backend autoload off
(``TORCH_DEVICE_BACKEND_AUTOLOAD=0``: no torch_tpu in the process).

Printed per file: passed, failed, skipped, crashed, timed out, how many of
the non-passing tests also fail on CPU, and the pass rate among tests that
pass on CPU; then the tpu-only failures grouped by their first error line.
``--json PATH`` writes every test's outcome. ``--sample N`` runs a fixed 1-in-N
sample of each file's tests (chosen by a hash of the test's id, so every op
and dtype family is represented), for files too large to run whole here.
"""

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FILES = ["test_indexing.py", "test_view_ops.py", "test_shape_ops.py",
                 "test_type_promotion.py"]
MODES = {"strict": {}, "fused": {"TORCH_TPU_DEFER_AND_FUSE": "1"},
         "debug": {"TORCH_TPU_LAUNCH_BLOCKING": "1"}}


def read_log(path):
    records = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except ValueError:  # a line cut short by a kill
                    pass
    return records


def run_children(file, scratch, env, timeout, extra, only=None, label=""):
    """Runs `file` in child pytest processes until every test has an outcome.

    Returns {nodeid: (outcome, error line)}, outcome one of passed, failed,
    skipped, crashed, timeout; and a list of problems outside any test.
    """
    results = {}
    problems = []
    logdir = tempfile.mkdtemp(prefix="log-", dir=scratch)
    round_no = 0
    while True:
        round_no += 1
        log = os.path.join(logdir, f"round{round_no}.jsonl")
        skip = os.path.join(logdir, f"skip{round_no}.txt")
        with open(skip, "w") as f:
            f.write("".join(n + "\n" for n in results))
        child_env = dict(env, TORCH_TPU_UPSTREAM_LOG=log, TORCH_TPU_UPSTREAM_SKIP=skip,
                         PYTHONPATH=os.pathsep.join(
                             [HERE, scratch, env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        if only is not None:
            only_path = os.path.join(logdir, "only.txt")
            with open(only_path, "w") as f:
                f.write("".join(n + "\n" for n in only))
            child_env["TORCH_TPU_UPSTREAM_ONLY"] = only_path
        cmd = [sys.executable, "-X", "faulthandler", "-m", "pytest", "-q", "-p", "_recorder",
               "-p", "no:cacheprovider", "--tb=no", "-rN", file, *extra]
        out = open(os.path.join(logdir, f"round{round_no}.out"), "w")
        proc = subprocess.Popen(cmd, cwd=scratch, env=child_env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        last_size, last_change = -1, time.monotonic()
        killed = False
        while proc.poll() is None:
            time.sleep(0.5)
            size = os.path.getsize(log) if os.path.exists(log) else 0
            if size != last_size:
                last_size, last_change = size, time.monotonic()
            elif time.monotonic() - last_change > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                killed = True
        out.close()
        records = read_log(log)
        running = None
        collected = None
        for r in records:
            if "collected" in r:
                collected = r["collected"]
            elif "start" in r:
                running = r["start"]
            elif "id" in r:
                if r["id"] not in results or results[r["id"]][0] == "passed":
                    results[r["id"]] = (r["outcome"], r.get("error", ""))
                if r["id"] == running:
                    running = None
        rc = proc.returncode
        if rc in (0, 1, 5) and not killed:
            return results, problems  # finished: every test reported
        if running is not None:
            outcome = "timeout" if killed else "crashed"
            how = (f"no progress for {timeout:.0f} s" if killed
                   else f"child died: {describe_rc(rc)}")
            results[running] = (outcome, how)
            print(f"  {label}{outcome}: {running} ({how}); restarting", flush=True)
            continue
        with open(os.path.join(logdir, f"round{round_no}.out")) as f:
            tail = f.read()[-2000:]
        problems.append(f"child exited with {describe_rc(rc)} outside any test"
                        f" (collected {collected}):\n{tail}")
        return results, problems


def describe_rc(rc):
    if rc is not None and rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit code {rc}"


def cpu_twin(nodeid):
    """test_x.py::TestFooPRIVATEUSE1::test_bar_tpu_float32 -> the CPU test's id."""
    path, _, rest = nodeid.partition("::")
    cls, _, name = rest.partition("::")
    # The generated class ends in the backend's generic name or in the
    # device type (instantiate_device_type_tests names both ways).
    for suffix in ("PRIVATEUSE1", "TPU"):
        if cls.endswith(suffix):
            cls = cls[: -len(suffix)] + "CPU"
            break
    else:
        return None
    new = re.sub(r"_tpu(?=_|$)", "_cpu", name, count=1)
    if new == name:
        return None
    return f"{path}::{cls}::{new}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests-dir", required=True,
                    help="a directory with PyTorch's test files (its test/ folder)")
    ap.add_argument("--files", default=",".join(DEFAULT_FILES),
                    help="comma-separated file names in --tests-dir")
    ap.add_argument("--mode", choices=sorted(MODES), default="strict")
    ap.add_argument("--timeout", type=float, default=300,
                    help="seconds without progress before a child is killed")
    ap.add_argument("--no-control", action="store_true", help="skip the CPU control run")
    ap.add_argument("--cache-dir", default=None,
                    help="persistent compilation cache to use (default: an empty one per file)")
    ap.add_argument("--json", default=None, help="write every test's outcome here")
    ap.add_argument("-k", default=None, help="pytest -k expression")
    ap.add_argument("--sample", type=int, default=1,
                    help="run the 1-in-N sample of the tests whose id hashes to 0 mod N")
    ap.add_argument("--matmul-precision", choices=["default", "high", "highest"],
                    default="highest",
                    help="f32 matmul precision on tpu (torch.tpu.precision); the tests "
                         "compare f32 matmuls with CPU's f32 results (default: highest)")
    args = ap.parse_args()

    files = [f for f in args.files.split(",") if f]
    scratch = tempfile.mkdtemp(prefix="torch_tpu_upstream_")
    for f in files:
        src = os.path.join(args.tests_dir, f)
        if not os.path.exists(src):
            sys.exit(f"{src} not found")
    # A scratch copy: the test files may write next to themselves.
    # (with the test folder's packages: test_autograd.py imports autograd.*)
    for name in os.listdir(args.tests_dir):
        src = os.path.join(args.tests_dir, name)
        if os.path.isfile(src) and name.endswith(".py"):
            shutil.copy(src, scratch)
        elif os.path.isdir(src) and not name.startswith((".", "__")):
            shutil.copytree(src, os.path.join(scratch, name),
                            ignore=shutil.ignore_patterns("__pycache__", ".*"))
    extra = ["-k", args.k] if args.k else []
    base_env = dict(os.environ)
    base_env.pop("TORCH_TPU_DEFER_AND_FUSE", None)
    base_env.pop("TORCH_TPU_LAUNCH_BLOCKING", None)
    base_env.update(MODES[args.mode])
    if args.sample > 1:
        base_env["TORCH_TPU_UPSTREAM_SAMPLE"] = str(args.sample)
    base_env["TORCH_TPU_UPSTREAM_PRECISION"] = args.matmul_precision

    table = []
    everything = {}
    for f in files:
        t0 = time.monotonic()
        print(f"== {f} ({args.mode})", flush=True)
        env = dict(base_env, PYTORCH_TESTING_DEVICE_ONLY_FOR="privateuse1")
        env["TORCH_TPU_COMPILATION_CACHE_DIR"] = args.cache_dir or tempfile.mkdtemp(
            prefix="cache-", dir=scratch)
        results, problems = run_children(f, scratch, env, args.timeout, extra)
        for p in problems:
            print("  problem: " + p.replace("\n", "\n    "))
        bad = [n for n, (o, _) in results.items() if o in ("failed", "crashed", "timeout")]
        stale = set()
        if bad and not args.no_control:
            twins = {n: cpu_twin(n) for n in bad}
            wanted = {t for t in twins.values() if t}
            cpu_env = dict(base_env, PYTORCH_TESTING_DEVICE_ONLY_FOR="cpu")
            cpu_results, _ = run_children(f, scratch, cpu_env, args.timeout, extra,
                                          only=wanted, label="cpu ")
            stale = {n for n, t in twins.items()
                     if t and cpu_results.get(t, ("missing",))[0] in ("failed", "crashed",
                                                                      "timeout")}
            # Tests of device-independent classes (TestAutograd, ...) run in
            # the tpu child too, with torch_tpu loaded. Their control is the
            # same ordered set of such tests without torch_tpu (the backend
            # autoload off), since some depend on state earlier ones leave.
            plain_bad = [n for n, t in twins.items() if t is None]
            if plain_bad:
                plain = [n for n in results if cpu_twin(n) is None]
                plain_env = dict(base_env, PYTORCH_TESTING_DEVICE_ONLY_FOR="cpu",
                                 TORCH_DEVICE_BACKEND_AUTOLOAD="0")
                plain_results, _ = run_children(f, scratch, plain_env, args.timeout, extra,
                                                only=set(plain), label="no-tpu ")
                stale |= {n for n in plain_bad
                          if plain_results.get(n, ("missing",))[0] in ("failed", "crashed",
                                                                       "timeout")}
        counts = collections.Counter(o for o, _ in results.values())
        tpu_only = [n for n in bad if n not in stale]
        eligible = counts["passed"] + len(tpu_only)
        rate = 100.0 * counts["passed"] / eligible if eligible else 100.0
        table.append((f, counts["passed"], counts["failed"], counts["skipped"],
                      counts["crashed"], counts["timeout"], len(stale), len(tpu_only), rate,
                      time.monotonic() - t0))
        groups = collections.defaultdict(list)
        for n in tpu_only:
            outcome, err = results[n]
            key = err if outcome == "failed" else f"[{outcome}] {err}"
            groups[key].append(n.rpartition("::")[2])
        for key, names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            print(f"  {len(names):4d}  {key}\n        ({shown})")
        for n, r in results.items():
            everything[n] = {"outcome": r[0], "error": r[1], "cpu_fails_too": n in stale}
        print(flush=True)

    print(f"{'file':28s} {'passed':>7s} {'failed':>7s} {'skipped':>7s} {'crashed':>7s} "
          f"{'timeout':>7s} {'cpu too':>7s} {'tpu-only':>8s} {'pass %':>7s} {'min':>5s}")
    totals = [0] * 7
    for row in table:
        f, *nums, rate, secs = row
        totals = [a + b for a, b in zip(totals, nums)]
        print(f"{f:28s} " + " ".join(f"{n:7d}" for n in nums[:6]) +
              f" {nums[6]:8d} {rate:7.1f} {secs / 60:5.1f}")
    eligible = totals[0] + totals[6]
    print(f"{'total':28s} " + " ".join(f"{n:7d}" for n in totals[:6]) +
          f" {totals[6]:8d} {100.0 * totals[0] / eligible if eligible else 100.0:7.1f}")
    print("(pass % = passed / (passed + tpu-only failures, crashes and time-outs); "
          "'cpu too': failed on tpu and on CPU)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(everything, f, indent=1, sort_keys=True)
    crashed = sum(row[4] for row in table)
    shutil.rmtree(scratch, ignore_errors=True)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
