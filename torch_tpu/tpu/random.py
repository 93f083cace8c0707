"""Random numbers on tpu: the device generator's seed and state (``torch.cuda.random``'s API)."""

import torch

from .. import _C
from ._device import _Device, _index

def _generator():
    return _C._default_generator()


def _is_in_bad_fork() -> bool:
    # The PJRT client is not fork-safe, but it is created lazily; a forked
    # child that never used the device is fine.
    return False


def manual_seed(seed: int) -> None:
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    seed()


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: _Device = "tpu") -> torch.Tensor:
    _index(device)
    return _generator().get_state()


def set_rng_state(new_state: torch.Tensor, device: _Device = "tpu") -> None:
    _index(device)
    _generator().set_state(new_state)


def get_rng_state_all():
    return [get_rng_state()]


def set_rng_state_all(new_states) -> None:
    for s in new_states:
        set_rng_state(s)
