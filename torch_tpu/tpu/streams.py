"""Streams and events. One in-order stream per device: work is ordered by
data dependencies inside PJRT, and synchronizing waits for everything
submitted (``torch.cuda.streams``' API)."""

import contextlib
import time
from typing import Optional

import torch

from ._device import _Device, _index, synchronize

class Stream:
    def __init__(self, device: _Device = None, priority: int = 0):
        self.device = torch.device("tpu", _index(device))
        self.priority = priority

    def synchronize(self) -> None:
        synchronize()

    def query(self) -> bool:
        return True

    def wait_stream(self, stream: "Stream") -> None:
        pass

    def wait_event(self, event: "Event") -> None:
        pass

    def record_event(self, event: Optional["Event"] = None) -> "Event":
        event = event or Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and other.device == self.device

    def __hash__(self):
        return hash(("tpu-stream", self.device))


_default_stream = None


def default_stream(device: _Device = None) -> Stream:
    global _default_stream
    if _default_stream is None:
        _default_stream = Stream(device)
    return _default_stream


def current_stream(device: _Device = None) -> Stream:
    return default_stream(device)


@contextlib.contextmanager
def stream(s: Optional[Stream]):
    yield s


class Event:
    """Marks a point in the device's work; timing waits for the work."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        self.enable_timing = enable_timing
        self._time = None

    def record(self, stream: Optional[Stream] = None) -> None:
        if self.enable_timing:
            synchronize()
        self._time = time.perf_counter()

    def synchronize(self) -> None:
        synchronize()

    def query(self) -> bool:
        return True

    def wait(self, stream: Optional[Stream] = None) -> None:
        pass

    def elapsed_time(self, end_event: "Event") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Events were not created with enable_timing=True")
        if self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._time - self._time) * 1000.0
