"""Run under torchrun: DDP on tpu against a single-process reference that
trains the same model on the whole batch (identical losses and weights)."""

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_tpu  # noqa: F401

dist.init_process_group(backend="tpu_dist")
r, w = dist.get_rank(), dist.get_world_size()
torch.set_float32_matmul_precision("highest")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 4))
ref = copy.deepcopy(model)
ddp = DDP(model.to("tpu"))
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
for step in range(3):
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(8 * w, 8, generator=g), torch.randint(0, 4, (8 * w,), generator=g)
    loss = F.cross_entropy(ddp(x[r * 8:(r + 1) * 8].to("tpu")), y[r * 8:(r + 1) * 8].to("tpu"))
    opt.zero_grad()
    loss.backward()
    opt.step()
    loss_ref = F.cross_entropy(ref(x), y)
    opt_ref.zero_grad()
    loss_ref.backward()
    opt_ref.step()
    # The mean of the ranks' losses is the whole batch's loss.
    mean = loss.detach().clone()
    dist.all_reduce(mean, op=dist.ReduceOp.AVG)
    torch.testing.assert_close(mean.cpu(), loss_ref.detach(), rtol=1e-5, atol=1e-6)
for p, q in zip(ddp.module.parameters(), ref.parameters()):
    torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
print(f"rank {r}: ddp ok")
dist.destroy_process_group()
