"""Run under torchrun: torch.distributed.checkpoint saves and loads a model and
its optimizer on tpu through tpu_dist, for DDP and for FSDP2 (sharded
DTensor state dicts). A run resumed from the checkpoint gives the same next
losses as the run that saved it. argv[1]: the checkpoint directory."""

import copy
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_tpu  # noqa: F401

dist.init_process_group(backend="tpu_dist")
r, w = dist.get_rank(), dist.get_world_size()
torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
torch.set_float32_matmul_precision("highest")
mesh = init_device_mesh("tpu", (w,))
root = sys.argv[1]


def make(kind):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to("tpu")
    if kind == "ddp":
        model = DDP(model)
    else:
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def steps(model, opt, n, seed):
    g = torch.Generator().manual_seed(seed + r)
    out = []
    for _ in range(n):
        x = torch.randn(4, 8, generator=g).to("tpu")
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


for kind in ("ddp", "fsdp"):
    path = os.path.join(root, kind)
    model, opt = make(kind)
    steps(model, opt, 2, seed=10)
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=path)
    expected = steps(model, opt, 2, seed=20)

    fresh, fopt = make(kind)
    steps(fresh, fopt, 1, seed=99)  # move it away from the saved state first
    msd, osd = get_state_dict(fresh, fopt)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(fresh, fopt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    got = steps(fresh, fopt, 2, seed=20)
    assert got == expected, (kind, r, got, expected)
    # Every saved value lives on tpu after the load.
    for v in fresh.state_dict().values():
        t = v.to_local() if hasattr(v, "to_local") else v
        assert t.device.type == "tpu", t.device
    dist.barrier()
    print(f"checkpoint {kind} ok", flush=True)

dist.destroy_process_group()
