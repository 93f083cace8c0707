"""Run under torchrun: functional collectives inside torch.compile(backend="tpu")
graphs, and a DDP model whose forward is compiled; ranks must agree."""

import torch, torch.distributed as dist, torch_tpu
import torch.distributed._functional_collectives as funcol
dist.init_process_group(backend="tpu_dist")
r, w = dist.get_rank(), dist.get_world_size()
def f(x):
    y = x * 2
    y = funcol.all_reduce(y, "sum", dist.group.WORLD)
    return y + 1
cf = torch.compile(f, backend="tpu")
for i in range(3):
    x = torch.full((4,), float(r + i), device="tpu")
    out = cf(x)
    exp = sum(2.0 * (k + i) for k in range(w)) + 1
    assert out.cpu().tolist() == [exp] * 4, (out, exp)
# DDP step under compile
from torch import nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
torch.manual_seed(0)
m = DDP(nn.Linear(4, 2).to("tpu"))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
@torch.compile(backend="tpu")
def fwd(x):
    return m(x).square().mean()
for i in range(2):
    loss = fwd(torch.randn(3, 4).to("tpu")); loss.backward(); opt.step(); opt.zero_grad()
w0 = m.module.weight.detach().cpu(); ws = [torch.empty_like(w0) for _ in range(w)]
dist.all_gather_object(ws, w0)
assert all(torch.equal(ws[0], x) for x in ws)
print(f"rank {r}: compiled collectives ok")
dist.destroy_process_group()
