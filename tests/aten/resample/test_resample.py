"""Reflection/replication padding and nearest/linear upsampling on tpu against
CPU, forward and backward."""

import pytest
import torch
import torch.nn.functional as F

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- padding --

@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("shape,pad", [
    ((2, 3, 9), (2, 3)),
    ((3, 9), (1, 0)),
    ((2, 3, 6, 7), (1, 2, 3, 0)),
    ((3, 6, 7), (2, 2, 2, 2)),
    ((1, 2, 4, 5, 6), (1, 2, 0, 3, 2, 1)),
])
def test_pad(mode, shape, pad):
    compare_grad(lambda t: F.pad(t, pad, mode=mode), torch.randn(shape))


def test_pad_negative_and_bfloat16_and_modules():
    compare_grad(lambda t: torch.ops.aten.reflection_pad2d(t, [-1, 2, 1, -2]),
                 torch.randn(2, 5, 6))
    compare_grad(lambda t: F.pad(t, (2, 2, 1, 1), mode="reflect"),
                 torch.randn(2, 3, 5, 5).bfloat16(), atol=1e-2, rtol=1e-2)
    compare_grad(torch.nn.ReflectionPad2d(2), torch.randn(1, 2, 5, 5))
    compare_grad(torch.nn.ReplicationPad3d(1), torch.randn(1, 2, 3, 4, 5))


def test_pad_errors():
    x = torch.randn(1, 2, 3, 3, device=TPU)
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(x, (3, 3, 3, 3), mode="reflect")
    with pytest.raises(RuntimeError):
        torch.ops.aten.replication_pad2d(x, [1, 1])


# ------------------------------------------------------------- upsampling --

@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("size,kw", [
    ((5, 7), dict(scale_factor=2)),
    ((5, 7), dict(size=(8, 9))),
    ((6, 6), dict(size=(4, 3))),
    ((5, 7), dict(scale_factor=(1.7, 0.6))),
])
def test_upsample_nearest2d(mode, size, kw):
    compare_grad(lambda t: F.interpolate(t, mode=mode, **kw), torch.randn(2, 3, *size))


def test_upsample_nearest_1d_3d():
    for mode in ["nearest", "nearest-exact"]:
        compare_grad(lambda t: F.interpolate(t, scale_factor=2.5, mode=mode), torch.randn(2, 3, 7))
        compare_grad(lambda t: F.interpolate(t, size=(3, 5, 4), mode=mode),
                     torch.randn(1, 2, 4, 3, 5))
    xi = torch.randint(0, 100, (1, 2, 3, 4), dtype=torch.uint8)
    assert torch.equal(F.interpolate(xi.to(TPU), scale_factor=2).cpu(),
                       F.interpolate(xi, scale_factor=2))


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size,kw", [
    ((5, 7), dict(scale_factor=2)),
    ((5, 7), dict(size=(8, 13))),
    ((9, 6), dict(size=(4, 3))),
    ((5, 7), dict(scale_factor=(1.7, 0.6))),
    ((1, 4), dict(size=(3, 1))),
])
def test_upsample_bilinear2d(align_corners, size, kw):
    compare_grad(lambda t: F.interpolate(t, mode="bilinear", align_corners=align_corners, **kw),
                 torch.randn(2, 3, *size), atol=1e-5, rtol=1e-5)


def test_upsample_linear_trilinear_bfloat16():
    for ac in [False, True]:
        compare_grad(lambda t: F.interpolate(t, scale_factor=3, mode="linear", align_corners=ac),
                     torch.randn(2, 3, 6), atol=1e-5, rtol=1e-5)
        compare_grad(lambda t: F.interpolate(t, size=(3, 6, 5), mode="trilinear",
                                             align_corners=ac),
                     torch.randn(1, 2, 4, 3, 5), atol=1e-5, rtol=1e-5)
    compare_grad(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"),
                 torch.randn(2, 3, 5, 5).bfloat16(), atol=2e-2, rtol=2e-2)
    compare_grad(torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
                 torch.randn(1, 2, 4, 4), atol=1e-5, rtol=1e-5)


def test_upsample_errors():
    x = torch.randn(1, 2, 3, 3, device=TPU)
    with pytest.raises(RuntimeError):
        torch.ops.aten.upsample_nearest2d(x, [4])
    with pytest.raises(RuntimeError):
        torch.ops.aten.upsample_bilinear2d(torch.randn(2, 3, device=TPU), [4, 4], False)
    with pytest.raises(RuntimeError, match="expected input_size"):
        torch.ops.aten.upsample_nearest1d(x, [4])


# ------------------------------------------------------------ grid_sample --

@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(mode, padding_mode, align_corners):
    x = torch.randn(2, 3, 5, 7)
    grid = torch.rand(2, 4, 6, 2) * 2.6 - 1.3  # some points outside [-1, 1]
    compare_grad(lambda t, g: F.grid_sample(t, g, mode=mode, padding_mode=padding_mode,
                                            align_corners=align_corners),
                 x, grid, atol=1e-5, rtol=1e-5)


def test_grid_sample_affine_grid_and_errors(highest_matmul_precision):
    theta = torch.tensor([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]]]).repeat(2, 1, 1)
    x = torch.randn(2, 3, 8, 8)

    def warp(t, th):
        return F.grid_sample(t, F.affine_grid(th, (2, 3, 6, 5), align_corners=False),
                             align_corners=False)
    compare_grad(warp, x, theta, atol=1e-4, rtol=1e-4)
    xt = torch.randn(1, 2, 4, 4, device=TPU)
    with pytest.raises(RuntimeError, match="bicubic"):
        F.grid_sample(xt, torch.zeros(1, 2, 2, 2, device=TPU), mode="bicubic", align_corners=False)
    with pytest.raises(RuntimeError, match="same batch size"):
        F.grid_sample(xt, torch.zeros(2, 2, 2, 2, device=TPU), align_corners=False)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size,kw", [
    ((5, 7), dict(scale_factor=2)),
    ((6, 5), dict(size=(9, 3))),
    ((5, 7), dict(scale_factor=(1.7, 0.6))),
])
def test_upsample_bicubic2d(align_corners, size, kw):
    compare_grad(lambda t: F.interpolate(t, mode="bicubic", align_corners=align_corners, **kw),
                 torch.randn(2, 3, *size), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_3d(mode, padding_mode):
    x = torch.randn(2, 2, 4, 5, 3)
    grid = torch.rand(2, 3, 2, 4, 3) * 2.6 - 1.3
    for ac in [False, True]:
        compare_grad(lambda t, g: F.grid_sample(t, g, mode=mode, padding_mode=padding_mode,
                                                align_corners=ac),
                     x, grid, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(7, 9), (32, 20), (50, 80)])
def test_antialias_interpolate_matches_cpu(mode, align_corners, size):
    x = torch.randn(2, 3, 40, 37, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    kw = dict(size=size, mode=mode, antialias=True, align_corners=align_corners)
    a, b = F.interpolate(x, **kw), F.interpolate(xt, **kw)
    torch.testing.assert_close(b.cpu(), a, rtol=1e-5, atol=2e-5)
    g = torch.randn_like(a)
    a.backward(g)
    b.backward(g.to("tpu"))
    torch.testing.assert_close(xt.grad.cpu(), x.grad, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("antialias", [False, True])
def test_uint8_interpolate_rounds_and_saturates_each_pass(mode, antialias):
    # CPU's uint8 kernels round each separable pass to nearest and clip it
    # to [0, 255] (they quantize their weights, hence atol 2)
    u = torch.randint(0, 256, (1, 3, 40, 37), dtype=torch.uint8)
    for size in ((32, 20), (50, 80)):
        kw = dict(size=size, mode=mode, antialias=antialias, align_corners=False)
        want = F.interpolate(u, **kw)
        got = F.interpolate(u.to("tpu"), **kw).cpu()
        assert got.dtype == torch.uint8
        assert (got.int() - want.int()).abs().max() <= 2


def test_interpolate_keeps_channels_last():
    x = torch.randn(2, 3, 16, 16).contiguous(memory_format=torch.channels_last)
    y = F.interpolate(x.to("tpu"), scale_factor=2, mode="bilinear")
    assert y.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(y.cpu(), F.interpolate(x, scale_factor=2, mode="bilinear"))


def test_pad_rank_checks_as_cpu():
    with pytest.raises(RuntimeError, match="Expected 2D or 3D .batch mode. tensor"):
        torch.ops.aten.reflection_pad1d(torch.randn(3, 3, 10, 10, device="tpu"), (2, 2))
    with pytest.raises(RuntimeError, match="Expected 3D or 4D .batch mode. tensor"):
        torch.ops.aten.replication_pad2d(torch.randn(3, 3, 10, 10, 10, device="tpu"), (2, 2, 2, 2))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.bool])
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_interpolate_refuses_the_dtypes_cpu_refuses(dtype, mode):
    x = torch.ones(1, 2, 8, 8, dtype=dtype, device="tpu")
    with pytest.raises(RuntimeError, match="not implemented for"):
        F.interpolate(x, (4, 4), mode=mode)
