"""torch_tpu.metrics, the compile logs, the memory tools of torch.tpu.memory
and `python -m torch_tpu.info`."""

import logging
import os
import pickle
import random
import subprocess
import sys

import torch

import torch_tpu
import torch_tpu.metrics as tm
from torch_tpu import EagerMode


def _fresh_size():
    return random.Random(os.urandom(8)).randrange(300, 3000)


def test_metrics_count_a_recompile_and_a_host_sync():
    n = _fresh_size()
    a = torch.randn(n, device="tpu")
    b = torch.randn(n + 1, device="tpu")
    tm.reset()
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
        x = a * 0.5
        y = b * 0.5  # the same op on a new shape: compiled again
        value = y.sum().item()  # a host sync, from this line
    assert abs(value - (b.cpu() * 0.5).sum().item()) < 1e-3
    torch.testing.assert_close(x.cpu(), a.cpu() * 0.5)
    m = tm.metrics()
    assert dict(m["recompiles"]).get("new shape", 0) >= 1
    assert ("new shape", "aten::mul") in m["recent_recompiles"]
    assert m["host_syncs"] >= 2  # .item() and .cpu()
    sites = dict(m["host_sync_sites"])
    assert any(os.path.basename(__file__) in site for site in sites), sites
    assert m["programs_executed"] >= 3
    assert m["d2h_copies"] >= 2 and m["d2h_bytes"] >= 4 * n + 4
    assert m["memory_hits"] + m["disk_hits"] + m["compiles"] >= 3
    text = tm.report()
    assert "recompiles" in text and "new shape" in text and "host syncs" in text
    assert "to look at" in text
    tm.reset()
    assert tm.metrics()["host_syncs"] == 0


def test_metrics_name_a_dtype_change():
    n = _fresh_size()
    tm.reset()
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
        torch.ones(n, device="tpu").neg()
        torch.ones(n, device="tpu", dtype=torch.float64).neg()
        torch_tpu.synchronize()
    assert ("new dtype", "aten::neg") in tm.metrics()["recent_recompiles"]


def test_metrics_name_a_precision_change():
    n = _fresh_size() // 10
    a = torch.randn(n, 8, device="tpu")
    b = torch.randn(8, 5, device="tpu")
    tm.reset()
    with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
        with torch_tpu.precision(torch_tpu.Precision.DEFAULT):
            lo = (a @ b).cpu()
        with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
            hi = (a @ b).cpu()
    torch.testing.assert_close(hi, a.cpu() @ b.cpu())
    torch.testing.assert_close(lo, hi, rtol=2e-2, atol=1e-1)
    assert ("new precision", "aten::mm") in tm.metrics()["recent_recompiles"]


def test_metrics_count_cpu_fallbacks():
    a = torch.randn(5, 5)
    a = a + a.mT
    x = a.to("tpu")
    tm.reset()
    with torch_tpu.cpu_fallback_mode(True):
        ld, _ = torch.linalg.ldl_factor(x)  # no tpu lowering: runs on the CPU
        torch.linalg.ldl_factor(x)
    torch.testing.assert_close(ld.cpu(), torch.linalg.ldl_factor(a)[0])
    m = tm.metrics()
    assert dict(m["cpu_fallbacks"]).get("aten::linalg_ldl_factor_ex.out") == 2
    assert "aten::linalg_ldl_factor_ex" in tm.report()


def test_recompile_log_names_the_cause_and_the_line(caplog):
    n = _fresh_size()
    torch_tpu._logging.set_logs(recompiles=True)
    try:
        with caplog.at_level(logging.INFO, logger="torch_tpu"):
            logging.getLogger("torch_tpu").addHandler(caplog.handler)
            with torch_tpu.eager_mode(EagerMode.DEFER_NEVER):
                torch.full((n,), 2.0, device="tpu").exp()
                torch.full((n + 3,), 2.0, device="tpu").exp()
                torch_tpu.synchronize()
    finally:
        logging.getLogger("torch_tpu").removeHandler(caplog.handler)
        torch_tpu._logging.set_logs()
    msgs = [r.getMessage() for r in caplog.records if r.name == "torch_tpu.recompiles"]
    assert any("aten::exp" in m and "new shape" in m and os.path.basename(__file__) in m
               for m in msgs), msgs


def _allocate_for_the_snapshot():
    return torch.empty(4096, 17, device="tpu")


def test_memory_snapshot_holds_the_allocating_stack(tmp_path):
    torch.tpu.memory._record_memory_history(stacks="python")
    try:
        t = _allocate_for_the_snapshot()
        addr = t.untyped_storage().data_ptr()
        snap = torch.tpu.memory._snapshot()
        path = str(tmp_path / "snap.pickle")
        torch.tpu.memory._dump_snapshot(path)
    finally:
        torch.tpu.memory._record_memory_history(enabled=None)
    seg = [s for s in snap["segments"] if s["address"] == addr]
    assert len(seg) == 1 and seg[0]["total_size"] == 4096 * 17 * 4
    block = seg[0]["blocks"][0]
    assert block["state"] == "active_allocated" and block["size"] == 4096 * 17 * 4
    names = [f["name"] for f in block["frames"]]
    assert "_allocate_for_the_snapshot" in names, names
    assert any(f["filename"].endswith("test_metrics.py") for f in block["frames"])
    trace = snap["device_traces"][0]
    assert any(e["action"] == "alloc" and e["addr"] == addr for e in trace)
    with open(path, "rb") as f:
        loaded = pickle.load(f)
    assert any(s["address"] == addr for s in loaded["segments"])
    del t
    # The visualizer's own reader accepts it.
    from torch.cuda import _memory_viz
    assert "4096" in _memory_viz.segsum(loaded) or _memory_viz.segsum(loaded)


def test_memory_stats_summary_and_peak():
    torch.tpu.synchronize()
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    x = torch.randn(1000, 100, device="tpu")
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() >= base + 400_000
    assert torch.tpu.max_memory_allocated() >= base + 400_000
    stats = torch.tpu.memory_stats()
    for key in ("allocated_bytes.all.current", "reserved_bytes.all.peak", "active_bytes.all.current",
                "allocation.all.current"):
        assert key in stats
    summary = torch.tpu.memory_summary()
    assert "Allocated memory" in summary and "Cur Usage" in summary and "Peak Usage" in summary
    del x
    torch.tpu.synchronize()
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() < base + 400_000


def test_info_command_prints_plugin_and_devices():
    r = subprocess.run([sys.executable, "-m", "torch_tpu.info"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "PJRT plugin" in r.stdout and "PJRT C API" in r.stdout and "tpu:0" in r.stdout
    assert "compilation cache" in r.stdout and "eager mode" in r.stdout


def test_info_command_fails_with_the_fix_when_no_device():
    env = dict(os.environ, TORCH_TPU_PLUGIN_PATH="/nonexistent/libnothing.so")
    r = subprocess.run([sys.executable, "-m", "torch_tpu.info"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "unusable" in r.stdout and "TORCH_TPU_PLUGIN_PATH" in r.stderr
