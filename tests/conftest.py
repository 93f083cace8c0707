"""Shared fixtures for the torch_tpu test suite.

Every test gets fresh random inputs that are still reproducible: the global
seed (CPU and tpu generators) is derived from the test's node id, so a failing
test reruns with the same values, while different tests (and different
parametrizations) see different data.
"""

import zlib

import pytest
import torch

TPU = torch.device("tpu")


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
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(prev)


@pytest.fixture
def tpu():
    return TPU
