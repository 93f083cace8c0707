"""Lazy modules (nn.LazyLinear, nn.LazyConv*d, ...) moved to tpu before their
first call: the uninitialized parameters stay uninitialized until then, in
every eager mode and under torch.compile, and load_state_dict fills them."""

import pytest
import torch
from torch import nn
from torch.testing import assert_close

import torch_tpu

TPU = torch.device("tpu")

MODES = [torch_tpu.EagerMode.DEFER_NEVER, torch_tpu.EagerMode.DEFER_AND_FUSE,
         torch_tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING]

LAZY = {
    "LazyLinear": (lambda: nn.LazyLinear(5), (3, 4)),
    "LazyConv1d": (lambda: nn.LazyConv1d(4, 3), (2, 3, 9)),
    "LazyConv2d": (lambda: nn.LazyConv2d(4, 3, padding=1), (2, 3, 6, 6)),
    "LazyConv3d": (lambda: nn.LazyConv3d(2, 2), (1, 2, 4, 4, 4)),
    "LazyConvTranspose2d": (lambda: nn.LazyConvTranspose2d(3, 2, stride=2), (2, 4, 3, 3)),
    "LazyBatchNorm1d": (lambda: nn.LazyBatchNorm1d(), (4, 6)),
    "LazyBatchNorm2d": (lambda: nn.LazyBatchNorm2d(), (2, 3, 4, 4)),
    "LazyInstanceNorm2d": (lambda: nn.LazyInstanceNorm2d(affine=True), (2, 3, 4, 4)),
}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("name", sorted(LAZY))
def test_lazy_module_moved_before_first_call(name, mode, highest_matmul_precision):
    make, shape = LAZY[name]
    torch.manual_seed(0)
    cpu = make()
    tpu = make().to(TPU)  # (a lazy module cannot be deep-copied before its first call)
    assert tpu.has_uninitialized_params()
    x = torch.randn(*shape)
    with torch_tpu.eager_mode(mode):
        torch.manual_seed(1)
        got = tpu(x.to(TPU))
        torch.manual_seed(1)
        want = cpu(x)
        # Initialized on the device, then the weights copied from CPU so the
        # outputs can be compared.
        assert type(tpu) is type(cpu)  # both became the eager class (nn.Linear, ...)
        assert not any(isinstance(p, nn.parameter.UninitializedParameter)
                       for p in tpu.parameters())
        assert all(p.device.type == "tpu" for p in tpu.parameters())
        tpu.load_state_dict(cpu.state_dict())
        got = tpu(x.to(TPU))
        want = cpu(x)
        assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
        got.sum().backward()
        want.sum().backward()
        assert_close(tpu.weight.grad.cpu(), cpu.weight.grad, rtol=1e-4, atol=1e-4)


def test_load_state_dict_into_an_uninitialized_lazy_module():
    src = nn.Linear(4, 6)
    lazy, lazy_cpu = nn.LazyLinear(6).to(TPU), nn.LazyLinear(6)
    lazy.load_state_dict(src.state_dict())
    lazy_cpu.load_state_dict(src.state_dict())
    assert type(lazy.weight) is type(lazy_cpu.weight) is nn.Parameter
    assert lazy.weight.device.type == "tpu" and lazy.weight.shape == (6, 4)
    assert torch.equal(lazy.weight.cpu(), src.weight.detach())
    x = torch.randn(2, 4)
    assert_close(lazy(x.to(TPU)).cpu(), src(x), rtol=2e-2, atol=2e-2)


def test_lazy_module_under_compile(highest_matmul_precision):
    make = lambda: nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(2))
    cpu, tpu = make(), make().to(TPU)
    x = torch.randn(3, 5)
    tpu(x.to(TPU))  # initializes (lazy modules are initialized eagerly, as on CPU)
    cpu(x)
    tpu.load_state_dict(cpu.state_dict())
    compiled = torch.compile(tpu, backend="tpu")
    assert_close(compiled(x.to(TPU)).cpu(), cpu(x), rtol=1e-4, atol=1e-5)


def test_module_to_keeps_parameter_objects_as_on_cuda():
    # Parameters are converted in place (param.data = ...), so an optimizer
    # built before .to("tpu") still holds the model's parameters.
    model = nn.Linear(3, 2)
    before = list(model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.to(TPU)
    assert all(a is b for a, b in zip(before, model.parameters()))
    assert opt.param_groups[0]["params"][0] is model.weight
    assert torch._has_compatible_shallow_copy_type(torch.zeros(1), torch.zeros(1, device=TPU))
