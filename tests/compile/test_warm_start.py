"""Warm starts of torch.compile(backend="tpu"): a second process loads the
graphs AOTAutograd produced from PyTorch's AOTAutograd cache (and their
programs from the persistent XLA cache) instead of tracing and compiling
them again. A hit gives the same values bit for bit; whatever changes the
graph or what the backend makes of it misses."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.strict_pass("warm starts are tested in processes of their own")

SCRIPT = r"""
import json, os, sys, torch, torch_tpu
import torch.nn.functional as F
from torch._dynamo.utils import counters

smoothing = float(os.environ.get("SMOOTHING", "0"))
upper = int(os.environ.get("UPPER", "0"))
torch.manual_seed(0)
torch.set_float32_matmul_precision("highest")
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 5))
x, y = torch.randn(12, 16), torch.randint(0, 5, (12,))

def train(device, compiled):
    m = __import__("copy").deepcopy(model).to(device)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    xs, ys = x.to(device), y.to(device)

    def step(xs, ys):
        # A tensor the traced code makes on the device: a constant of the
        # graph, which the cache stores through the host.
        scale = torch.tensor([0.5, 1.0, 1.5, 1.0, 2.0], device=xs.device)
        loss = F.cross_entropy(m(xs) * scale, ys, label_smoothing=smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    run = torch.compile(step, backend="tpu") if compiled else step
    losses = []
    for i in range(3):
        a, b = xs, ys
        if upper:  # rows vary within bounds: one program per graph
            a, b = xs[: 10 + i].clone(), ys[: 10 + i].clone()
            torch_tpu.mark_dynamic(a, 0, 2, upper)
            torch_tpu.mark_dynamic(b, 0, 2, upper)
        losses.append(run(a, b).item())
    return losses, [p.detach().cpu() for p in m.parameters()]

with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
    got, params = train("tpu", True)
want, ref = train("cpu", False)
for g, w in zip(got, want):
    assert abs(g - w) <= 1e-4 * max(1.0, abs(w)), (got, want)
for p, r in zip(params, ref):
    torch.testing.assert_close(p, r, rtol=1e-4, atol=1e-5)
aot = counters["aot_autograd"]
print(json.dumps({"losses": got, "hits": aot["autograd_cache_hit"],
                  "misses": aot["autograd_cache_miss"], "saved": aot["autograd_cache_saved"],
                  "loads": torch_tpu._dynamo.stats["cache_loads"],
                  "compiles": torch.tpu._get_cache_stats()["compiles"]}))
"""


VIEWS = r"""
import json, torch, torch_tpu
import torch_tpu._dynamo.output_code as oc
from torch._dynamo.utils import counters

left_out = []
keep = oc._reduce_view_meta_sequence

def spy(seq):
    reduced = keep(seq)
    left_out.append(reduced == (type(None), ()))
    return reduced

oc._reduce_view_meta_sequence = spy
torch.set_float32_matmul_precision("highest")

def f(x, w):
    y = x @ w          # a 3-d matmul: a 2-d product, then an _unsafe_view of it
    return y, y[:, 0]  # an output that is a view of another output

torch.manual_seed(0)
x, w = torch.randn(2, 16, 8), torch.randn(8, 8)
xt = x.to("tpu").requires_grad_()
out = torch.compile(f, backend="tpu")(xt, w.to("tpu"))
xc = x.clone().requires_grad_()
ref = f(xc, w)
for o, r in zip(out, ref):
    torch.testing.assert_close(o.detach().cpu(), r.detach(), rtol=1e-5, atol=1e-5)
(out[0].sum() + out[1].square().sum()).backward()
(ref[0].sum() + ref[1].square().sum()).backward()
torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-5)
aot = counters["aot_autograd"]
print(json.dumps({"left_out": left_out, "hits": aot["autograd_cache_hit"],
                  "saved": aot["autograd_cache_saved"]}))
"""


def run(tmp_path, script=SCRIPT, **env):
    e = dict(os.environ, TORCH_TPU_COMPILATION_CACHE_DIR=str(tmp_path / "xla"),
             TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "torch"))
    for name in ("TORCHINDUCTOR_AUTOGRAD_CACHE", "TORCHINDUCTOR_FX_GRAPH_CACHE"):
        e.pop(name, None)
    e.update({k: str(v) for k, v in env.items()})
    p = subprocess.run([sys.executable, "-c", script], env=e, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])


def test_second_process_loads_the_graphs_and_gets_the_same_values(tmp_path):
    cold = run(tmp_path)
    # The step's forward/backward graph and the optimizer's graph.
    assert cold["hits"] == 0 and cold["misses"] >= 2 and cold["saved"] == cold["misses"], cold
    assert cold["compiles"] > 0
    warm = run(tmp_path)
    assert warm["misses"] == 0 and warm["hits"] == cold["misses"], warm
    assert warm["loads"] >= warm["hits"] and warm["compiles"] == 0, warm
    assert warm["losses"] == cold["losses"]  # bit for bit

    # A one-line change to the step: its graph misses, the optimizer's hits.
    edited = run(tmp_path, SMOOTHING=0.1)
    assert edited["misses"] >= 1 and edited["hits"] >= 1, edited
    assert edited["losses"] != cold["losses"]


def test_other_dynamic_bounds_are_another_entry(tmp_path):
    first = run(tmp_path, UPPER=16)
    assert first["misses"] >= 2 and first["saved"] == first["misses"], first
    again = run(tmp_path, UPPER=16)
    assert again["misses"] == 0 and again["hits"] == first["misses"], again
    # The same step with wider bounds pads to another size: its graph is
    # never the entry made for [2, 16] (the optimizer's graph, without
    # dynamic sizes, is).
    wider = run(tmp_path, UPPER=32)
    assert wider["misses"] >= 1 and wider["hits"] < first["misses"], wider


def test_an_output_viewing_another_is_saved_and_loaded(tmp_path):
    # PyTorch 2.13 keeps the sizes of an `_unsafe_view` in AOTAutograd's
    # view-replay metadata without owning them; pickled, they crashed the
    # process at random (ProphetNet under torch.compile). The entry leaves
    # that sequence out, and the output is regenerated from its base.
    cold = run(tmp_path, VIEWS)
    assert cold["saved"] >= 1 and True in cold["left_out"], cold
    warm = run(tmp_path, VIEWS)
    assert warm["hits"] == cold["saved"] and warm["left_out"] == [], warm
