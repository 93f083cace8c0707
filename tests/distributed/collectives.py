"""Run under torchrun: every collective of tpu_dist against values computed
locally, for several reduce ops and dtypes, sync and async."""

import os

import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401

dist.init_process_group(backend="tpu_dist")
r, w = dist.get_rank(), dist.get_world_size()
T = "tpu"
# The engine that runs these: the CPU plugin's default is the host engine;
# TORCH_TPU_DIST_ENGINE=xla runs a one-process group through XLA programs.
engine = dist.group.WORLD._get_backend(torch.device(T)).engine
assert engine == (os.environ.get("TORCH_TPU_DIST_ENGINE") or "host"), engine


def check(got, want, what):
    got = got.cpu()
    assert torch.equal(got, want.to(got.dtype)), f"rank {r}: {what}: {got} != {want}"


def values(rank, dtype):
    base = torch.arange(6) + rank + 1
    return (base % 2 == 0) if dtype == torch.bool else base.to(dtype)


DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.uint8, torch.bool]
for dtype in DTYPES:
    every = torch.stack([values(k, dtype) for k in range(w)])
    ops = {dist.ReduceOp.MAX: every.max(0).values, dist.ReduceOp.MIN: every.min(0).values}
    if dtype != torch.bool:
        ops[dist.ReduceOp.SUM] = every.sum(0).to(dtype) if dtype != torch.uint8 else every.sum(0).to(torch.uint8)
        ops[dist.ReduceOp.PRODUCT] = every.prod(0).to(dtype)
    if dtype.is_floating_point:
        ops[dist.ReduceOp.AVG] = (every.double().sum(0) / w).to(dtype)
        ops[dist.ReduceOp.PREMUL_SUM] = None
    for op, want in ops.items():
        x = values(r, dtype).to(T)
        if op == dist.ReduceOp.PREMUL_SUM:
            rop = dist._make_nccl_premul_sum(0.5)
            dist.all_reduce(x, op=rop)
            want = (every.double() * 0.5).sum(0).to(dtype)
        else:
            work = dist.all_reduce(x, op=op, async_op=True)
            work.wait()
            assert work.is_completed()
        check(x, want, f"all_reduce {op} {dtype}")
    # all_gather (list and tensor forms), broadcast, reduce_scatter
    outs = [torch.empty(6, dtype=dtype, device=T) for _ in range(w)]
    dist.all_gather(outs, values(r, dtype).to(T))
    for k in range(w):
        check(outs[k], values(k, dtype), f"all_gather {dtype}")
    flat = torch.empty(6 * w, dtype=dtype, device=T)
    dist.all_gather_into_tensor(flat, values(r, dtype).to(T))
    check(flat, every.reshape(-1), f"all_gather_into_tensor {dtype}")
    b = values(r, dtype).to(T)
    dist.broadcast(b, src=w - 1)
    check(b, values(w - 1, dtype), f"broadcast {dtype}")
    if dtype != torch.bool:
        src = torch.cat([values(r, dtype) for _ in range(w)]).to(T)
        out = torch.empty(6, dtype=dtype, device=T)
        dist.reduce_scatter_tensor(out, src)
        check(out, every.sum(0).to(dtype), f"reduce_scatter_tensor {dtype}")

# all_to_all (even and uneven splits), gather / scatter, send / recv
x = torch.arange(w * 2, dtype=torch.float32, device=T) + 100 * r
y = torch.empty_like(x)
dist.all_to_all_single(y, x)
check(y, torch.tensor([100 * k + 2 * r + i for k in range(w) for i in range(2)], dtype=torch.float32),
      "all_to_all_single")
ins = [torch.full((k + 1,), float(r), device=T) for k in range(w)]
outs = [torch.empty(r + 1, device=T) for _ in range(w)]
dist.all_to_all(outs, ins)
for k in range(w):
    check(outs[k], torch.full((r + 1,), float(k)), "all_to_all")
g = [torch.empty(3, device=T) for _ in range(w)] if r == 0 else None
dist.gather(torch.full((3,), float(r), device=T), g, dst=0)
if r == 0:
    for k in range(w):
        check(g[k], torch.full((3,), float(k)), "gather")
s = torch.empty(3, device=T)
dist.scatter(s, [torch.full((3,), float(k * 10), device=T) for k in range(w)] if r == 0 else None, src=0)
check(s, torch.full((3,), float(r * 10)), "scatter")
if w >= 2:
    if r == 0:
        dist.send(torch.arange(4.0, device=T), dst=1)
    elif r == 1:
        got = torch.empty(4, device=T)
        dist.recv(got, src=0)
        check(got, torch.arange(4.0), "send/recv")

# a subgroup of the even ranks
evens = dist.new_group([k for k in range(w) if k % 2 == 0])
if r % 2 == 0:
    x = torch.ones(2, device=T)
    dist.all_reduce(x, group=evens)
    check(x, torch.full((2,), float(len(range(0, w, 2)))), "new_group all_reduce")
dist.barrier()
print(f"rank {r}: collectives ok ({engine} engine)")
dist.destroy_process_group()
