"""A blockwise (flash) attention written in Pallas, called on tpu tensors
through torch_tpu.kernels, against the built-in lowering of
scaled_dot_product_attention and PyTorch CPU eager.

The kernel walks the keys in blocks with an online softmax, so its forward
pass never holds the (n x n) score matrix; its backward pass (a
jax.custom_vjp rule) recomputes attention with plain JAX. On the CPU plugin
Pallas runs in interpret mode (a loop of dynamic slices in StableHLO), so
this measures the path, not a TPU kernel's speed.

Prints, per sequence length, training steps/s of one attention block
(forward and backward) and the tpu peak memory of a step, for: PyTorch CPU
eager (SDPA), tpu with the built-in SDPA lowering, tpu with the Pallas
kernel.
Usage: python benchmarks/pallas_attention.py [--seqs 256,1024] [--steps 5]
"""

import argparse
import functools
import math
import time

import torch

import torch_tpu

_op = None


def _flash_kernel(q_ref, k_ref, v_ref, o_ref, *, block_k, block_q, scale, causal):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    qi = pl.program_id(1)
    q = q_ref[0] * scale  # (block_q, d)
    n = k_ref.shape[1]
    rows = qi * block_q + jnp.arange(q.shape[0])

    def body(j, carry):
        m, l, acc = carry
        k = k_ref[0, pl.ds(j * block_k, block_k), :]
        v = v_ref[0, pl.ds(j * block_k, block_k), :]
        s = q @ k.T
        if causal:
            cols = j * block_k + jnp.arange(block_k)
            s = jnp.where(cols[None, :] <= rows[:, None], s, -jnp.inf)
        m_new = jnp.maximum(m, s.max(axis=-1))
        p = jnp.exp(s - m_new[:, None])
        corr = jnp.exp(m - m_new)
        return m_new, l * corr + p.sum(axis=-1), acc * corr[:, None] + p @ v

    init = (jnp.full((q.shape[0],), -jnp.inf, jnp.float32), jnp.zeros((q.shape[0],), jnp.float32),
            jnp.zeros(q.shape, jnp.float32))
    m, l, acc = jax.lax.fori_loop(0, n // block_k, body, init)
    o_ref[0] = (acc / l[:, None]).astype(o_ref.dtype)


def _attention_math(q, k, v, causal):
    import jax
    import jax.numpy as jnp

    s = jnp.einsum("bqd,bkd->bqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[1]
        s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def flash_attention_jax(q, k, v, *, causal, block=16):
    """(batch*heads, n, d) arrays; n a multiple of `block`."""
    import jax
    from jax.experimental import pallas as pl

    bh, n, d = q.shape
    block = min(block, n)

    def forward(q, k, v):
        kernel = functools.partial(_flash_kernel, block_k=block, block_q=block,
                                   scale=1 / math.sqrt(d), causal=causal)
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
            grid=(bh, n // block),
            in_specs=[pl.BlockSpec((1, block, d), lambda b, i: (b, i, 0)),
                      pl.BlockSpec((1, n, d), lambda b, i: (b, 0, 0)),
                      pl.BlockSpec((1, n, d), lambda b, i: (b, 0, 0))],
            out_specs=pl.BlockSpec((1, block, d), lambda b, i: (b, i, 0)),
            interpret=True,
        )(q, k, v)

    @jax.custom_vjp
    def attn(q, k, v):
        return forward(q, k, v)

    def fwd(q, k, v):
        return forward(q, k, v), (q, k, v)

    def bwd(res, g):
        return jax.vjp(lambda *a: _attention_math(*a, causal), *res)[1](g)

    attn.defvjp(fwd, bwd)
    return attn(q, k, v)


def flash_attention(q, k, v, causal=True):
    """The Pallas attention as a torch op on (batch*heads, n, d) tensors."""
    global _op
    if _op is None:
        import torch_tpu.kernels as tk

        _op = tk.jax_op("torch_tpu_bench::flash_attention", flash_attention_jax,
                        static_argnames=("causal", "block"))
    block = 64 if q.shape[1] % 64 == 0 and q.shape[1] >= 256 else 16
    return _op(q, k, v, causal=causal, block=block)


class Block(torch.nn.Module):
    """Pre-norm attention block; `attention` is "pallas" or "sdpa"."""

    def __init__(self, d, heads, attention):
        super().__init__()
        self.heads, self.attention = heads, attention
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q, k, v = (t.reshape(b, n, self.heads, -1).transpose(1, 2).reshape(b * self.heads, n, -1)
                   for t in (q, k, v))
        if self.attention == "pallas":
            o = flash_attention(q, k, v, causal=True)
        else:
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        o = o.reshape(b, self.heads, n, -1).transpose(1, 2).reshape(b, n, d)
        return x + self.proj(o)


def _run(model, x, steps, device):
    def step():
        model.zero_grad(set_to_none=True)
        model(x).square().mean().backward()

    step()  # compiles
    if device == "tpu":
        torch_tpu.synchronize()
        torch.tpu.reset_peak_memory_stats()
        base = torch.tpu.memory_allocated()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if device == "tpu":
        torch_tpu.synchronize()
        peak = torch.tpu.max_memory_allocated() - base
    else:
        peak = 0
    return steps / (time.perf_counter() - t0), peak


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seqs", default="256,1024")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--heads", type=int, default=2)
    args = p.parse_args()
    print(f"device: {torch.tpu.get_device_name()}; one attention block, d={args.d}, "
          f"{args.heads} heads, batch 1, causal, f32; forward + backward")
    print(f"{'seq':>6s} {'configuration':30s} {'steps/s':>9s} {'vs CPU':>7s} {'tpu peak MiB':>13s}")
    for n in (int(s) for s in args.seqs.split(",")):
        torch.manual_seed(0)
        ref = Block(args.d, args.heads, "sdpa")
        x = torch.randn(1, n, args.d)
        cpu, _ = _run(ref, x, args.steps, "cpu")
        rows = [("PyTorch CPU eager (SDPA)", cpu, None)]
        for attention in ("sdpa", "pallas"):
            m = Block(args.d, args.heads, attention)
            m.load_state_dict(ref.state_dict())
            m.to("tpu")
            rate, peak = _run(m, x.to("tpu"), args.steps, "tpu")
            name = "tpu, built-in SDPA lowering" if attention == "sdpa" else "tpu, Pallas flash attention"
            rows.append((name, rate, peak))
        for name, rate, peak in rows:
            mem = f"{peak / 2**20:13.1f}" if peak is not None else f"{'-':>13s}"
            print(f"{n:6d} {name:30s} {rate:9.2f} {rate / cpu:6.2f}x {mem}")


if __name__ == "__main__":
    main()
