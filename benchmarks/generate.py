"""Autoregressive decoding with a Hugging Face causal LM: `generate` with a
static KV cache, greedy, beside PyTorch's own CPU paths, in one run.

The model is a Llama built from a small configuration with random weights
(4 layers, hidden 256, 4 heads / 2 KV heads, vocabulary 2048). Rows:
PyTorch CPU eager, Inductor (CPU), tpu Strict Eager, tpu Fused Eager and
tpu compile, each at batch 1 and 8. On tpu, `generate` with a static cache
compiles the decoding step itself (transformers' default compile
configuration for a tpu model: backend "tpu", static shapes; the prefill
runs in the eager mode), which is the "tpu compile" row; the eager rows pass
`disable_compile=True`. On the CPU `generate` does not compile, so the
Inductor row compiles the model's forward as Hugging Face's documentation
shows for a static cache (`model.forward = torch.compile(model.forward)`).
The tpu side runs at HIGHEST precision, numerics equal to the CPU peers'.

For each row: the first call's time (tracing and compiling), then, taking
turns with the other rows for --rounds rounds, the time to first token (a
`generate` of one token: prefill and the first decode) and the rate
(tokens per second over the whole batch, of a `generate` of --new-tokens
tokens from start to end, prefill included). Every call uses one
static cache of prompt + 2 x --new-tokens positions, so that shapes do not
depend on the length asked for; "compiles" counts the programs compiled by
the first call ("first") and then by a call generating twice as many tokens
("2x"): a program per generated token shows as a non-zero second count.
The generated tokens are compared with the CPU's. Usage: python benchmarks/generate.py [--new-tokens 32] [--prompt 16]
[--batches 1,8] [--rounds 3] [--skip-inductor]
"""

import argparse
import contextlib
import copy
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_tpu  # noqa: E402
import torch_tpu.metrics as tm  # noqa: E402
from torch_tpu import EagerMode, Precision  # noqa: E402


def make_model():
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=2048, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        eos_token_id=None, bos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


class Row:
    """One configuration: its own copy of the model on its device."""

    def __init__(self, name, model, device, batch, mode=None, compiled=False):
        self.name, self.device, self.batch, self.mode = name, device, batch, mode
        self.model = copy.deepcopy(model).to(device)
        self.compiled = compiled
        if compiled and device == "cpu":
            self.model.forward = torch.compile(self.model.forward, backend="inductor", dynamic=False)
        self.cache = None
        self.ttft, self.rate = [], []
        self.first_call = None
        self.compiles = ["-", "-"]
        self.tokens = None

    def context(self):
        stack = contextlib.ExitStack()
        stack.enter_context(torch.no_grad())
        if self.device == "tpu":
            stack.enter_context(torch_tpu.eager_mode(self.mode or EagerMode.DEFER_NEVER))
            stack.enter_context(torch_tpu.precision(Precision.HIGHEST))
        return stack

    def generate(self, prompt, new_tokens):
        import transformers

        ids = prompt.to(self.device)
        if self.cache is None:
            self.cache = transformers.StaticCache(config=self.model.config, max_cache_len=self.cache_len)
        self.cache.reset()
        out = self.model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
            min_new_tokens=new_tokens, do_sample=False, num_beams=1, cache=self.cache,
            disable_compile=not (self.compiled and self.device == "tpu"))
        return out.cpu()  # waits for the device

    def compiles_during(self, fn):
        before = tm.metrics()["compiles"]
        out = fn()
        return out, (str(tm.metrics()["compiles"] - before) if self.device == "tpu" else "-")

    def warm_up(self, prompt, new_tokens):
        self.cache_len = prompt.shape[1] + 2 * new_tokens
        with self.context():
            t0 = time.perf_counter()
            self.tokens, self.compiles[0] = self.compiles_during(lambda: self.generate(prompt, new_tokens))
            self.first_call = time.perf_counter() - t0
            _, self.compiles[1] = self.compiles_during(lambda: self.generate(prompt, 2 * new_tokens))
            self.generate(prompt, 1)

    def round(self, prompt, new_tokens):
        with self.context():
            t0 = time.perf_counter()
            self.generate(prompt, 1)
            t1 = time.perf_counter()
            self.tokens = self.generate(prompt, new_tokens)
            t2 = time.perf_counter()
        self.ttft.append(t1 - t0)
        self.rate.append(self.batch * new_tokens / (t2 - t1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--batches", default="1,8")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--skip-inductor", action="store_true")
    args = p.parse_args()
    torch.set_float32_matmul_precision("highest")
    model = make_model()
    print(f"device: {torch.tpu.get_device_name()}; Llama 4 layers, hidden 256, vocabulary 2048; "
          f"prompt {args.prompt}, {args.new_tokens} new tokens, greedy, static cache; median of "
          f"{args.rounds} rounds in rotation")
    for batch in (int(b) for b in args.batches.split(",")):
        prompt = torch.randint(1, 2048, (batch, args.prompt), generator=torch.Generator().manual_seed(batch))
        rows = [Row("PyTorch CPU eager", model, "cpu", batch)]
        if not args.skip_inductor:
            rows.append(Row("Inductor (CPU)", model, "cpu", batch, compiled=True))
        rows += [Row("tpu Strict Eager", model, "tpu", batch, EagerMode.DEFER_NEVER),
                 Row("tpu Fused Eager", model, "tpu", batch, EagerMode.DEFER_AND_FUSE),
                 Row("tpu compile", model, "tpu", batch, compiled=True)]
        for r in rows:
            r.warm_up(prompt, args.new_tokens)
        for _ in range(args.rounds):
            for r in rows:
                r.round(prompt, args.new_tokens)
        print(f"\nbatch {batch}")
        print(f"{'run':22s} {'tokens/s':>9s} {'vs CPU':>7s} {'TTFT ms':>8s} {'first call s':>13s} "
              f"{'compiles first, 2x':>19s} {'tokens':>7s}")
        base = rows[0]
        rate = {r.name: statistics.median(r.rate) for r in rows}
        for r in rows:
            same = "same" if torch.equal(r.tokens, base.tokens) else "DIFFER"
            compiles = ", ".join(r.compiles)
            print(f"{r.name:22s} {rate[r.name]:9.1f} {rate[r.name] / rate[base.name]:6.2f}x "
                  f"{1e3 * statistics.median(r.ttft):8.1f} {r.first_call:13.2f} {compiles:>19s} {same:>7s}")
        strict, fused = rate["tpu Strict Eager"], rate["tpu Fused Eager"]
        line = f"Fused / Strict: {fused / strict:.2f}x"
        if not args.skip_inductor:
            line += f"; tpu compile / Inductor: {rate['tpu compile'] / rate['Inductor (CPU)']:.2f}x"
        print(line)


if __name__ == "__main__":
    main()
