"""Run under torchrun: DeviceMesh on tpu, DTensor distribute / redistribute
(including the shard-dim all-to-all) and FSDP2 fully_shard training (f32 and
bf16 mixed precision, resharding) against the unsharded model."""

import copy
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import torch_tpu  # noqa: F401

dist.init_process_group(backend="tpu_dist")
r, w = dist.get_rank(), dist.get_world_size()
local = int(os.environ["LOCAL_RANK"])
torch.tpu.set_device(local)  # the CUDA idiom: this process's device is tpu:LOCAL_RANK
assert torch.empty(1, device="tpu").device == torch.device("tpu", local)
torch.set_float32_matmul_precision("highest")

mesh = init_device_mesh("tpu", (w,))
x = torch.arange(w * 4 * 6, dtype=torch.float32).reshape(w * 4, 6)
d = distribute_tensor(x.to("tpu"), mesh, [Shard(0)])
assert torch.equal(d.to_local().cpu(), x[r * 4:(r + 1) * 4])
assert torch.equal(d.redistribute(mesh, [Replicate()]).to_local().cpu(), x)
cols = d.redistribute(mesh, [Shard(1)])  # all-to-all between shard dims
assert torch.equal(cols.full_tensor().cpu(), x)
assert torch.equal((d * 2 + 1).full_tensor().cpu(), x * 2 + 1)
if w == 4:  # a 2 x 2 mesh: shard rows over one dim, replicate over the other
    mesh2 = init_device_mesh("tpu", (2, 2), mesh_dim_names=("dp", "tp"))
    d2 = distribute_tensor(x.to("tpu"), mesh2, [Shard(0), Replicate()])
    assert torch.equal(d2.full_tensor().cpu(), x)
    d3 = d2.redistribute(mesh2, [Replicate(), Shard(1)])
    assert torch.equal(d3.full_tensor().cpu(), x)


def train(mp, reshard):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 4))
    ref = copy.deepcopy(model)
    model.to("tpu")
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mp else None
    kw = {"mp_policy": policy} if policy else {}
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, reshard_after_forward=reshard, **kw)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, **kw)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(3):
        g = torch.Generator().manual_seed(step)
        xb, yb = torch.randn(4 * w, 8, generator=g), torch.randint(0, 4, (4 * w,), generator=g)
        loss = F.cross_entropy(model(xb[r * 4:(r + 1) * 4].to("tpu")), yb[r * 4:(r + 1) * 4].to("tpu"))
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss_ref = F.cross_entropy(ref(xb), yb)
        loss_ref.backward()
        opt_ref.step()
        opt_ref.zero_grad()
    tol = dict(rtol=3e-2, atol=3e-2) if mp else dict(rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.full_tensor().float().cpu(), q.detach(), **tol)


train(mp=False, reshard=True)
train(mp=False, reshard=False)
train(mp=True, reshard=True)
print(f"rank {r}: fsdp dtensor ok")
dist.destroy_process_group()
