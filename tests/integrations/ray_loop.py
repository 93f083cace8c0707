"""The Ray Train loop of tests/integrations/test_ray_train.py (a module of
its own so that Ray's workers import it by name)."""

import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def train_loop(config):
    import ray.train
    import ray.train.torch
    from ray.train import Checkpoint

    torch.set_float32_matmul_precision("highest")
    ctx = ray.train.get_context()
    rank = ctx.get_world_rank()
    device = ray.train.torch.get_device()
    model = make_model()
    start = 0
    if config.get("resume"):  # resumed: the weights and the step from the report
        with Checkpoint(config["resume"]).as_directory() as d:
            state = torch.load(os.path.join(d, "state.pt"), map_location="cpu")
        model.load_state_dict(state["model"])
        start = state["step"]
    model = ray.train.torch.prepare_model(model)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 6, generator=g)
    data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True).cos())
    loader = ray.train.torch.prepare_data_loader(
        torch.utils.data.DataLoader(data, batch_size=4, shuffle=False))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, devices = [], set()
    for step, (xb, yb) in enumerate(loader):
        if step < start:
            continue
        if step == start + config["steps"]:
            break
        devices.add(str(xb.device))
        loss = F.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    inner = model.module if hasattr(model, "module") else model
    # The ranks hold the same weights after DDP's steps.
    w = inner[0].weight.detach().clone()
    total = w.clone()
    dist.all_reduce(total)
    facts = {"device": str(device), "backend": dist.get_backend(), "model": type(model).__name__,
             "param_device": str(next(inner.parameters()).device),
             "batch_devices": sorted(devices),
             "in_sync": bool(torch.allclose((total / 2).cpu(), w.cpu(), rtol=1e-6, atol=1e-7))}
    with tempfile.TemporaryDirectory() as d:
        ckpt = None
        if rank == 0:
            torch.save({"model": {k: v.cpu() for k, v in inner.state_dict().items()},
                        "step": start + config["steps"]}, os.path.join(d, "state.pt"))
            ckpt = Checkpoint.from_directory(d)
        ray.train.report({"loss": losses[-1], "rank0_losses": losses, **facts}, checkpoint=ckpt)
