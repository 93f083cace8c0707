"""Trains a tiny model with Hugging Face Accelerate on the device Accelerate
picks by itself (tpu with torch_tpu loaded), or on the CPU (--cpu): gradient
accumulation, save_state / load_state, optional bf16 mixed precision. Prints
a JSON file per process (--result PREFIX: PREFIX.rank<N>.json): losses, the
losses after reloading the saved state, the device, the distributed type.
Run directly or under torchrun."""

import argparse
import json
import os

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--mixed-precision", default="no")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--result", required=True)
    p.add_argument("--steps", type=int, default=8)
    a = p.parse_args()
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    # f32 matmuls at full precision on both devices, so the runs compare closely.
    torch.set_float32_matmul_precision("highest")
    acc = Accelerator(cpu=a.cpu, mixed_precision=a.mixed_precision, gradient_accumulation_steps=2)
    set_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 1))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4 * a.steps * acc.num_processes, 8, generator=g)
    data = TensorDataset(x, x.sum(1, keepdim=True).sin())
    loader = DataLoader(data, batch_size=4, shuffle=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    model, opt, loader, sched = acc.prepare(model, opt, loader, sched)

    def run(batches):
        losses = []
        for xb, yb in batches:
            with acc.accumulate(model):
                loss = F.mse_loss(model(xb).float(), yb)
                acc.backward(loss)
                opt.step()
                sched.step()
                opt.zero_grad()
            losses.append(acc.gather(loss.detach()).mean().item())
        return losses

    batches = list(loader)
    half = len(batches) // 2
    first = run(batches[:half])
    acc.save_state(a.state_dir)
    second = run(batches[half:])
    acc.load_state(a.state_dir)  # back to the middle: the second half again
    again = run(batches[half:])
    weight = acc.unwrap_model(model)[0].weight
    result = {
        "losses": first + second, "again": again, "device": str(acc.device),
        "param_device": str(weight.device), "batch_device": str(batches[0][0].device),
        "distributed_type": str(acc.distributed_type), "num_processes": acc.num_processes,
        "rank": acc.process_index, "mixed_precision": acc.mixed_precision,
        "local_rank": os.environ.get("LOCAL_RANK")}
    with open(f"{a.result}.rank{acc.process_index}.json", "w") as f:
        json.dump(result, f)
    acc.end_training()  # destroys the process group under a launcher


if __name__ == "__main__":
    main()
