"""Module.to / .tpu() / .cpu() keep tied parameters tied (the same
Parameter object in every module), as on in-tree devices."""

import torch
from torch import nn


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight


def test_tied_weights_stay_tied_across_conversions():
    m = Tied()
    original = m.emb.weight
    m.to("tpu")
    assert m.head.weight is m.emb.weight is original and original.device.type == "tpu"
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    x = torch.tensor([1, 2, 3], device="tpu")
    m.head(m.emb(x)).sum().backward()
    opt.step()  # one parameter, one update: the tie holds in training
    m.cpu()
    assert m.head.weight is m.emb.weight and m.emb.weight.device.type == "cpu"
    m.tpu()
    assert m.head.weight is m.emb.weight and m.emb.weight.device.type == "tpu"
    m.to("cpu", torch.float64)
    assert m.head.weight is m.emb.weight and m.emb.weight.dtype == torch.float64
    assert not torch.__future__.get_swap_module_params_on_conversion()  # left as it was


def test_conversion_keeps_gradients_and_buffers():
    m = nn.BatchNorm1d(3)
    m(torch.randn(4, 3)).sum().backward()
    m.to("tpu")
    assert m.weight.grad.device.type == "tpu" and m.running_mean.device.type == "tpu"
    torch.testing.assert_close(m.weight.grad.cpu(), torch.zeros(3), atol=1e-5, rtol=0)
