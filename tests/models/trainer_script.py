"""A small GPT trained the way public trainer scripts train: bf16 autocast,
gradient accumulation, clip_grad_norm_, a cosine LR schedule with warm-up,
dropout, a DataLoader that pins memory, and a checkpoint
every few steps that a fresh process resumes from. tests/models/test_trainer.py
runs it in child processes; it prints one JSON line of the step losses.

    python tests/models/trainer_script.py --device tpu --steps 8 --ckpt-every 4 \\
        --ckpt-dir DIR [--resume-from DIR/step-N.pt] [--compile]

Checkpoints are DIR/step-N.pt.
"""

import argparse
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

VOCAB, SEQ, D, HEADS, LAYERS = 64, 16, 32, 2, 2
MICRO, ACCUM = 4, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, HEADS, dropout=0.1, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D),
                                 nn.Dropout(0.1))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(SEQ, D))
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)
        self.head.weight = self.tok.weight  # tied, as GPT-2 ties them

    def forward(self, idx):
        t = idx.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=idx.device), 1)
        x = self.tok(idx) + self.pos[:t]
        for blk in self.blocks:
            x = blk(x, mask)
        return self.head(self.ln(x))


class Tokens(Dataset):
    """Deterministic synthetic text: sample i is a noisy arithmetic sequence."""

    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        start, step = torch.randint(0, VOCAB, (2,), generator=g).tolist()
        seq = (start + step * torch.arange(SEQ + 1)) % VOCAB
        noise = torch.randint(0, VOCAB, (SEQ + 1,), generator=g)
        seq = torch.where(torch.rand(SEQ + 1, generator=g) < 0.1, noise, seq)
        return seq[:-1], seq[1:]


def lr_at(step, total, warmup=2, peak=3e-3):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))


def rng_state(device):
    state = {"cpu": torch.get_rng_state()}
    if device.type == "tpu":
        state["tpu"] = torch.tpu.get_rng_state()
    return state


def set_rng_state(state, device):
    torch.set_rng_state(state["cpu"])
    if device.type == "tpu":
        torch.tpu.set_rng_state(state["tpu"])


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="tpu")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--ckpt-every", type=int, default=4)
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--resume-from", default=None, help="a checkpoint file")
    p.add_argument("--compile", action="store_true")
    args = p.parse_args(argv)
    device = torch.device(args.device)

    torch.manual_seed(0)
    if device.type == "tpu":
        torch.tpu.manual_seed_all(0)
    model = GPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr_at(0, args.steps), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_at(s, args.steps) / lr_at(0, args.steps))
    step = 0
    os.makedirs(args.ckpt_dir, exist_ok=True)
    if args.resume_from:
        ckpt = torch.load(args.resume_from, map_location="cpu", weights_only=False)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        sched.load_state_dict(ckpt["sched"])
        set_rng_state(ckpt["rng"], device)
        step = ckpt["step"]

    forward = torch.compile(model, backend="tpu") if args.compile else model
    # pin_memory pins for the current accelerator (tpu), as on CUDA.
    loader = DataLoader(Tokens(), batch_size=MICRO, shuffle=False,
                        pin_memory=device.type != "cpu")
    batches = iter(loader)
    for _ in range(step * ACCUM):  # skip what the checkpointed run consumed
        next(batches)

    model.train()
    losses = []
    while step < args.steps:
        total = 0.0
        for _ in range(ACCUM):
            x, y = next(batches)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16):
                logits = forward(x)
                loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), y.reshape(-1))
            (loss / ACCUM).backward()
            total += loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        losses.append((total / ACCUM).item())
        if step % args.ckpt_every == 0:
            ckpt_path = os.path.join(args.ckpt_dir, f"step-{step}.pt")
            tmp = ckpt_path + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                        "sched": sched.state_dict(), "rng": rng_state(device), "step": step}, tmp)
            os.replace(tmp, ckpt_path)
    print(json.dumps({"losses": losses, "step": step, "lr": sched.get_last_lr()[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
