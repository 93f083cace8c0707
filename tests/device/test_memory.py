"""Device memory: an allocation that cannot be met raises
torch.OutOfMemoryError with CUDA's figures, the device stays usable, and
torch.tpu.set_per_process_memory_fraction limits what the process may hold."""

import pytest
import torch

TPU = torch.device("tpu")


def test_huge_empty_raises_out_of_memory_and_device_stays_usable():
    with pytest.raises(torch.OutOfMemoryError) as e:
        torch.empty(1 << 42, device=TPU)
    msg = str(e.value)
    assert "tpu out of memory. Tried to allocate 16.00 TiB" in msg, msg
    assert "total capacity of" in msg and "is allocated by PyTorch" in msg, msg
    x = torch.randn(100, device=TPU)
    assert torch.equal((x * 2).cpu(), x.cpu() * 2)


def test_out_of_memory_from_an_op_names_it():
    x = torch.ones(1, device=TPU)
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate 4.00 TiB"):
        x.expand(1 << 20, 1 << 20).contiguous()  # 4 TiB of float32
    assert x.sum().item() == 1.0


def test_memory_fraction_limits_allocations():
    total = torch.tpu.get_device_properties().total_memory
    assert total > 0
    prev = torch.tpu.get_per_process_memory_fraction()
    try:
        held = torch.tpu.memory_allocated()
        torch.tpu.set_per_process_memory_fraction((held + (64 << 20)) / total)
        ok = torch.empty(8 << 20, dtype=torch.uint8, device=TPU)  # within the limit
        with pytest.raises(torch.OutOfMemoryError, match="memory fraction"):
            torch.empty(256 << 20, dtype=torch.uint8, device=TPU)
        del ok
    finally:
        torch.tpu.set_per_process_memory_fraction(prev)
    torch.empty(256 << 20, dtype=torch.uint8, device=TPU)  # allowed again
    free, tot = torch.tpu.mem_get_info()
    assert tot == total and 0 < free <= total


def test_memory_fraction_argument_checks():
    with pytest.raises(ValueError, match="Allowed range: 0~1"):
        torch.tpu.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError):
        torch.tpu.set_per_process_memory_fraction(1)
