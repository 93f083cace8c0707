"""torch.profiler on the tpu device: kernels from PJRT completion events
linked to their ATen ops, compile spans, memcpy events, flow arrows, the
trace files, schedules; profile_memory."""

import json
import os
import random

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

import torch_tpu
from torch_tpu import EagerMode

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _fresh_size():
    # A size no other test of this process has compiled (a compile shows up).
    return random.Random(os.urandom(8)).randrange(300, 3000)


def _events(path):
    with open(path) as f:
        return json.load(f)["traceEvents"]


def test_mm_has_device_time():
    a, b = torch.randn(64, 32, device="tpu"), torch.randn(32, 48, device="tpu")
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
        (a @ b).cpu()  # compiled before the profile
        with profile(activities=ACTIVITIES) as prof:
            c = a @ b
            out = c.cpu()
    # DEFAULT precision: one bf16 pass.
    torch.testing.assert_close(out, a.cpu() @ b.cpu(), rtol=2e-2, atol=1e-1)
    mm = [e for e in prof.key_averages() if e.key == "aten::mm"]
    assert mm and mm[0].self_device_time_total > 0
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1
               and e.name == "xla::aten::mm"]
    assert kernels and kernels[0].time_range.elapsed_us() > 0
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=10)
    assert "Self TPU" in table and "TPU total" in table


def test_chrome_trace_has_kernels_flows_compiles_and_copies(tmp_path):
    n = _fresh_size()
    x = torch.randn(n, device="tpu")
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
        with profile(activities=ACTIVITIES) as prof:
            y = (x * 3).cpu()
            z = torch.ones(n).to("tpu") + 1
            z.cpu()
    torch.testing.assert_close(y, x.cpu() * 3)
    path = str(tmp_path / "trace.json")
    prof.export_chrome_trace(path)
    events = _events(path)
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert kernels, "no kernel events"
    assert all(names.get(k["pid"]) == "tpu:0" for k in kernels)
    mul = [k for k in kernels if k["name"] == "xla::aten::mul"]
    assert mul and mul[0]["args"]["ops"] == "aten::mul"
    # Flow arrows: each kernel's flow id ends on the kernel, starting at the
    # tpu::execute span of the op that launched it.
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = [e for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"]
    assert ends and all(e["id"] in starts for e in ends)
    execute = [e for e in events if e.get("name") == "tpu::execute"]
    assert execute and all(e["cat"] == "privateuse1_runtime" for e in execute)
    compiles = [e for e in events if e.get("name") in ("tpu::compile", "tpu::load_executable")]
    assert any(c["args"]["program"] == "aten::mul" for c in compiles)
    c = compiles[0]["args"]
    assert c["cache"] in ("miss", "disk") and len(c["fingerprint"]) == 16 and c["seconds"] >= 0
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    to_device = [e for e in copies if "HtoD" in e["name"]]
    to_host = [e for e in copies if "DtoH" in e["name"]]
    assert to_device and to_host
    assert any(e["args"]["bytes"] == 4 * n for e in to_device)
    assert any(e["args"]["bytes"] == 4 * n for e in to_host)


def test_fused_program_is_one_kernel_listing_its_ops(tmp_path):
    x = torch.randn(33, 7, device="tpu")
    with torch_tpu.eager_mode(EagerMode.DEFER_AND_FUSE):
        with profile(activities=ACTIVITIES) as prof:
            y = (x * 2 + 1).relu().sum(dim=1)
            out = y.cpu()
    torch.testing.assert_close(out, (x.cpu() * 2 + 1).relu().sum(dim=1))
    fused = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1
             and e.name.startswith("xla::fused(")]
    assert len(fused) == 1, [e.name for e in prof.events()]
    # Its metadata (in the trace file) lists the ops it holds.
    path = str(tmp_path / "trace.json")
    prof.export_chrome_trace(path)
    kernel = [e for e in _events(path) if e.get("cat") == "kernel" and e["name"] == fused[0].name]
    ops = kernel[0]["args"]["ops"]
    for op in ("aten::mul", "aten::add", "aten::relu"):
        assert op in ops, ops
    assert kernel[0]["args"]["op count"] >= 4
    # Linked to the op that flushed it (the copy to host).
    flushing = [e for e in prof.key_averages() if e.key in ("aten::_to_copy", "aten::copy_",
                                                          "aten::_copy_from")]
    assert any(e.device_time_total > 0 for e in flushing)


def test_compiled_graph_is_one_kernel():
    lin = torch.nn.Linear(16, 8).to("tpu")
    f = torch.compile(lin, backend="tpu")
    x = torch.randn(4, 16, device="tpu")
    f(x)
    with profile(activities=ACTIVITIES) as prof:
        out = f(x).cpu()
    torch.testing.assert_close(out, lin.cpu()(x.cpu()), rtol=2e-2, atol=1e-1)
    graphs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1
              and e.name.startswith("xla::graph(")]
    assert len(graphs) == 1


def test_schedule_and_tensorboard_handler(tmp_path):
    x = torch.randn(8, 8, device="tpu")
    ready = []

    def handler(prof):
        ready.append(prof.step_num)
        tensorboard_trace_handler(str(tmp_path), worker_name="w")(prof)

    with profile(activities=ACTIVITIES, schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=handler) as prof:
        for _ in range(5):
            (x @ x).sum().item()
            prof.step()
    assert ready == [4]
    files = [f for f in os.listdir(tmp_path) if f.endswith(".pt.trace.json")]
    assert len(files) == 1 and files[0].startswith("w.")
    events = _events(os.path.join(tmp_path, files[0]))
    kernels = [e for e in events if e.get("cat") == "kernel"]
    steps = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    # Two active steps, each with a program that holds the matmul (one
    # program per op in Strict Eager, the step's ops fused in Fused Eager).
    assert len(steps) == 2
    assert len([k for k in kernels if "aten::mm" in k["args"]["ops"].split(", ")]) == 2


def test_profile_memory_records_tpu_allocations():
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        x = torch.empty(1024, 256, device="tpu")
        del x
    events = [e for e in prof.key_averages() if e.key == "aten::empty"]
    assert events and events[0].device_memory_usage == 1024 * 256 * 4
    assert events[0].cpu_memory_usage == 0


def test_cpu_only_profile_has_no_device_rows():
    x = torch.randn(8, device="tpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (x + 1).cpu()
    assert not [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert any(e.name == "aten::add" for e in prof.events())
