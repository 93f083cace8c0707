"""pytest plugin used by benchmarks/upstream/run.py inside each child process.

It writes one JSON line per event to the file named by
``TORCH_TPU_UPSTREAM_LOG`` and flushes it at once, so that the parent still
knows which test was running when the child dies (a crash or a time-out):

    {"start": nodeid}
    {"id": nodeid, "outcome": "passed"|"failed"|"skipped", "error": first line}

Node ids listed (one per line) in ``TORCH_TPU_UPSTREAM_SKIP`` are deselected:
the tests a crashed child had finished, and the one it crashed in. With
``TORCH_TPU_UPSTREAM_ONLY`` only the listed node ids are kept (the CPU
control run of the failing tests). ``TORCH_TPU_UPSTREAM_PRECISION`` (default, high, highest) sets the f32
matmul precision of the tests' thread. ``TORCH_TPU_UPSTREAM_SAMPLE=N`` keeps the
tests whose node id hashes (CRC-32) to 0 modulo N: a fixed, spread-out
1-in-N sample of a file too large to run whole (not applied to an ONLY list).
"""

import json
import os
import zlib

import pytest

_LOG = None


def _write(record):
    _LOG.write(json.dumps(record) + "\n")
    _LOG.flush()


def _read_ids(var):
    path = os.environ.get(var)
    if not path:
        return None
    with open(path) as f:
        return {line.rstrip("\n") for line in f if line.strip()}


def pytest_configure(config):
    global _LOG
    _LOG = open(os.environ["TORCH_TPU_UPSTREAM_LOG"], "a", buffering=1)
    # The tests compare f32 matmuls with CPU's f32 results: run them at the
    # precision asked for (run.py --matmul-precision), on this (the tests')
    # thread, as torch.tpu.precision would.
    mode = os.environ.get("TORCH_TPU_UPSTREAM_PRECISION")
    if mode and os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") != "0":
        import torch_tpu
        from torch_tpu.tpu import Precision
        torch_tpu._C._set_precision_override(int(Precision[mode.upper()]))


def pytest_collection_modifyitems(session, config, items):
    skip = _read_ids("TORCH_TPU_UPSTREAM_SKIP") or set()
    only = _read_ids("TORCH_TPU_UPSTREAM_ONLY")
    sample = int(os.environ.get("TORCH_TPU_UPSTREAM_SAMPLE") or 1)
    keep, drop = [], []
    for item in items:
        if item.nodeid in skip or (only is not None and item.nodeid not in only) or (
                only is None and sample > 1 and zlib.crc32(item.nodeid.encode()) % sample):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    _write({"collected": len(keep)})


def pytest_runtest_logstart(nodeid, location):
    _write({"start": nodeid})


def _first_error_line(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        text = crash.message
    elif isinstance(report.longrepr, tuple):  # a skip: (path, line, reason)
        text = str(report.longrepr[2])
    else:
        text = str(report.longrepr or "")
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    # One record per test: the call's outcome, or setup's when setup did not
    # pass (a skip decorator or a failing fixture), or teardown's failure.
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed") or (
            report.when == "teardown" and report.outcome == "failed"):
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "skipped" if report.skipped else "failed"  # xfail / xpass(strict)
        record = {"id": report.nodeid, "outcome": outcome, "when": report.when}
        if outcome != "passed":
            record["error"] = _first_error_line(report)
        _write(record)
