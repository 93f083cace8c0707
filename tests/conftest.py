"""Shared fixtures for the torch_tpu test suite.

Every test gets fresh random inputs that are still reproducible: the global
seed (CPU and tpu generators) is derived from the test's node id, so a failing
test reruns with the same values, while different tests (and different
parametrizations) see different data.

Tests that check a fresh Python process (``@pytest.mark.subprocesses``) have
their processes started (at low priority) as soon as collection finishes, so
they run while the rest of the suite does; those tests run last, and the
``subprocess_results`` fixture waits for the processes.
"""

import os
import subprocess
import sys
import zlib

import pytest
import torch

import torch_tpu

# Test files import the helpers of benchmarks/ (the model and sweep
# definitions they share with the benchmarks) by module name.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))

def _seed_for(nodeid: str) -> int:
    return zlib.crc32(nodeid.encode("utf-8")) & 0x7FFFFFFF


@pytest.fixture(autouse=True)
def seed(request):
    """Seeds torch (which also seeds the tpu generator) per test; returns the seed."""
    s = _seed_for(request.node.nodeid)
    torch.manual_seed(s)
    torch.tpu.manual_seed(s)
    return s


@pytest.fixture
def highest_matmul_precision():
    """Runs the test at torch.set_float32_matmul_precision('highest'), restored after."""
    prev = torch.get_float32_matmul_precision()
    prev_follow = torch_tpu._C._follow_torch_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(prev)
        torch_tpu._C._set_follow_torch_precision(prev_follow)


# ----------------------------------------------------- background processes --

_PROCS = pytest.StashKey[dict]()


def pytest_addoption(parser):
    parser.addoption(
        "--all-models", action="store_true", default=False,
        help="tests/models/test_models.py: every model family, not only one per group "
             "(also TORCH_TPU_ALL_MODELS=1)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "subprocesses(**runs): each run is (python code, extra env); the processes start "
        "right after collection and the subprocess_results fixture returns their "
        "CompletedProcess objects by name")
    config.addinivalue_line(
        "markers",
        "strict_pass(reason): runs only in the pytest pass that starts in Strict Eager (run.sh "
        "runs the suite once per eager mode): the test starts its own processes or sets its "
        "modes itself, or checks something no eager mode changes")
    config.addinivalue_line(
        "markers",
        "libtpu: needs the libtpu wheel (pip install libtpu); skipped without it")
    config.addinivalue_line(
        "markers",
        "cuda_plugin: needs JAX's CUDA PJRT plugin wheel (pip install jax-cuda13-pjrt); skipped "
        "without it")


def _lower_priority():
    os.nice(19)  # leave the CPU to the test process; these only need to finish in time


def _start(code, env_extra):
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_lower_priority)


def pytest_collection_modifyitems(session, config, items):
    if torch_tpu.get_eager_mode() != torch_tpu.EagerMode.DEFER_NEVER:
        for item in items:
            marker = item.get_closest_marker("strict_pass")
            if marker is not None:
                item.add_marker(pytest.mark.skip(reason="the Strict pass only: " + marker.args[0]))
    # Tests that wait for background processes run last, giving them the
    # whole run to finish.
    items.sort(key=lambda item: item.get_closest_marker("subprocesses") is not None)


def pytest_collection_finish(session):
    for item in session.items:
        marker = item.get_closest_marker("subprocesses")
        if marker is not None:
            item.stash[_PROCS] = {name: _start(code, env)
                                  for name, (code, env) in marker.kwargs.items()}


def pytest_sessionfinish(session):
    for item in session.items:
        for proc in item.stash.get(_PROCS, {}).values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


@pytest.fixture
def subprocess_results(request):
    procs = request.node.stash.get(_PROCS, None)
    assert procs is not None, "test needs @pytest.mark.subprocesses(...)"
    results = {}
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"subprocess {name!r} timed out:\n{err}")
        results[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return results
