"""TPU matmul precision: DEFAULT / HIGH / HIGHEST numerics on any plugin.

Error metric: for C = A @ B against a float64 reference,
    delta = mean(|C - C64| / (|A| @ |B|)) * sqrt(K).
The error of a K-term dot product with independently rounded terms grows as
sqrt(K) times the per-product error, while |A| @ |B| grows as K, so delta
estimates the relative error of one product:
- DEFAULT rounds both f32 operands to bf16 (8 significant bits, unit
  roundoff 2^-8); a product carries ~2^-8 relative error  -> 2^-10 .. 2^-7.
- HIGH (hi*hi + hi*lo + lo*hi) drops lo*lo, ~2^-16 relative -> 2^-19 .. 2^-15.
- HIGHEST is f32-accurate: only f32 rounding and accumulation (2^-24 per
  operation, growing with K)                               -> below 2^-18.
DEFAULT must also differ measurably from plain f32, so the test fails if the
bf16 emulation is missing.
"""

import math
import warnings

import subprocess
import sys

import pytest

import torch
import torch.nn.functional as F
import torch_tpu
from torch_tpu import Precision

TPU = torch.device("tpu")
BANDS = {
    Precision.DEFAULT: (2.0 ** -10, 2.0 ** -7),
    Precision.HIGH: (2.0 ** -19, 2.0 ** -15),
    Precision.HIGHEST: (0.0, 2.0 ** -18),
}


def delta(c, a, b, k):
    ref = a.double() @ b.double()
    scale = a.abs().double() @ b.abs().double()
    return ((c.double() - ref).abs() / scale).mean().item() * math.sqrt(k)


@pytest.mark.parametrize("k", [64, 1024, 4096])
def test_mm_error_bands(k):
    a, b = torch.randn(48, k), torch.randn(k, 40)
    got = {}
    for p in Precision:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch_tpu.precision(p):
                got[p] = delta((a.to(TPU) @ b.to(TPU)).cpu(), a, b, k)
        lo, hi = BANDS[p]
        assert lo <= got[p] <= hi, f"{p.name} at K={k}: delta {got[p]:.3e} not in [{lo:.1e}, {hi:.1e}]"
    assert got[Precision.DEFAULT] > 100 * got[Precision.HIGH]
    f32 = delta(a @ b, a, b, k)
    assert got[Precision.DEFAULT] > 100 * f32  # not plain f32


@pytest.mark.parametrize("k", [256, 4096])
def test_error_bands_under_compile(k):
    # The same bands for a compiled graph: matmul, linear and conv inside
    # one captured program follow the mode in force when it is called.
    torch._dynamo.reset()
    a, b = torch.randn(32, k), torch.randn(k, 24)
    x, cw = torch.randn(1, k // 16, 6, 6), torch.randn(3, k // 16, 4, 4)
    f = torch.compile(lambda a, b, x, w: (a @ b, F.linear(a, b.t()), F.conv2d(x, w)), backend="tpu")
    for p in Precision:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch_tpu.precision(p):
                mm, lin, conv = (r.cpu() for r in f(a.to(TPU), b.to(TPU), x.to(TPU), cw.to(TPU)))
        lo, hi = BANDS[p]
        for got in (mm, lin):
            d = delta(got, a, b, k)
            assert lo <= d <= hi, f"{p.name} at K={k}: delta {d:.3e} not in [{lo:.1e}, {hi:.1e}]"
        ref = F.conv2d(x.double(), cw.double())
        err = ((conv.double() - ref).abs().max() / ref.abs().max()).item()
        assert (1e-5 < err < 2e-2) if p == Precision.DEFAULT else err < 1e-5, (p.name, err)
    torch._dynamo.reset()


def test_bmm_linear_einsum_conv_follow_the_mode():
    a, b = torch.randn(3, 16, 256), torch.randn(3, 256, 8)
    w = torch.randn(8, 256)
    x, cw = torch.randn(2, 64, 6, 6), torch.randn(4, 64, 3, 3)
    for p in (Precision.DEFAULT, Precision.HIGHEST):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch_tpu.precision(p):
                r_bmm = torch.bmm(a.to(TPU), b.to(TPU)).cpu()
                r_lin = F.linear(a.to(TPU), w.to(TPU)).cpu()
                r_ein = torch.einsum("bik,bkj->bij", a.to(TPU), b.to(TPU)).cpu()
                r_conv = F.conv2d(x.to(TPU), cw.to(TPU)).cpu()
        refs = (torch.bmm(a.double(), b.double()), F.linear(a.double(), w.double()),
                torch.bmm(a.double(), b.double()), F.conv2d(x.double(), cw.double()))
        for got, ref in zip((r_bmm, r_lin, r_ein, r_conv), refs):
            err = ((got.double() - ref).abs().max() / ref.abs().max()).item()
            if p == Precision.DEFAULT:
                assert 1e-5 < err < 2e-2, err   # bf16-rounded operands, visibly
            else:
                assert err < 1e-5, err


def test_bf16_inputs_are_native_and_elementwise_stays_f32():
    a, b = torch.randn(32, 64).bfloat16(), torch.randn(64, 16).bfloat16()
    with torch_tpu.precision(Precision.DEFAULT):
        got = (a.to(TPU) @ b.to(TPU)).cpu()
        x = torch.randn(1000)
        s = torch.softmax(x.to(TPU), 0).cpu()
    torch.testing.assert_close(got.float(), (a.float() @ b.float()).bfloat16().float(),
                               rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(s, torch.softmax(x, 0))  # f32 tolerance: no bf16 rounding


def test_default_is_medium_until_the_program_chooses():
    # A fresh process: tpu matmuls take one bf16 pass although torch's own
    # default is "highest"; torch.set_float32_matmul_precision takes over.
    code = (
        "import torch, torch_tpu\n"
        "assert torch.get_float32_matmul_precision() == 'highest'\n"
        "assert torch_tpu._C._current_precision() == 0\n"
        "torch.set_float32_matmul_precision('highest')\n"
        "assert torch_tpu._C._current_precision() == 2\n"
        "torch.set_float32_matmul_precision('medium')\n"
        "assert torch_tpu._C._current_precision() == 0\n"
        "print('ok')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "ok" in p.stdout, p.stderr


def test_mode_mapping_and_override_is_thread_local():
    prev = torch.get_float32_matmul_precision()
    prev_follow = torch_tpu._C._follow_torch_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        assert torch_tpu._C._current_precision() == Precision.DEFAULT
        torch.set_float32_matmul_precision("highest")
        assert torch_tpu._C._current_precision() == Precision.HIGHEST
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch_tpu.precision(Precision.HIGH):
                assert torch_tpu._C._current_precision() == Precision.HIGH
                import threading
                seen = []
                t = threading.Thread(target=lambda: seen.append(torch_tpu._C._current_precision()))
                t.start()
                t.join()
                assert seen == [Precision.HIGHEST]  # the override is this thread's only
        assert torch_tpu._C._current_precision() == Precision.HIGHEST
    finally:
        torch.set_float32_matmul_precision(prev)
        torch_tpu._C._set_follow_torch_precision(prev_follow)


def test_explicit_slow_precision_warns_once(monkeypatch):
    from torch_tpu.tpu import _precision
    monkeypatch.setattr(_precision, "_warned_slow_precision", False)
    with pytest.warns(UserWarning, match="bf16 passes"):
        with torch_tpu.precision(Precision.HIGHEST):
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch_tpu.precision(Precision.HIGH):
            pass


def test_precision_is_part_of_the_cache_key():
    a, b = torch.randn(8, 8).to(TPU), torch.randn(8, 8).to(TPU)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch_tpu.precision(Precision.HIGHEST):
            hi = (a @ b).cpu()
        with torch_tpu.precision(Precision.DEFAULT):
            lo = (a @ b).cpu()
    assert not torch.equal(hi, lo)
