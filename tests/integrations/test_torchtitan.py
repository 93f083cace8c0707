"""TorchTitan (0.3.0): its Llama3 debug model trains with FSDP2 on 2 ranks
started by torchrun with the tpu_dist backend, from the same seed checkpoint
as a Gloo run on the CPU, and the losses match; a distributed checkpoint
saved at step 2 and resumed gives the same later losses; torch.compile of the
blocks, as TorchTitan applies it, with the tpu backend. The shims that torch
2.13 and a CPU-only machine need are in torchtitan_launch.py."""

import json
import os
import random
import re
import subprocess
import sys

import pytest

pytest.importorskip("torchtitan")
pytest.importorskip("datasets")
tokenizers = pytest.importorskip("tokenizers")


pytestmark = pytest.mark.strict_pass("a few minutes of 2-rank runs in processes of their own")

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.join(HERE, "torchtitan_launch.py")
STEPS = 4


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """A local text dataset (c4's JSON-lines layout) and a byte-level BPE
    tokenizer trained on it: nothing is downloaded."""
    root = tmp_path_factory.mktemp("torchtitan")
    rng = random.Random(0)
    words = ("the of and to in is for on that with as was by it at from be this are or an model "
             "training data tensor device memory compute shard gradient loss step network layer "
             "weight bias token sequence batch parallel checkpoint resume").split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(50, 300))).capitalize() + "."
             for _ in range(300)]
    (root / "c4_test").mkdir()
    with open(root / "c4_test" / "data.json", "w") as f:
        for text in texts:
            f.write(json.dumps({"text": text}) + "\n")
    bos, eos = "<|begin_of_text|>", "<|end_of_text|>"
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.train_from_iterator(texts, tokenizers.trainers.BpeTrainer(
        vocab_size=512, special_tokens=[bos, eos],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()))
    (root / "tokenizer").mkdir()
    tok.save(str(root / "tokenizer" / "tokenizer.json"))
    (root / "tokenizer" / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": bos, "eos_token": eos, "add_bos_token": True, "add_eos_token": True}))
    return root


def _torchtitan(assets, name, *extra, cpu=False, nproc=2):
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS="1",
               HF_DATASETS_CACHE=str(assets / "hf_cache"))
    if cpu:
        env.update(TORCH_DEVICE_BACKEND_AUTOLOAD="0", TT_REFERENCE_CPU="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node", str(nproc), "--local-ranks-filter", "0", LAUNCH,
           "--module", "llama3", "--config", "llama3_debugmodel",
           "--hf_assets_path", str(assets / "tokenizer"),
           "--dataloader.dataset_path", str(assets / "c4_test"),
           "--training.steps", str(STEPS), "--training.seq_len", "128",
           "--training.local_batch_size", "2", "--training.mixed_precision_param", "float32",
           "--parallelism.spmd_backend", "partial_dtensor",
           "--parallelism.data_parallel_shard_degree", str(nproc),
           "--debug.seed", "42", "--debug.deterministic", "--comm.trace_buf_size", "0",
           "--metrics.disable_color_printing", "--validator.freq", "1000",
           "--dump_folder", str(assets / name), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=assets)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    losses = {int(s): float(v) for s, v in re.findall(r"step:\s*(\d+)\s+loss:\s*([-\d.]+)", out)}
    return losses, out


def _close(actual, expected, steps, rtol=1e-3):
    for s in steps:
        assert abs(actual[s] - expected[s]) <= rtol * abs(expected[s]), (s, actual, expected)


@pytest.fixture(scope="module")
def reference(assets):
    """A seed checkpoint (CPU, one rank) that every run starts from (the
    devices draw different random weights), and the Gloo run on the CPU."""
    _torchtitan(assets, "seed", "--checkpoint.enable", "--checkpoint.create_seed_checkpoint",
                cpu=True, nproc=1)
    start = ("--checkpoint.enable", "--checkpoint.initial_load_path",
             str(assets / "seed" / "checkpoint" / "step-0"))
    cpu, _ = _torchtitan(assets, "cpu", *start, cpu=True)
    assert sorted(cpu) == list(range(1, STEPS + 1)), cpu
    return start, cpu


def test_torchtitan_fsdp2_on_tpu_dist_matches_gloo_on_cpu(assets, reference):
    start, cpu = reference
    tpu, out = _torchtitan(assets, "tpu", *start, "--checkpoint.interval", "2")
    assert "TPU capacity" in out  # torchtitan chose the tpu device itself
    assert sorted(tpu) == list(range(1, STEPS + 1)), tpu
    _close(tpu, cpu, range(1, STEPS + 1))
    assert tpu[STEPS] < tpu[1]  # it learns

    # Resume from the distributed checkpoint written at step 2.
    assert (assets / "tpu" / "checkpoint" / "step-2").is_dir()
    resumed, out = _torchtitan(assets, "tpu", "--checkpoint.enable", "--checkpoint.load_step",
                               "2", "--checkpoint.load_only")
    assert sorted(resumed) == [3, 4], resumed
    _close(resumed, tpu, [3, 4], rtol=1e-5)


def test_torchtitan_compiled_blocks_on_tpu(assets, reference):
    start, cpu = reference
    compiled, out = _torchtitan(assets, "compiled", *start, "--compile.enable",
                                "--compile.backend", "tpu", "--compile.components", "model,loss")
    assert "Compiling each TransformerBlock with torch.compile" in out
    _close(compiled, cpu, range(1, STEPS + 1))
