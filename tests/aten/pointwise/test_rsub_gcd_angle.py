"""rsub, nansum, addbmm, angle, gcd/lcm, frexp, mode and conj_physical on tpu
against CPU."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from _compare import compare_grad

TPU = torch.device("tpu")


# ---------------------------------------------------------------- ctc_loss --

def test_rsub_nansum_addbmm_angle(highest_matmul_precision):
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    compare_grad(lambda a, b: torch.rsub(a, b, alpha=2), x, y)
    xn = x.clone()
    xn[0, 1] = float("nan")
    compare_grad(lambda a: torch.nansum(a, 1), xn)
    compare_grad(lambda a: torch.nanmean(a), xn)
    m, b1, b2 = torch.randn(3, 4), torch.randn(5, 3, 2), torch.randn(5, 2, 4)
    compare_grad(lambda a, b, c: torch.addbmm(a, b, c, beta=0.5, alpha=2), m, b1, b2, atol=1e-4,
                 rtol=1e-4)
    compare_grad(lambda a: torch.angle(a), torch.tensor([-1.0, 0.0, 2.0, float("nan")]),
                 equal_nan=True)
    out = torch.empty(0, device=TPU)
    torch.amax(x.to(TPU), 1, out=out)
    assert_close(out.cpu(), x.amax(1))


def test_gcd_lcm_frexp():
    a = torch.randint(-50, 50, (6, 7))
    b = torch.randint(-50, 50, (7,))
    assert_close(torch.gcd(a.to(TPU), b.to(TPU)).cpu(), torch.gcd(a, b))
    assert_close(torch.lcm(a.to(TPU), b.to(TPU)).cpu(), torch.lcm(a, b))
    x = torch.cat([torch.randn(20) * 1e3, torch.tensor([0.0, -0.0, 3e-38, -3.0, 0.5, 1.0])])  # no subnormals: XLA flushes them
    mc, ec = torch.frexp(x)
    mt, et = torch.frexp(x.to(TPU))
    assert et.dtype == torch.int32
    assert_close(mt.cpu(), mc)
    assert_close(et.cpu(), ec)


def test_mode_and_conj_physical():
    x = torch.randint(0, 4, (5, 9)).float()
    for dim, keepdim in [(1, False), (0, True)]:
        vc, ic = torch.mode(x, dim, keepdim)
        vt, it = torch.mode(x.to(TPU), dim, keepdim)
        assert_close(vt.cpu(), vc)
        # the index points at an occurrence of the mode
        assert_close(torch.take_along_dim(x, it.cpu() if keepdim else it.cpu().unsqueeze(dim), dim),
                     vc if keepdim else vc.unsqueeze(dim))
    compare_grad(lambda a: torch.mode(a, 1)[0], torch.randn(4, 6))
    c = torch.randn(3, 4, dtype=torch.complex64)
    out = torch.empty(0, dtype=torch.complex64, device=TPU)
    torch.conj_physical(c.to(TPU), out=out)
    assert_close(out.cpu(), c.conj_physical())
