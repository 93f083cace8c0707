"""PyTorch's OpInfo database on the tpu device, checked against PyTorch CPU.

For every OpInfo in ``op_db`` (or those named with ``--ops``), the sweep takes
the OpInfo's sample inputs on CPU, copies each sample (the input, the args and
the kwargs, tensors nested in lists/tuples/dicts too) to tpu, runs the op on
both devices and compares the outputs with ``torch.testing.assert_close``.

Usage::

    python benchmarks/opinfo_sweep.py                       # whole op_db, float32
    python benchmarks/opinfo_sweep.py --ops add,mm,softmax  # by OpInfo name
    python benchmarks/opinfo_sweep.py --limit 50 --bf16     # first 50, + bfloat16
    python benchmarks/opinfo_sweep.py --summary-missing     # + missing aten ops, by count

One line per OpInfo: ``name  fwd: PASS|FAIL <reason>  bwd: PASS|FAIL <reason>|n/a``,
and last ``opinfo: F/N forward, G/M backward``: F of the N OpInfos run passed
every forward sample, G of the M OpInfos run with autograd support passed every
backward sample.

What is checked
---------------
* dtypes: float32; with ``--bf16`` also bfloat16 where the OpInfo supports it
  on CPU. An OpInfo without float32 support on CPU (the integer/bool-only ops:
  bitwise_*, gcd, ...) runs once with int64 (or bool if it has no int64), so the
  missing-op list covers them too; one with none of these is not run.
* tolerances (rtol, atol): float32 1e-4, 1e-4; bfloat16 1.6e-2, 1e-2; integer
  and bool results must be exact. float32 is looser than assert_close's
  default (1.3e-6, 1e-5): XLA reduces in a different order and uses its own
  approximations of transcendental functions (PyTorch's own CUDA-vs-CPU OpInfo
  test, test_compare_cpu, allows 1e-3). The sweep runs at
  ``torch.set_float32_matmul_precision("highest")``: at the default precision
  f32 matmul-class ops on XLA may use reduced-precision passes and will not
  match CPU.
* backward: for OpInfos with ``supports_autograd``, each float32 sample (taken
  with requires_grad=True) also computes the gradient of the sum of its
  floating outputs (after the sample's ``output_process_fn_grad``) w.r.t. its
  floating tensor inputs, on both devices, compared at the float32 tolerance.
* ties: sort/argsort (unless stable=True), topk, mode, kthvalue, median and
  nanmedian may break ties differently from CPU (PyTorch leaves the order of
  equal elements, or which index of a repeated value is returned,
  unspecified): an index output passes if it selects the same input values as
  CPU's indices.
* low precision: a bfloat16 result that misses the tolerance still passes if
  it is at least as close (5% slack) as CPU's result to the op computed in
  float64 on the same inputs -- the rule PyTorch's own test_ops.py applies
  when comparing two low-precision implementations. CPU rounds some
  intermediates to bfloat16 (addbmm per batch, div's quotient before
  truncation); XLA keeps them in float32.
* random ops (dropout, bernoulli, normal, rand*, empty*, ...) are compared by
  shape and dtype only: their values are not expected to agree across devices.
* a sample on which the CPU reference itself raises is skipped.
* samples: ``op.sample_inputs`` (a few per OpInfo: unary ufuncs have one 20x20
  tensor); ``--reference-inputs`` uses ``op.reference_inputs`` instead (edge
  cases, extremal values, broadcasting; many more samples, slower).
* arguments an op requires on the CPU stay there (tensor_split's indices).
* tensors are copied with their strides and storage offset (a view of a larger
  storage stays a view on tpu), so layout-dependent ops (as_strided, ...) see
  the same memory on both devices.

Classification
--------------
An OpInfo passes forward (backward) if every sample run passed. Otherwise the
reason is the first failing sample's exception type and the first line of its
message; a NotImplementedError naming an aten op reads ``missing: aten::X``
(the overload named by the error), and a value mismatch reads ``mismatch``
with the element count and the greatest differences.

An OpInfo stops at its first failing sample once both its forward and its
backward (if any) have failed. Each OpInfo has a time budget (``--budget``, 10 s): once spent, its remaining
samples are skipped and the OpInfo counts as passing only if all the samples
it did run passed (the line then says ``budget: k samples``).

Robustness
----------
Every sample is run inside try/except, so a Python-level error never stops the
sweep. Crashes (a signal in C++) and hangs cannot be caught that way, so the
OpInfos run in a worker process: if the worker dies, the OpInfo it was on is
recorded as ``FAIL crash (...)``; if one OpInfo takes longer than
``--hard-timeout`` seconds (a hang inside a single sample), the worker is
killed and the OpInfo is recorded as ``FAIL hang``. Either way a new worker
continues with the next OpInfo. The worker is also replaced every
``--ops-per-worker`` OpInfos, which bounds the memory held by compiled
programs and caches. ``--in-process`` runs without a worker (for debugging).

A full float32 sweep of op_db takes on the order of an hour on a 2-core
machine (see the timing line printed at the end).
"""

import argparse
import collections
import json
import os
import re
import select
import subprocess
import sys
import time
import traceback

import torch
from torch.utils import _pytree as pytree

DEVICE = "tpu"
TOLERANCES = {  # dtype -> (rtol, atol)
    torch.float32: (1e-4, 1e-4),
    torch.bfloat16: (1.6e-2, 1e-2),
}
BUDGET_S = 10.0

# OpInfos whose outputs are random or uninitialized: compare metadata only.
_RANDOM_PATTERNS = re.compile(
    r"(dropout|bernoulli|normal|uniform|rand|multinomial|empty|exponential|"
    r"geometric|cauchy|log_normal|rrelu|poisson)")

# Tensor arguments an op requires on the CPU (by position in sample.args).
_ARGS_ON_CPU = {"tensor_split": {0}}

# The OpInfos expected to fail (forward, backward or both) on tpu, each with
# its reason. The sweep marks them and lists every failure that is not here
# (a regression) and every entry that passed (to be removed).
_RANDOM_REGIONS = ("the pooling regions are drawn from the device's generator, so they differ "
                   "from CPU's draw (with the same samples the results are exact: tests/aten/rnn/test_rnn.py)")
_NO_SPARSE = "sparse layouts are not supported on tpu"
_DROPOUT_VALUES = ("samples use dropout: random values cannot match CPU's, but the sweep "
                   "compares values for this OpInfo (its name does not say dropout)")
EXPECTED_FAILURES = {
    "sparse.sampled_addmm": _NO_SPARSE,
    "sparse.mm.reduce": _NO_SPARSE,
    "to_sparse": _NO_SPARSE,
    "nn.functional.scaled_dot_product_attention": _DROPOUT_VALUES,
    "nn.functional.multi_head_attention_forward": _DROPOUT_VALUES,
    "svd": "full_matrices=True on non-square input is not lowered (reduced SVD is)",
    "linalg.svd": "full_matrices=True on non-square input is not lowered (reduced SVD is)",
    "linalg.eigh": "eigenvectors are unique only up to sign; Jacobi's signs differ from LAPACK's "
                   "(eigenvalues match)",
    "pca_lowrank": "singular vectors are unique only up to sign; signs differ from LAPACK's",
    "svd_lowrank": "randomized low-rank SVD through the Jacobi SVD: one element ends 1.4e-4 from "
                   "CPU's, just outside the 1e-4 tolerance",
    "matrix_exp": "degree-13 Pade with scaling and squaring; CPU uses degree-18 Taylor: in float32 "
                  "one element of 125 ends 2.6e-4 from CPU's (tolerance 1e-4)",
    "linalg.ldl_factor": "LDL factorization (Bunch-Kaufman pivoting) is not lowered",
    "linalg.ldl_factor_ex": "LDL factorization (Bunch-Kaufman pivoting) is not lowered",
    "linalg.ldl_solve": "LDL factorization (Bunch-Kaufman pivoting) is not lowered",
    "histogramdd": "not lowered yet (_histogramdd_bin_edges)",
    "nn.functional.fractional_max_pool2d": _RANDOM_REGIONS,
    "nn.functional.fractional_max_pool3d": _RANDOM_REGIONS,
    "nn.functional.grid_sample": "bicubic interpolation is not lowered (bilinear and nearest are)",
    "grid_sampler_2d": "bicubic interpolation is not lowered (bilinear and nearest are)",
}

_MISSING_RE = re.compile(r"'(aten::[A-Za-z0-9_.]+)'")


def op_full_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def is_random_op(op):
    return bool(_RANDOM_PATTERNS.search(op.name))


def get_op_db():
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def select_ops(names=None, limit=None):
    """OpInfos to run: all of op_db, or those whose name or full name is in names."""
    ops = get_op_db()
    if names:
        wanted = set(names)
        ops = [op for op in ops if op.name in wanted or op_full_name(op) in wanted]
    if limit:
        ops = ops[:limit]
    return ops


# ------------------------------------------------------------- copying --

def _to_device_tensor(t, device):
    """t copied to device with the same strides and storage offset."""
    src = t.detach()
    if src.layout != torch.strided:
        return src.to(device, copy=True)
    try:
        if src.is_contiguous() and src.storage_offset() == 0:
            return src.to(device, copy=True)
        nelem = src.untyped_storage().nbytes() // src.element_size()
        flat = torch.as_strided(src, (nelem,), (1,), 0).to(device, copy=True)
        out = torch.as_strided(flat, src.size(), src.stride(), src.storage_offset())
        return out
    except Exception:
        return src.clone().to(device)


def to_device(tree, device, memo=None):
    """Copies the tensors in a (nested) structure to device, leaves that
    require grad staying leaves that require grad; a tensor appearing twice
    stays one tensor. torch.device('cpu') arguments become the target device."""
    memo = {} if memo is None else memo

    def conv(x):
        if isinstance(x, torch.Tensor):
            key = id(x)
            if key not in memo:
                y = _to_device_tensor(x, device)
                if x.requires_grad:
                    y.requires_grad_(True)
                memo[key] = y
            return memo[key]
        if isinstance(x, torch.device) and x.type == "cpu":
            return torch.device(device)
        return x

    return pytree.tree_map(conv, tree)


def to_cpu(tree):
    return pytree.tree_map(
        lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, tree)


# ----------------------------------------------------------- comparing --

def _meta(tree):
    return pytree.tree_map(
        lambda x: (tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x, tree)


def compare(actual, expected, dtype, random_values=False):
    """Raises AssertionError if actual (from tpu, already on CPU) differs from expected."""
    if random_values:
        a = [(tuple(x.shape), x.dtype) for x in pytree.tree_leaves(actual)
             if isinstance(x, torch.Tensor)]
        e = [(tuple(x.shape), x.dtype) for x in pytree.tree_leaves(expected)
             if isinstance(x, torch.Tensor)]
        if a != e:
            raise AssertionError(f"shape/dtype mismatch: {a} vs {e}")
        return
    rtol, atol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True,
                               check_device=False, check_layout=False, check_stride=False)


# Ops whose index outputs may break ties differently from CPU: PyTorch leaves
# the order of equal elements unspecified (sort/argsort unless stable=True,
# topk) or which index of a repeated value is returned (mode, kthvalue,
# median with dim). For these, an index output passes if it selects the same
# values from the input as CPU's indices do. name -> position of `dim` and
# of `keepdim` in sample.args (None: no such argument).
_TIE_INDEX_OPS = {"sort": (0, None), "argsort": (0, None), "topk": (1, None),
                  "mode": (0, 1), "kthvalue": (1, 2), "median": (0, 1), "nanmedian": (0, 1)}


def _arg(sample, name, pos, default):
    if name in sample.kwargs:
        return sample.kwargs[name]
    if pos is not None and len(sample.args) > pos:
        return sample.args[pos]
    return default


def ties_equivalent(op, sample, actual, expected, dtype):
    """True if actual differs from expected only in how index outputs break
    ties (see _TIE_INDEX_OPS); raises AssertionError if the values differ."""
    spec = _TIE_INDEX_OPS.get(op.name)
    x = sample.input
    if spec is None or _arg(sample, "stable", None, False) or not isinstance(x, torch.Tensor):
        return False
    if x.dim() == 0:
        return False
    dim = _arg(sample, "dim", spec[0], -1)
    keepdim = op.name in ("sort", "argsort", "topk") or bool(_arg(sample, "keepdim", spec[1], False))
    a_leaves, e_leaves = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    if not isinstance(dim, int) or len(a_leaves) != len(e_leaves):
        return False
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor) and e.dtype == torch.int64:
            pick = lambda i: x.gather(dim, i if keepdim else i.unsqueeze(dim))  # noqa: E731
            compare(pick(a), pick(e), dtype)
        else:
            compare(a, e, dtype)
    return True


def _distance(result, precise):
    """Sum of |result - precise| over the floating outputs (inf where only one is NaN)."""
    total = 0.0
    for r, p in zip(pytree.tree_leaves(result), pytree.tree_leaves(precise)):
        if not isinstance(r, torch.Tensor) or not r.is_floating_point():
            continue
        r, p = r.double(), p.double()
        d = (r - p).abs()
        d = torch.where(r.isnan() & p.isnan(), 0.0, d)
        d = torch.where(r.isnan() ^ p.isnan(), float("inf"), d)
        d = torch.where((r == p), 0.0, d)  # equal infinities
        total += d.sum().item()
    return total


def as_precise_as_cpu(op, cpu_tree, actual, expected):
    """PyTorch's own rule for comparing two low-precision implementations
    (test_ops.py, _ref_test_helper): run the op in float64 on the same
    (bfloat16-rounded) inputs and accept the tpu result if it is no farther
    from that than CPU's result is (5% slack). bfloat16 kernels legitimately
    differ in where they round (CPU rounds some intermediates; XLA keeps them
    in float32), and such differences can exceed a fixed tolerance."""
    leaves = pytree.tree_leaves(expected)
    if not leaves or not all(isinstance(e, torch.Tensor) and e.is_floating_point() for e in leaves):
        return False
    precise_tree = pytree.tree_map(
        lambda t: t.detach().double() if isinstance(t, torch.Tensor) and t.is_floating_point()
        else t, cpu_tree)
    try:
        precise = _call(op, precise_tree[0], precise_tree[1], precise_tree[2])
    except Exception:
        return False
    if len(pytree.tree_leaves(precise)) != len(leaves):
        return False
    return _distance(actual, precise) <= 1.05 * _distance(expected, precise)


def reason_of(exc):
    """Short classification of an exception: 'missing: aten::X' or 'Type: first line'."""
    msg = str(exc).strip()
    first = msg.splitlines()[0] if msg else ""
    if isinstance(exc, NotImplementedError):
        m = _MISSING_RE.search(msg)
        if m and ("not implemented for the tpu device" in msg or "PrivateUse1" in msg):
            return "missing: " + m.group(1)
    if isinstance(exc, AssertionError) and ("not close" in first or "mismatch" in first):
        detail = [ln.strip() for ln in msg.splitlines()
                  if ln.strip().startswith(("Mismatched elements", "Greatest absolute",
                                            "The failure occurred", "shape/dtype"))]
        extra = "; ".join(detail)
        return "mismatch" + (": " + extra if extra else ": " + first)
    if isinstance(exc, AssertionError) and first:
        return "mismatch: " + first[:200]
    return f"{type(exc).__name__}: {first[:200]}"


# ------------------------------------------------------------- running --

def _call(op, sample_input, args, kwargs):
    return op(sample_input, *args, **kwargs)


def _float_tensors(tree):
    return [x for x in pytree.tree_leaves(tree)
            if isinstance(x, torch.Tensor) and x.is_floating_point()]


def _grads(out, sample, inputs):
    """Gradients of the sum of the floating outputs w.r.t. inputs (None where unused)."""
    out = sample.output_process_fn_grad(out)
    outs = [o for o in _float_tensors(out) if o.requires_grad]
    if not outs or not inputs:
        return None
    total = sum(o.sum() for o in outs)
    return torch.autograd.grad(total, inputs, allow_unused=True)


def run_sample(op, sample, dtype, check_backward):
    """Runs one sample on both devices. Returns (fwd, bwd), each None (skipped:
    the CPU reference raised, or no backward), True (pass) or a reason string."""
    random_values = is_random_op(op)
    tpu_tree = to_device((sample.input, sample.args, sample.kwargs), DEVICE)
    keep = _ARGS_ON_CPU.get(op.name)
    if keep:
        tpu_tree = (tpu_tree[0], tuple(a if i not in keep else sample.args[i]
                                       for i, a in enumerate(tpu_tree[1])), tpu_tree[2])
    # The CPU reference runs on fresh leaf copies too, made the same way: the
    # sample's own tensors may be views whose gradient flows to a hidden base.
    cpu_tree = to_device((sample.input, sample.args, sample.kwargs), "cpu")
    cpu_inputs = [x for x in _float_tensors(cpu_tree) if x.requires_grad] \
        if check_backward else []
    try:
        cpu_out = _call(op, cpu_tree[0], cpu_tree[1], cpu_tree[2])
    except Exception:
        return None, None
    try:
        tpu_out = _call(op, *tpu_tree[:1], tpu_tree[1], tpu_tree[2])
        actual, expected = to_cpu(tpu_out), to_cpu(cpu_out)
        try:
            compare(actual, expected, dtype, random_values)
        except AssertionError:
            if random_values or not (
                    ties_equivalent(op, sample, actual, expected, dtype) or
                    (dtype != torch.float32 and as_precise_as_cpu(op, cpu_tree, actual, expected))):
                raise
        fwd = True
    except Exception as e:  # noqa: BLE001 - every failure is a result
        fwd = reason_of(e)
    if not check_backward or not cpu_inputs:
        return fwd, None
    try:
        cpu_grads = _grads(cpu_out, sample, cpu_inputs)
    except Exception:
        return fwd, None
    if cpu_grads is None:
        return fwd, None
    if fwd is not True:
        return fwd, "forward failed: " + fwd
    try:
        tpu_inputs = [x for x in _float_tensors(tpu_tree) if x.requires_grad]
        tpu_grads = _grads(tpu_out, sample, tpu_inputs)
        if tpu_grads is None:
            raise AssertionError("mismatch: no differentiable tpu output")
        compare(to_cpu(list(tpu_grads)), list(cpu_grads), torch.float32, random_values)
        bwd = True
    except Exception as e:  # noqa: BLE001
        bwd = reason_of(e)
    return fwd, bwd


def _dtypes_for(op, bf16):
    supported = op.supported_dtypes("cpu")
    if torch.float32 in supported:
        dts = [torch.float32]
        if bf16 and torch.bfloat16 in supported:
            dts.append(torch.bfloat16)
        return dts
    for dt in (torch.int64, torch.bool):
        if dt in supported:
            return [dt]
    return []


def run_opinfo(op, bf16=False, budget=BUDGET_S, backward=True, reference=False):
    """Runs one OpInfo; returns a dict: name, fwd, bwd (True / reason / None), samples,
    budget_hit, seconds, dtypes."""
    t0 = time.perf_counter()
    res = {"name": op_full_name(op), "fwd": None, "bwd": None, "samples": 0,
           "budget_hit": False, "dtypes": [], "seconds": 0.0}
    dts = _dtypes_for(op, bf16)
    res["dtypes"] = [str(d).replace("torch.", "") for d in dts]
    if not dts:
        res["fwd"] = "skip: no float32/int64/bool support on CPU"
        return res
    want_bwd = backward and op.supports_autograd and torch.float32 in dts
    fwd_fail = bwd_fail = None
    fwd_ok = bwd_ok = 0
    for dt in dts:
        grad = want_bwd and dt == torch.float32
        torch.manual_seed(0)
        try:
            inputs = op.reference_inputs if reference else op.sample_inputs
            samples = inputs("cpu", dt, requires_grad=grad)
            it = iter(samples)
        except Exception as e:  # noqa: BLE001
            fwd_fail = fwd_fail or f"sample_inputs raised {reason_of(e)}"
            continue
        while True:
            if time.perf_counter() - t0 > budget:
                res["budget_hit"] = True
                break
            try:
                sample = next(it)
            except StopIteration:
                break
            except Exception as e:  # noqa: BLE001
                fwd_fail = fwd_fail or f"sample_inputs raised {reason_of(e)}"
                break
            res["samples"] += 1
            try:
                f, b = run_sample(op, sample, dt, grad)
            except Exception as e:  # noqa: BLE001 (copying the sample to tpu, ...)
                f, b = reason_of(e), None
            if f is True:
                fwd_ok += 1
            elif f is not None and fwd_fail is None:
                fwd_fail = f
            if b is True:
                bwd_ok += 1
            elif b is not None and bwd_fail is None:
                bwd_fail = b
            del sample
            if fwd_fail and (bwd_fail or not want_bwd):
                break  # the classification is settled: the first failure counts
        if res["budget_hit"] or (fwd_fail and (bwd_fail or not want_bwd)):
            break
    res["fwd"] = fwd_fail if fwd_fail else (True if fwd_ok else "skip: no sample ran")
    if want_bwd:
        res["bwd"] = bwd_fail if bwd_fail else (True if bwd_ok else None)
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


def format_result(res):
    def fmt(v):
        if v is True:
            return "PASS"
        if v is None:
            return "n/a"
        if isinstance(v, str) and v.startswith("skip"):
            return "SKIP " + v[len("skip: "):]
        return "FAIL " + v
    line = f"{res['name']}  fwd: {fmt(res['fwd'])}  bwd: {fmt(res['bwd'])}"
    if res["name"] in EXPECTED_FAILURES and any(
            isinstance(v, str) and not v.startswith("skip") for v in (res["fwd"], res["bwd"])):
        line += f"  [expected: {EXPECTED_FAILURES[res['name']]}]"
    if res.get("budget_hit"):
        line += f"  (budget: {res['samples']} samples)"
    if res.get("dtypes") and res["dtypes"] != ["float32"]:
        line += f"  [{','.join(res['dtypes'])}]"
    return line


def counted(res):
    """(ran forward, passed forward, ran backward, passed backward)."""
    f = res["fwd"]
    ran_f = not (f is None or (isinstance(f, str) and f.startswith("skip")))
    b = res["bwd"]
    ran_b = b is not None
    return ran_f, ran_f and f is True, ran_b, ran_b and b is True


def missing_ops(results):
    """aten op -> number of OpInfos it blocks (first failure, forward or backward)."""
    cnt = collections.Counter()
    for r in results:
        blocked = set()
        for v in (r["fwd"], r["bwd"]):
            if isinstance(v, str):
                m = re.search(r"missing: (aten::\S+)", v)
                if m:
                    blocked.add(m.group(1))
        cnt.update(blocked)
    return cnt


# --------------------------------------------------------------- worker --

def _worker_main(indices, bf16, budget, reference):
    torch.set_float32_matmul_precision("highest")
    ops = get_op_db()
    out = sys.stdout
    for i in indices:
        op = ops[i]
        out.write(json.dumps({"start": i}) + "\n")
        out.flush()
        try:
            res = run_opinfo(op, bf16=bf16, budget=budget, reference=reference)
        except BaseException as e:  # noqa: BLE001
            res = {"name": op_full_name(op), "fwd": "sweep error: " + reason_of(e),
                   "bwd": None, "samples": 0, "budget_hit": False, "dtypes": []}
            traceback.print_exc()
        res["index"] = i
        out.write(json.dumps(res) + "\n")
        out.flush()


class _Worker:
    def __init__(self, indices, args):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker",
               ",".join(map(str, indices)), "--budget", str(args.budget)]
        if args.bf16:
            cmd.append("--bf16")
        if args.reference_inputs:
            cmd.append("--reference-inputs")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL if not args.verbose else None,
                                     text=True, bufsize=1)
        self.buf = ""

    def readline(self, timeout):
        """A line of stdout, '' at EOF, None on timeout."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while "\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 65536).decode()
            if not chunk:
                return ""
            self.buf += chunk
        line, self.buf = self.buf.split("\n", 1)
        return line

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def run_with_workers(ops_idx, args, on_result):
    names = {i: op_full_name(get_op_db()[i]) for i in ops_idx}
    pending = list(ops_idx)
    while pending:
        chunk = pending[:args.ops_per_worker]
        w = _Worker(chunk, args)
        current = None
        done = set()
        while True:
            # startup (import torch + op_db) and each OpInfo get the hard timeout
            line = w.readline(args.hard_timeout + (60 if current is None else 0))
            if line is None or line == "":
                if current is None and not done and line == "":
                    # died before starting anything: blame the first op
                    current = chunk[0]
                if current is not None and current not in done:
                    w.kill()
                    why = "hang (> %ds)" % args.hard_timeout if line is None else \
                        "crash (worker exit code %s)" % w.proc.returncode
                    on_result({"name": names[current], "fwd": why, "bwd": None,
                               "samples": 0, "budget_hit": False, "dtypes": [],
                               "index": current})
                    done.add(current)
                w.kill()
                break
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "start" in msg:
                current = msg["start"]
                continue
            done.add(msg["index"])
            on_result(msg)
            current = None
            if len(done) == len(chunk):
                w.kill()
                break
        # what the worker did not finish (after a crash or hang) goes to the next one
        pending = [i for i in pending if i not in done]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", help="comma-separated OpInfo names (name or name.variant)")
    p.add_argument("--limit", type=int, help="run only the first N OpInfos")
    p.add_argument("--bf16", action="store_true", help="also run bfloat16 samples")
    p.add_argument("--reference-inputs", action="store_true",
                   help="use the OpInfos' reference_inputs (sample_inputs plus many more "
                        "cases; slower) instead of sample_inputs")
    p.add_argument("--budget", type=float, default=BUDGET_S,
                   help="seconds per OpInfo before its remaining samples are skipped")
    p.add_argument("--hard-timeout", type=float, default=120,
                   help="seconds after which an OpInfo counts as hung and its worker is killed")
    p.add_argument("--ops-per-worker", type=int, default=60)
    p.add_argument("--summary-missing", action="store_true",
                   help="print the missing aten ops with the number of OpInfos each blocks")
    p.add_argument("--json", help="write all results to this JSON file")
    p.add_argument("--in-process", action="store_true", help="no worker process")
    p.add_argument("--verbose", action="store_true", help="show the worker's stderr")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.worker is not None:
        _worker_main([int(i) for i in args.worker.split(",") if i], args.bf16, args.budget,
                     args.reference_inputs)
        return

    t0 = time.perf_counter()
    torch.set_float32_matmul_precision("highest")
    names = args.ops.split(",") if args.ops else None
    ops = select_ops(names, args.limit)
    index = {id(op): i for i, op in enumerate(get_op_db())}
    results = []

    def on_result(res):
        results.append(res)
        print(format_result(res), flush=True)

    if args.in_process:
        for op in ops:
            on_result(run_opinfo(op, bf16=args.bf16, budget=args.budget,
                                 reference=args.reference_inputs))
    else:
        run_with_workers([index[id(op)] for op in ops], args, on_result)

    elapsed = time.perf_counter() - t0
    n = f = m = g = 0
    for r in results:
        rf, pf, rb, pb = counted(r)
        n += rf
        f += pf
        m += rb
        g += pb
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"results": results, "seconds": elapsed}, fh, indent=1)
    if args.summary_missing:
        print("\nmissing aten ops (OpInfos blocked):")
        for name, c in missing_ops(results).most_common():
            print(f"{c:5d}  {name}")
    failed = {r["name"] for r in results
              if any(isinstance(v, str) and not v.startswith("skip") for v in (r["fwd"], r["bwd"]))}
    ran = {r["name"] for r in results}
    unexpected = sorted(failed - set(EXPECTED_FAILURES))
    stale = sorted(name for name in EXPECTED_FAILURES if name in ran and name not in failed)
    print(f"\nexpected failures: {len(failed & set(EXPECTED_FAILURES))} of {len(EXPECTED_FAILURES)} listed "
          f"(EXPECTED_FAILURES, each with its reason)")
    print(f"unexpected failures: {', '.join(unexpected) if unexpected else 'none'}")
    print(f"listed but passing: {', '.join(stale) if stale else 'none'}")
    print(f"{len(results)} OpInfos in {elapsed:.0f} s")
    print(f"opinfo: {f}/{n} forward, {g}/{m} backward")


if __name__ == "__main__":
    main()
