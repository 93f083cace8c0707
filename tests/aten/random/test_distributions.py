"""The random distributions built on uniform_ / normal_ (exponential,
cauchy, geometric, log_normal, normal with tensor parameters): shapes,
ranges and statistics."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- ctc_loss --

def test_random_distributions_shapes_and_ranges():
    x = torch.empty(1000, device=TPU)
    assert (x.exponential_(2.0).cpu() >= 0).all()
    assert (x.geometric_(0.3).cpu() >= 1).all()
    assert (x.log_normal_().cpu() > 0).all()
    assert torch.isfinite(x.cauchy_().cpu()).all()
    m = torch.normal(torch.zeros(3, 1, device=TPU), torch.ones(4, device=TPU))
    assert m.shape == (3, 4)
    assert abs(torch.normal(5.0, torch.full((4000,), 0.1, device=TPU)).mean().item() - 5.0) < 0.05


# ---------------------------------------------------------------- linalg --
