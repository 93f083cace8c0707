"""An attention block's F.scaled_dot_product_attention (causal, heads split
from one [batch, seq, 3*d] projection as GPT layers do): PyTorch CPU eager,
tpu through PyTorch's math path (bmm + softmax ops) and tpu through the
fused SDPA op (one program each way), in Strict Eager at HIGHEST, measured
in one run. "fwd+bwd" includes the backward of the split and the head
transposes; "bwd op" is the attention backward program alone.
Usage: python benchmarks/attention.py [--batch 8] [--seq 128] [--heads 4] [--dim 256]
"""

import argparse
import contextlib
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_tpu


def median_ms(fn, device, reps):
    def sync():
        if device == "tpu":
            torch_tpu.synchronize()

    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--reps", type=int, default=15)
    args = p.parse_args()
    torch.set_float32_matmul_precision("highest")
    b, t, h, d = args.batch, args.seq, args.heads, args.dim
    x = torch.randn(b, t, 3 * d)

    def block(xt, backward):
        q, k, v = xt.split(d, dim=2)
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if backward:
            o.sum().backward()
        return o

    runs = {"PyTorch CPU eager": ("cpu", None), "tpu, math path": ("tpu", [SDPBackend.MATH]),
            "tpu, fused SDPA op": ("tpu", [SDPBackend.OVERRIDEABLE])}
    rows = []
    for name, (device, backends) in runs.items():
        xt = x.to(device).requires_grad_()
        with sdpa_kernel(backends) if backends else contextlib.nullcontext():
            fwd = median_ms(lambda: block(xt, False), device, args.reps)
            both = median_ms(lambda: block(xt, True), device, args.reps)
        rows.append((name, fwd, both))
    q = x[..., :d].reshape(b, t, h, d // h).transpose(1, 2).to("tpu")
    fwd = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    o, lse = fwd(q, q, q, None, 0.0, True, False)[:2]
    g = torch.randn_like(o)
    bwd = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward
    bwd_op = median_ms(lambda: bwd(g, q, q, q, None, [True, True, True, False], o, lse, None, None,
                                   t, t, 0.0, True, lse, lse), "tpu", args.reps)
    print(f"device: {torch.tpu.get_device_name()}; causal attention, batch {b}, {h} heads, seq {t}, "
          f"d_model {d}, HIGHEST, Strict Eager; median ms of {args.reps}")
    print(f"{'run':22s} {'fwd ms':>8s} {'fwd+bwd ms':>11s}")
    for name, fwd, both in rows:
        print(f"{name:22s} {fwd:8.2f} {both:11.2f}")
    print(f"fused vs math path: forward {rows[1][1] / rows[2][1]:.2f}x, forward+backward "
          f"{rows[1][2] / rows[2][2]:.2f}x; attention backward program alone {bwd_op:.2f} ms")


if __name__ == "__main__":
    main()
