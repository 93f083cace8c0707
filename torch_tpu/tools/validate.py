"""Model validation: tiny Hugging Face `transformers` models on tpu against CPU.

    python -m torch_tpu.tools.validate                     # every family, every mode
    python -m torch_tpu.tools.validate --families llama,t5 --modes strict
    python -m torch_tpu.tools.validate --group vision --verbose
    python -m torch_tpu.tools.validate --list

For each model family a tiny config is built from the config class (random
weights from a fixed seed; nothing is downloaded), the model is created on
the CPU, and a deep copy is moved to tpu. At HIGHEST f32 matmul precision
(``torch.tpu.precision(Precision.HIGHEST)`` and, for the backward that
autograd runs on its own thread, ``torch.set_float32_matmul_precision
("highest")``) the tpu copy must match the CPU model in

* forward (``model.eval()``, no grad): every tensor of the model's output
  (logits, last hidden state, pooled output, hidden states, ...);
* one training step (``model.train()`` with every dropout probability, drop
  path rate, layer drop and SpecAugment probability of the config set to 0, so
  no random numbers are drawn): the loss, the gradient of every parameter, and
  every parameter and buffer after a ``torch.optim.SGD`` step (momentum and
  weight decay on);
* for the families that have it (Llama, GPT-2, T5, Whisper), greedy
  ``model.generate()`` with the KV cache: equal token for token.

Each check is run in every mode of ``MODES``: Strict Eager and Fused Eager
(set process-wide for the check, so that the backward runs in it too), and ``torch.compile(model, backend="tpu")`` when that backend is registered
(else its rows say "skipped: backend not available"). After the families come
rows for transformers' own tpu probe (``is_torch_tpu_available``, the
device ``TrainingArguments`` picks) and for ``Trainer`` training a few steps
on tpu, whose losses must match a CPU ``Trainer`` run.

The report prints one row per family and mode, "pass" or "FAIL: <stage>:
<first error line>", and last ``models: P/N pass`` (skipped rows are not
counted). The exit status is 0 when every row that ran passed.
``--cpu-fallback`` runs ops that tpu lacks on the CPU, so that a row names
every op its family needs (and shows whether the rest matches).

How Trainer finds tpu (transformers 5.24, accelerate 1.15):

* ``TrainingArguments._setup_devices`` (no distributed launch, ``use_cpu``
  False) asks ``is_torch_tpu_available()``, which is true when
  ``torch.accelerator.current_accelerator().type == "tpu"``: torch_tpu's
  PrivateUse1 device qualifies, so ``TrainingArguments().device`` is
  ``tpu:0`` and Trainer moves the model there, with no patching.
* accelerate's ``PartialState().default_device`` knows no "tpu" (it checks
  mps/mlu/sdaa/musa/npu/hpu/cuda/xpu/neuron, then says "cpu"); torch_tpu's
  adapter (``torch_tpu/integrations/accelerate.py``) makes it say tpu, so
  the DataLoader that Trainer prepares through accelerate puts batches on
  the model's device.
* Trainer's default optimizer is ``adamw_torch_fused``
  (``torch.optim.AdamW(fused=True)``, i.e. ``aten::_fused_adamw_``).
* Trainer re-ties tied weights after moving the model only for torch_xla
  (``ParallelMode.TPU``); ``Module.to("tpu")`` unties them (see
  ``check_tied_weights``), so a model with tied embeddings trains differently
  from the CPU.
"""

import os

# Nothing may be fetched from the network: every model is built from a config.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import copy  # noqa: E402
import dataclasses  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from typing import Any, Callable, Dict, List, Optional, Tuple  # noqa: E402

import torch  # noqa: E402

import torch_tpu  # noqa: E402

SEED = 1234
BATCH = 2
SEQ = 8
VOCAB = 128
IMAGE = 32

# Tolerances: max |tpu - cpu| over a tensor, divided by max |cpu| of that
# tensor (so a tensor is compared on its own scale), must not exceed these.
FORWARD_RTOL = 1e-4
LOSS_RTOL = 1e-4
GRAD_RTOL = 1e-3
PARAM_RTOL = 1e-4
# A gradient (a parameter) is compared on the scale of at least this fraction
# of the largest gradient (parameter) of the model, so that values that are
# zero up to rounding are not compared on the scale of their rounding noise.
GRAD_FLOOR = 1e-3
PARAM_FLOOR = 1e-3
SGD = dict(lr=0.1, momentum=0.9, weight_decay=0.01)


# --------------------------------------------------------------------- modes --

def _compile_backend_available() -> bool:
    import torch._dynamo
    return "tpu" in torch._dynamo.list_backends()


@dataclasses.dataclass
class Mode:
    name: str
    description: str
    # None when the mode can run, else why it is skipped.
    skip_reason: Callable[[], Optional[str]]
    # Entered around everything the tpu model runs.
    context: Callable[[], Any]
    # How the tpu model is called (identity for the eager modes).
    wrap: Callable[[torch.nn.Module], Callable]
    # Extra keyword arguments for model.generate() in this mode.
    generate_kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)


@contextlib.contextmanager
def _eager_everywhere(mode):
    """`mode` process-wide and on this thread inside the block.

    ``torch_tpu.eager_mode()`` alone is thread-local, and autograd runs the
    backward of tpu tensors on its own device thread, so ``loss.backward()``
    would run in the process-wide mode instead."""
    prev = torch_tpu.get_eager_mode()
    torch_tpu.set_eager_mode(mode)
    try:
        with torch_tpu.eager_mode(mode):
            yield
    finally:
        torch_tpu.set_eager_mode(prev)


def _eager(mode):
    return lambda: _eager_everywhere(mode)


@contextlib.contextmanager
def _compiling():
    """For torch.compile checks: TorchDynamo's caches are cleared first (code
    shared by all models, e.g. transformers' forward decorators, would
    otherwise reach the recompile limit and run eagerly unnoticed), and the
    block must have compiled at least one graph."""
    import torch._dynamo
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    before = counters["stats"]["unique_graphs"]
    with _eager_everywhere(torch_tpu.EagerMode.DEFER_NEVER):
        yield
    if counters["stats"]["unique_graphs"] == before:
        raise Mismatch("torch.compile compiled no graph (the model ran eagerly)")


@contextlib.contextmanager
def highest_precision():
    """HIGHEST f32 matmul precision on tpu inside the block, backward included.

    ``torch.tpu.precision()`` is thread-local and does not reach autograd's
    device thread, so torch's process-wide setting is made "highest" too;
    both are restored after."""
    follow = getattr(torch_tpu._C, "_follow_torch_precision", None)
    prev_follow = follow() if follow is not None else None
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        with torch.tpu.precision(torch_tpu.Precision.HIGHEST):
            yield
    finally:
        torch.set_float32_matmul_precision(prev)
        if prev_follow is not None:
            torch_tpu._C._set_follow_torch_precision(prev_follow)


MODES: List[Mode] = [
    Mode("strict", "Strict Eager (DEFER_NEVER)", lambda: None,
         _eager(torch_tpu.EagerMode.DEFER_NEVER), lambda m: m),
    Mode("fused", "Fused Eager (DEFER_AND_FUSE)", lambda: None,
         _eager(torch_tpu.EagerMode.DEFER_AND_FUSE), lambda m: m),
    Mode("debug", "Debug Eager (DEFER_NEVER_AND_LAUNCH_BLOCKING)", lambda: None,
         _eager(torch_tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING), lambda m: m),
    # torch.compile through the "tpu" TorchDynamo backend; generate() then uses
    # a static cache, which transformers compiles with backend="tpu" itself.
    Mode("compile", 'torch.compile(model, backend="tpu")',
         lambda: None if _compile_backend_available() else "backend not available",
         lambda: _compiling(),
         lambda m: torch.compile(m, backend="tpu"),
         generate_kwargs=dict(cache_implementation="static")),
]
MODE_NAMES = [m.name for m in MODES]


def get_mode(name: str) -> Mode:
    for m in MODES:
        if m.name == name:
            return m
    raise KeyError(f"unknown mode {name!r}; known: {', '.join(MODE_NAMES)}")


# ------------------------------------------------------------------ families --

@dataclasses.dataclass
class Case:
    """A built model (on the CPU, initial weights) and its inputs."""
    model: torch.nn.Module
    forward_inputs: Dict[str, Any]
    train_inputs: Dict[str, Any]
    # Loss from the training forward's output; default: output.loss.
    loss: Callable[[Any], torch.Tensor] = lambda out: out.loss
    # Positional/keyword inputs of model.generate(); None: not checked.
    generate_inputs: Optional[Dict[str, Any]] = None
    # align(tpu_output, cpu_output): the tpu output in the CPU's order, for
    # outputs whose order is a sort over near-equal keys (detections).
    align: Optional[Callable[[Any, Any], Any]] = None


@dataclasses.dataclass
class Family:
    name: str
    group: str  # "llm", "speech", "vision", "text"
    build: Callable[[], Case]
    # Greedy model.generate() with the KV cache is checked too.
    generate: bool = False
    # False: an inference model (a detector in eval): no training step.
    train: bool = True


def _no_randomness(config) -> None:
    """Sets every dropout / drop path / layer drop / SpecAugment probability of
    a config (and of its sub-configs) to 0, so training draws no random
    numbers and tpu and CPU can be compared."""
    from transformers import PretrainedConfig
    seen = set()

    def visit(cfg):
        if id(cfg) in seen:
            return
        seen.add(id(cfg))
        for key, value in list(vars(cfg).items()):
            if isinstance(value, PretrainedConfig):
                visit(value)
            elif isinstance(value, float) and (
                    "dropout" in key or "drop_path" in key or "layerdrop" in key
                    or key.endswith("pdrop")  # GPT-2 style: attn_pdrop, resid_pdrop, embd_pdrop
                    or key.startswith("mask_time_prob") or key.startswith("mask_feature_prob")
                    or key in ("attention_probs_dropout_prob", "hidden_dropout_prob", "drop_rate")):
                setattr(cfg, key, 0.0)

    visit(config)


def _make(cls, config) -> torch.nn.Module:
    _no_randomness(config)
    torch.manual_seed(SEED)
    model = cls(config)
    # Dropout layers whose probability is not in the config.
    for mod in model.modules():
        if isinstance(mod, torch.nn.modules.dropout._DropoutNd):
            mod.p = 0.0
    return model.float()


def _gen(offset: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(SEED + 1 + offset)


def _ids(vocab=VOCAB, batch=BATCH, seq=SEQ, offset=0, low=3):
    return torch.randint(low, vocab, (batch, seq), generator=_gen(offset))


def _padded_mask(batch=BATCH, seq=SEQ, pad=2, left=False):
    """All ones except `pad` padding positions in the last row."""
    mask = torch.ones(batch, seq, dtype=torch.long)
    if left:
        mask[-1, :pad] = 0
    else:
        mask[-1, seq - pad:] = 0
    return mask


def _lm_labels(ids, mask):
    return ids.masked_fill(mask == 0, -100)


def _decoder_only(cls_name: str, config_name: str, **cfg) -> Callable[[], Case]:
    def build() -> Case:
        import transformers
        config = getattr(transformers, config_name)(**cfg)
        model = _make(getattr(transformers, cls_name), config)
        ids, mask = _ids(), _padded_mask()
        left = _padded_mask(left=True)
        gen = dict(input_ids=ids.masked_fill(left == 0, 0), attention_mask=left,
                   max_new_tokens=8, min_new_tokens=8, do_sample=False, num_beams=1,
                   pad_token_id=0, use_cache=True)
        return Case(model, dict(input_ids=ids, attention_mask=mask),
                    dict(input_ids=ids, attention_mask=mask, labels=_lm_labels(ids, mask)),
                    generate_inputs=gen)
    return build


_LLAMA_LIKE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64)


_DEEPSEEK = dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                 first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                 n_group=1, topk_group=1, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32,
                 kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, vocab_size=VOCAB,
                 max_position_embeddings=64)


def _text_encoder(cls_name: str, config_name: str, **cfg) -> Callable[[], Case]:
    """Masked LM: every third real token is a target."""
    def build() -> Case:
        import transformers
        base = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64, pad_token_id=0)
        base.update(cfg)
        model = _make(getattr(transformers, cls_name), getattr(transformers, config_name)(**base))
        ids, mask = _ids(), _padded_mask()
        labels = _lm_labels(ids, mask)
        labels[:, 1::3] = -100
        labels[:, 2::3] = -100
        return Case(model, dict(input_ids=ids, attention_mask=mask),
                    dict(input_ids=ids, attention_mask=mask, labels=labels))
    return build


def _seq2seq_t5(cls_name: str, config_name: str) -> Callable[[], Case]:
    def build() -> Case:
        import transformers
        config = getattr(transformers, config_name)(
            vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
            num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
            decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        model = _make(getattr(transformers, cls_name), config)
        ids, mask = _ids(), _padded_mask()
        labels = _ids(offset=1)[:, :6].contiguous()
        decoder_ids = model._shift_right(labels)
        return Case(model, dict(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids),
                    dict(input_ids=ids, attention_mask=mask, labels=labels),
                    generate_inputs=dict(input_ids=ids, attention_mask=mask, max_new_tokens=8,
                                         min_new_tokens=8, do_sample=False, num_beams=1))
    return build


def _whisper() -> Case:
    from transformers import WhisperConfig, WhisperForConditionalGeneration
    config = WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=16, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_source_positions=16, max_target_positions=32, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, decoder_start_token_id=1, suppress_tokens=None, begin_suppress_tokens=None)
    model = _make(WhisperForConditionalGeneration, config)
    features = torch.randn(BATCH, 16, 32, generator=_gen())
    labels = _ids(offset=1)[:, :6].contiguous()
    decoder_ids = torch.cat([torch.ones(BATCH, 1, dtype=torch.long), labels[:, :-1]], dim=1)
    return Case(model, dict(input_features=features, decoder_input_ids=decoder_ids),
                dict(input_features=features, labels=labels),
                generate_inputs=dict(input_features=features, max_new_tokens=8, min_new_tokens=8,
                                     do_sample=False, num_beams=1))


def _ctc(cls_name: str, config_name: str) -> Callable[[], Case]:
    def build() -> Case:
        import transformers
        config = getattr(transformers, config_name)(
            vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=8,
            num_conv_pos_embedding_groups=4, pad_token_id=0, ctc_loss_reduction="mean")
        model = _make(getattr(transformers, cls_name), config)
        audio = torch.randn(BATCH, 400, generator=_gen())
        labels = torch.randint(1, 32, (BATCH, 5), generator=_gen(1))
        labels[-1, 3:] = -100
        return Case(model, dict(input_values=audio), dict(input_values=audio, labels=labels))
    return build


def _image_classifier(cls_name: str, config_name: str, **cfg) -> Callable[[], Case]:
    def build() -> Case:
        import transformers
        model = _make(getattr(transformers, cls_name), getattr(transformers, config_name)(num_labels=3, **cfg))
        pixels = torch.randn(BATCH, 3, IMAGE, IMAGE, generator=_gen())
        labels = torch.tensor([0, 2])
        return Case(model, dict(pixel_values=pixels), dict(pixel_values=pixels, labels=labels))
    return build


_VIT_LIKE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 image_size=IMAGE, patch_size=8)


def _contrastive(cls_name: str, config_name: str) -> Callable[[], Case]:
    def build() -> Case:
        import transformers
        text = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=SEQ)
        vision = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                      image_size=IMAGE, patch_size=8)
        kwargs = dict(text_config=text, vision_config=vision)
        if config_name == "CLIPConfig":
            kwargs["projection_dim"] = 32
            text.update(bos_token_id=1, eos_token_id=2, pad_token_id=0)
        model = _make(getattr(transformers, cls_name), getattr(transformers, config_name)(**kwargs))
        ids = _ids()
        pixels = torch.randn(BATCH, 3, IMAGE, IMAGE, generator=_gen(1))
        inputs = dict(input_ids=ids, pixel_values=pixels)
        return Case(model, inputs, dict(inputs, return_loss=True))
    return build


def _detr() -> Case:
    from transformers import DetrConfig, DetrForObjectDetection, ResNetConfig
    backbone = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
                            out_features=["stage2"])
    config = DetrConfig(use_timm_backbone=False, use_pretrained_backbone=False, backbone_config=backbone,
                        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=8,
                        num_labels=3)
    model = _make(DetrForObjectDetection, config)
    pixels = torch.randn(BATCH, 3, 64, 64, generator=_gen())
    mask = torch.ones(BATCH, 64, 64, dtype=torch.long)
    mask[-1, :, 48:] = 0
    inputs = dict(pixel_values=pixels, pixel_mask=mask)

    def loss(out):
        # DETR's own loss matches predictions to targets with scipy's Hungarian
        # solver (not a dependency here); this loss reaches every output instead.
        return out.logits.log_softmax(-1).mean() + out.pred_boxes.square().mean()

    return Case(model, inputs, inputs, loss=loss)


FAMILIES: List[Family] = [
    # LLMs (decoder-only)
    Family("qwen3", "llm", _decoder_only("Qwen3ForCausalLM", "Qwen3Config", head_dim=16, **_LLAMA_LIKE)),
    Family("qwen2", "llm", _decoder_only("Qwen2ForCausalLM", "Qwen2Config", **_LLAMA_LIKE)),
    # The default experts implementation (grouped_mm, which transformers picks
    # for any tpu tensor), and the per-expert loop ("eager").
    Family("deepseek_v3", "llm", _decoder_only("DeepseekV3ForCausalLM", "DeepseekV3Config", **_DEEPSEEK)),
    Family("deepseek_v3_eager", "llm", _decoder_only("DeepseekV3ForCausalLM", "DeepseekV3Config",
                                                     experts_implementation="eager", **_DEEPSEEK)),
    Family("gemma3", "llm", _decoder_only("Gemma3ForCausalLM", "Gemma3TextConfig", head_dim=16,
                                          sliding_window=4, **_LLAMA_LIKE)),
    Family("gemma2", "llm", _decoder_only("Gemma2ForCausalLM", "Gemma2Config", head_dim=16,
                                          sliding_window=4, **_LLAMA_LIKE)),
    Family("gemma", "llm", _decoder_only("GemmaForCausalLM", "GemmaConfig", head_dim=16, **_LLAMA_LIKE)),
    Family("llama", "llm", _decoder_only("LlamaForCausalLM", "LlamaConfig", **_LLAMA_LIKE),
           generate=True),
    Family("mistral", "llm", _decoder_only("MistralForCausalLM", "MistralConfig", **_LLAMA_LIKE)),
    Family("gpt2", "llm", _decoder_only("GPT2LMHeadModel", "GPT2Config", n_embd=64, n_layer=2, n_head=4,
                                        n_positions=64, vocab_size=VOCAB, bos_token_id=1,
                                        eos_token_id=2), generate=True),
    Family("opt", "llm", _decoder_only("OPTForCausalLM", "OPTConfig", hidden_size=64, num_hidden_layers=2,
                                       ffn_dim=128, num_attention_heads=4, vocab_size=VOCAB,
                                       max_position_embeddings=64, word_embed_proj_dim=64)),
    Family("bloom", "llm", _decoder_only("BloomForCausalLM", "BloomConfig", hidden_size=64, n_layer=2,
                                         n_head=4, vocab_size=VOCAB)),
    Family("falcon", "llm", _decoder_only("FalconForCausalLM", "FalconConfig", hidden_size=64,
                                          num_hidden_layers=2, num_attention_heads=4, vocab_size=VOCAB)),
    Family("stablelm", "llm", _decoder_only("StableLmForCausalLM", "StableLmConfig", **_LLAMA_LIKE)),
    # Speech
    Family("whisper", "speech", _whisper, generate=True),
    Family("wav2vec2", "speech", _ctc("Wav2Vec2ForCTC", "Wav2Vec2Config")),
    Family("hubert", "speech", _ctc("HubertForCTC", "HubertConfig")),
    # Vision
    Family("dinov2", "vision", _image_classifier("Dinov2ForImageClassification", "Dinov2Config", **_VIT_LIKE)),
    Family("siglip", "vision", _contrastive("SiglipModel", "SiglipConfig")),
    Family("clip", "vision", _contrastive("CLIPModel", "CLIPConfig")),
    Family("swin", "vision", _image_classifier(
        "SwinForImageClassification", "SwinConfig", image_size=IMAGE, patch_size=4, embed_dim=16,
        depths=[1, 1], num_heads=[2, 2], window_size=4)),
    Family("convnext", "vision", _image_classifier(
        "ConvNextForImageClassification", "ConvNextConfig", image_size=IMAGE, num_stages=2,
        hidden_sizes=[16, 32], depths=[1, 1])),
    Family("vit", "vision", _image_classifier("ViTForImageClassification", "ViTConfig", **_VIT_LIKE)),
    Family("resnet", "vision", _image_classifier(
        "ResNetForImageClassification", "ResNetConfig", embedding_size=16, hidden_sizes=[16, 32],
        depths=[1, 1], layer_type="basic")),
    Family("detr", "vision", _detr),
    # Text encoders (and encoder-decoders)
    Family("bert", "text", _text_encoder("BertForMaskedLM", "BertConfig")),
    Family("albert", "text", _text_encoder("AlbertForMaskedLM", "AlbertConfig", embedding_size=16)),
    Family("electra", "text", _text_encoder("ElectraForMaskedLM", "ElectraConfig", embedding_size=16)),
    Family("roberta", "text", _text_encoder("RobertaForMaskedLM", "RobertaConfig", pad_token_id=1)),
    Family("deberta_v2", "text", _text_encoder("DebertaV2ForMaskedLM", "DebertaV2Config",
                                               relative_attention=True, position_buckets=8,
                                               pos_att_type=["p2c", "c2p"])),
    Family("t5", "text", _seq2seq_t5("T5ForConditionalGeneration", "T5Config"), generate=True),
    Family("mt5", "text", _seq2seq_t5("MT5ForConditionalGeneration", "MT5Config")),
]
FAMILY_NAMES = [f.name for f in FAMILIES]
GROUPS = ("llm", "speech", "vision", "text")


def get_family(name: str) -> Family:
    for f in FAMILIES:
        if f.name == name:
            return f
    raise KeyError(f"unknown family {name!r}; known: {', '.join(FAMILY_NAMES)}")


# ---------------------------------------------------------------- comparing --

class Mismatch(AssertionError):
    pass


def _to(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to(v, device) for v in obj)
    return obj


def _tensors(obj, prefix: str) -> Dict[str, torch.Tensor]:
    """The tensors of a model output, by path (caches and other objects skipped)."""
    found: Dict[str, torch.Tensor] = {}
    if isinstance(obj, torch.Tensor):
        found[prefix] = obj
    elif isinstance(obj, dict):  # ModelOutput is an OrderedDict
        for k, v in obj.items():
            found.update(_tensors(v, f"{prefix}.{k}" if prefix else k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found.update(_tensors(v, f"{prefix}[{i}]"))
    return found


def relative_error(actual: torch.Tensor, expected: torch.Tensor, floor: float = 0.0) -> float:
    """max |actual - expected| / max(max |expected|, floor) (0 for equal tensors).

    `floor` keeps a tensor that is zero up to rounding (e.g. the gradient of an
    attention key bias, which softmax cancels exactly) from being compared on
    the scale of its rounding noise."""
    a = actual.detach().cpu().double()
    e = expected.detach().double()
    if a.numel() == 0:
        return 0.0
    both_nonfinite = ~torch.isfinite(e) & (a == e)
    diff = (a - e).abs().masked_fill(both_nonfinite, 0)
    if not torch.isfinite(diff).all():
        return float("inf")
    scale = e.masked_fill(~torch.isfinite(e), 0).abs().max().item()
    err = diff.max().item()
    return 0.0 if err == 0 else err / max(scale, floor, 1e-30)


class Comparer:
    def __init__(self):
        self.worst = 0.0

    def tensor(self, what: str, actual, expected, rtol: float, floor: float = 0.0) -> None:
        if actual is None or expected is None:
            if (actual is None) != (expected is None):
                raise Mismatch(f"{what}: tpu {'None' if actual is None else 'tensor'}, "
                               f"cpu {'None' if expected is None else 'tensor'}")
            return
        if actual.device.type != "tpu":
            raise Mismatch(f"{what}: on {actual.device}, not on tpu")
        if tuple(actual.shape) != tuple(expected.shape) or actual.dtype != expected.dtype:
            raise Mismatch(f"{what}: tpu {tuple(actual.shape)} {actual.dtype}, "
                           f"cpu {tuple(expected.shape)} {expected.dtype}")
        if not (actual.is_floating_point() or actual.is_complex()):
            if not torch.equal(actual.cpu(), expected):
                raise Mismatch(f"{what}: integer values differ")
            return
        err = relative_error(actual, expected, floor)
        self.worst = max(self.worst, err)
        if not err <= rtol:
            raise Mismatch(f"{what}: relative error {err:.3g} > {rtol:g}")

    def outputs(self, what: str, actual, expected, rtol: float) -> None:
        a, e = _tensors(actual, ""), _tensors(expected, "")
        if sorted(a) != sorted(e):
            raise Mismatch(f"{what}: outputs differ: tpu {sorted(a)}, cpu {sorted(e)}")
        if not e:
            raise Mismatch(f"{what}: no tensor output to compare")
        for k in e:
            self.tensor(f"{what} {k}", a[k], e[k], rtol)


# ------------------------------------------------------------------ checking --

@dataclasses.dataclass
class Reference:
    """What the CPU model computed, and the initial model to copy to tpu."""
    case: Case
    initial: torch.nn.Module
    forward: Any
    loss: Optional[torch.Tensor]  # None (and no grads) for an inference family
    grads: Dict[str, Optional[torch.Tensor]]
    params: Dict[str, torch.Tensor]
    buffers: Dict[str, torch.Tensor]
    generated: Optional[torch.Tensor]


class StageError(Exception):
    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"{stage}: {type(error).__name__}: {_first_line(error)}")
        self.stage = stage
        self.error = error


_NOT_IMPLEMENTED = re.compile(r"The operator '([^']+)' is not implemented for the tpu device")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    missing = _NOT_IMPLEMENTED.search(text)
    if missing:  # the rest of torch_tpu's message is advice on the CPU fallback
        return f"{missing.group(1)} is not implemented for tpu"
    line = text.splitlines()[0] if text else "(no message)"
    # TorchDynamo's first line is generic; the error that caused it follows.
    if type(error).__module__.startswith("torch._dynamo"):
        got = re.search(r"got (\w+(?:Error|Exception))\((['\"])(.*?)\2\)", text)
        cause = error.__cause__ or error.__context__
        if got:
            line += f" ({got.group(1)}: {got.group(3)})"
        elif cause is not None:
            line += f" ({type(cause).__name__}: {_first_line(cause)})"
    return line


@contextlib.contextmanager
def _stage(name: str):
    try:
        yield
    except StageError:
        raise
    except Exception as e:  # noqa: BLE001 -- recorded in the report
        raise StageError(name, e) from e


_FALLBACK = re.compile(r"The operator '([^']+)' has no tpu lowering and runs on the CPU")
# Ops that ran on the CPU through torch_tpu's CPU fallback (--cpu-fallback);
# torch_tpu warns once per op and process, so each is seen once.
_fallback_ops: List[str] = []


@contextlib.contextmanager
def _quiet():
    """Silences warnings (keeping note of CPU-fallback ones)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for w in caught:
                m = _FALLBACK.search(str(w.message))
                if m and m.group(1) not in _fallback_ops:
                    _fallback_ops.append(m.group(1))


def _train_step(model, call, case: Case):
    opt = torch.optim.SGD(model.parameters(), **SGD)
    opt.zero_grad(set_to_none=True)
    out = call(**case.train_inputs)
    loss = case.loss(out)
    loss.backward()
    return opt, loss


def family_generates(family: Family) -> bool:
    """Whether the family has a generation check."""
    return family.generate


def _generate_reference(ref: Reference) -> torch.Tensor:
    with _quiet():
        model = copy.deepcopy(ref.initial).eval()
        return model.generate(**ref.case.generate_inputs)


def reference(family: Family, generate: bool = True) -> Reference:
    """Builds the family's model and runs it on the CPU (generation too
    unless `generate` is False; check() then runs it when needed)."""
    with _quiet():
        case = family.build()
        model = case.model
        initial = copy.deepcopy(model)
        model.eval()
        with torch.no_grad():
            forward = model(**case.forward_inputs)
        loss, grads = None, {}
        if family.train:
            model.train()
            opt, loss = _train_step(model, model, case)
            grads = {n: (None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()}
            opt.step()
            loss = loss.detach()
        params = {n: p.detach().clone() for n, p in model.named_parameters()}
        buffers = {n: b.clone() for n, b in model.named_buffers()}
    ref = Reference(case, initial, forward, loss, grads, params, buffers, None)
    if generate and case.generate_inputs is not None:
        ref.generated = _generate_reference(ref)
    return ref


def shared_parameters(model: torch.nn.Module) -> List[Tuple[str, ...]]:
    """Groups of names that refer to one Parameter (tied weights)."""
    groups: Dict[int, List[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(name)
    return sorted(tuple(g) for g in groups.values() if len(g) > 1)


def to_tpu(initial: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of `initial` on tpu, with the same tied weights.

    ``nn.Module.to("tpu")`` converts parameters in place, as for CUDA
    (torch_tpu answers ``torch._has_compatible_shallow_copy_type(cpu, tpu)``
    with True), so shared parameters stay shared; a model that ties by
    other means is tied again with ``model.tie_weights()`` as transformers'
    Trainer does. The "tied-weights" row checks the conversion itself.
    """
    expected = shared_parameters(initial)
    model = copy.deepcopy(initial).to("tpu")
    if shared_parameters(model) != expected and hasattr(model, "tie_weights"):
        model.tie_weights()
    got = shared_parameters(model)
    if got != expected:
        raise Mismatch(f"tied parameters differ after .to('tpu'): tpu {got}, cpu {expected}")
    return model


def check(family: Family, mode: Mode, ref: Optional[Reference] = None, train: bool = True,
          generate: bool = True) -> float:
    """Runs the family on tpu in `mode` and compares with the CPU: forward,
    then (`train`) the training step, then (`generate`, where the family has
    it) generation. Raises StageError ("stage: first error") on the first
    failure; returns the worst relative error seen."""
    generate = generate and family_generates(family)
    if ref is None:
        with _stage("cpu reference"):
            ref = reference(family, generate=generate)
    case = ref.case
    cmp = Comparer()
    with _quiet(), mode.context(), highest_precision():
        if train:
            with _stage("to tpu"):
                model = to_tpu(ref.initial)
                call = mode.wrap(model)
            with _stage("forward"):
                model.eval()
                with torch.no_grad():
                    out = call(**_to(case.forward_inputs, "tpu"))
                if case.align is not None:
                    out = case.align(out, ref.forward)
                cmp.outputs("output", out, ref.forward, FORWARD_RTOL)
                del out
        if train and family.train:
            with _stage("train"):
                model.train()
                tpu_case = dataclasses.replace(case, train_inputs=_to(case.train_inputs, "tpu"))
                opt, loss = _train_step(model, call, tpu_case)
                cmp.tensor("loss", loss.detach(), ref.loss, LOSS_RTOL)
                floor = GRAD_FLOOR * max((g.abs().max().item() for g in ref.grads.values()
                                          if g is not None and g.numel()), default=0.0)
                for n, p in model.named_parameters():
                    cmp.tensor(f"grad of {n}", p.grad, ref.grads[n], GRAD_RTOL, floor)
            with _stage("optimizer step"):
                opt.step()
                floor = PARAM_FLOOR * max((p.abs().max().item() for p in ref.params.values() if p.numel()),
                                          default=0.0)
                for n, p in model.named_parameters():
                    cmp.tensor(f"{n} after step", p.detach(), ref.params[n], PARAM_RTOL, floor)
                for n, b in model.named_buffers():
                    cmp.tensor(f"buffer {n} after step", b, ref.buffers[n], PARAM_RTOL)
            del model, call, opt
        if generate:
            with _stage("generate"):
                if ref.generated is None:
                    ref.generated = _generate_reference(ref)
                gen_model = to_tpu(ref.initial).eval()
                tokens = gen_model.generate(**_to(case.generate_inputs, "tpu"), **mode.generate_kwargs)
                tokens = tokens.cpu()
                expected = ref.generated
                if not torch.equal(tokens, expected) and mode.generate_kwargs:
                    # The mode generates another way (a static cache), which
                    # some models compute differently from their dynamic
                    # cache on the CPU too: the CPU the same way is the
                    # reference then.
                    with _quiet(), torch.no_grad():
                        expected = copy.deepcopy(ref.initial).eval().generate(
                            **case.generate_inputs, **mode.generate_kwargs, disable_compile=True)
                if not torch.equal(tokens, expected):
                    raise Mismatch(f"generated tokens differ: tpu {tokens.tolist()}, "
                                   f"cpu {expected.tolist()}")
    return cmp.worst


# ------------------------------------------------- transformers integration --

def check_tied_weights() -> str:
    """``nn.Module.to("tpu")`` keeps tied weights tied (GPT-2's lm_head and
    token embedding are one Parameter)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    with _quiet():
        model = _make(GPT2LMHeadModel, GPT2Config(n_embd=16, n_layer=1, n_head=2, n_positions=16,
                                                  vocab_size=32, bos_token_id=1, eos_token_id=2))
    expected = shared_parameters(model)
    if not expected:
        raise Mismatch("the CPU model has no tied weights to check")
    model.to("tpu")
    got = shared_parameters(model)
    if got != expected:
        compatible = torch._has_compatible_shallow_copy_type(torch.zeros(1), torch.zeros(1, device="tpu"))
        raise Mismatch(
            f"Module.to('tpu') untied {expected} (torch._has_compatible_shallow_copy_type(cpu, tpu) is "
            f"{compatible}, so Module._apply makes a new Parameter per module)")
    return f"tied {expected[0]}"


def check_probe() -> str:
    """transformers' own tpu probe and the device TrainingArguments picks."""
    import tempfile
    from transformers import TrainingArguments
    from transformers.utils import import_utils
    probe = getattr(import_utils, "is_torch_tpu_available", None)
    if probe is None:
        raise Mismatch("this transformers has no is_torch_tpu_available() probe")
    if not probe():
        raise Mismatch("transformers.utils.is_torch_tpu_available() is False with torch_tpu loaded")
    with tempfile.TemporaryDirectory() as tmp, _quiet():
        args = TrainingArguments(output_dir=tmp, report_to="none")
        device = args.device
        accelerate_device = args.distributed_state.device
    if device.type != "tpu":
        raise Mismatch(f"TrainingArguments().device is {device}, not tpu")
    return (f"is_torch_tpu_available() True; TrainingArguments().device {device}; "
            f"accelerate PartialState().device {accelerate_device}")


class _TinyLMDataset(torch.utils.data.Dataset):
    def __init__(self, n=8):
        self.ids = torch.randint(3, VOCAB, (n, SEQ), generator=_gen(7))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return dict(input_ids=self.ids[i], attention_mask=torch.ones(SEQ, dtype=torch.long),
                    labels=self.ids[i])


def _trainer_run(use_cpu: bool, steps: int) -> Tuple[List[float], torch.nn.Module]:
    import tempfile
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments
    # Tied input and output embeddings, as in most small LLMs.
    model = _make(LlamaForCausalLM, LlamaConfig(tie_word_embeddings=True, **_LLAMA_LIKE))
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        # No device argument: Trainer picks the device itself (use_cpu for the reference).
        args = TrainingArguments(
            output_dir=tmp, use_cpu=use_cpu, max_steps=steps, per_device_train_batch_size=2,
            learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to="none",
            dataloader_num_workers=0, seed=SEED, disable_tqdm=True, lr_scheduler_type="constant")
        trainer = Trainer(model=model, args=args, train_dataset=_TinyLMDataset())
        trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return losses, trainer.model


def check_trainer(mode: Mode, steps: int = 3) -> float:
    """Trainer (AdamW) trains a tiny Llama with tied embeddings for a few
    steps on the device it picks itself; the losses logged must match a CPU
    Trainer run and the embeddings must still be tied."""
    with _quiet():
        with _stage("cpu reference"):
            expected, _ = _trainer_run(True, steps)
        with _stage("trainer"), mode.context(), highest_precision():
            actual, model = _trainer_run(False, steps)
    device = next(model.parameters()).device
    if device.type != "tpu":
        raise StageError("trainer", Mismatch(f"Trainer trained on {device}, not tpu"))
    if model.lm_head.weight is not model.model.embed_tokens.weight:
        raise StageError("trainer", Mismatch(
            "lm_head and embed_tokens untied on tpu (Trainer re-ties only for torch_xla; see tied-weights)"))
    if len(actual) != len(expected):
        raise StageError("trainer", Mismatch(f"{len(actual)} losses logged, cpu {len(expected)}"))
    worst = 0.0
    for i, (a, e) in enumerate(zip(actual, expected)):
        err = abs(float(a) - float(e)) / max(abs(float(e)), 1e-30)
        worst = max(worst, err)
        # Trainer logs losses rounded to 4 significant digits.
        if err > 1e-3:
            raise StageError("trainer", Mismatch(f"loss at step {i + 1}: tpu {a}, cpu {e}"))
    return worst


# ------------------------------------------------------------------- report --

@dataclasses.dataclass
class Row:
    name: str
    mode: str
    status: str  # "pass", "FAIL: ...", "skipped: ..."
    seconds: float = 0.0
    detail: str = ""

    @property
    def ran(self) -> bool:
        return not self.status.startswith("skipped")

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def line(self) -> str:
        extra = f"  ({self.detail})" if self.detail and self.passed else ""
        return f"{self.name:<18} {self.mode:<8} {self.status}{extra}"


def _run_row(name: str, mode: Mode, fn: Callable[[], Any], verbose: bool) -> Row:
    skip = mode.skip_reason()
    if skip:
        return Row(name, mode.name, f"skipped: {skip}")
    t0 = time.perf_counter()
    seen = len(_fallback_ops)
    try:
        result = fn()
        try:
            torch_tpu.synchronize()
        except Exception as e:  # noqa: BLE001
            raise StageError("synchronize", e) from e
        if isinstance(result, float):
            detail = f"max rel err {result:.1e}"
        else:
            detail = str(result or "")
        fell_back = _fallback_ops[seen:]
        if fell_back:
            # Everything compared equal, but not everything ran on tpu.
            row = Row(name, mode.name, f"FAIL: ran on the CPU (fallback; the rest matches): {', '.join(fell_back)}")
        else:
            row = Row(name, mode.name, "pass", detail=detail)
    except Exception as e:  # noqa: BLE001 -- every failure becomes a row
        if verbose:
            traceback.print_exc()
        msg = str(e) if isinstance(e, StageError) else f"{type(e).__name__}: {_first_line(e)}"
        if _fallback_ops[seen:]:
            msg += f" (after falling back to the CPU for {', '.join(_fallback_ops[seen:])})"
        row = Row(name, mode.name, f"FAIL: {msg}")
        # Leave no failed work behind for the next row.
        with contextlib.suppress(Exception):
            torch_tpu.synchronize()
    row.seconds = time.perf_counter() - t0
    if row.passed:
        row.detail = f"{row.detail}, {row.seconds:.1f} s" if row.detail else f"{row.seconds:.1f} s"
    return row


def run(families: List[Family], modes: List[Mode], integration: bool = True,
        verbose: bool = False, out=sys.stdout) -> List[Row]:
    rows: List[Row] = []
    t0 = time.perf_counter()

    def emit(row: Row):
        rows.append(row)
        print(row.line(), file=out, flush=True)

    for fam in families:
        ref: Optional[Reference] = None
        ref_error: Optional[StageError] = None
        for mode in modes:
            if ref is None and ref_error is None and mode.skip_reason() is None:
                try:
                    with _stage("cpu reference"):
                        ref = reference(fam, generate=fam.generate)
                except StageError as e:
                    ref_error = e
                    if verbose:
                        traceback.print_exc()

            def one(fam=fam, mode=mode):
                if ref_error is not None:
                    raise ref_error
                return check(fam, mode, ref)
            emit(_run_row(fam.name, mode, one, verbose))
    if integration:
        emit(_run_row("tied-weights", MODES[0], check_tied_weights, verbose))
        emit(_run_row("tpu-probe", MODES[0], check_probe, verbose))
        for mode in modes:
            if mode.name == "compile":
                continue  # Trainer compiles only when asked (torch_compile=True)
            emit(_run_row("trainer", mode, lambda mode=mode: check_trainer(mode), verbose))
    ran = [r for r in rows if r.ran]
    skipped = len(rows) - len(ran)
    print(f"time: {time.perf_counter() - t0:.0f} s" + (f"; skipped: {skipped} rows" if skipped else ""),
          file=out)
    print(f"models: {sum(r.passed for r in ran)}/{len(ran)} pass", file=out, flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m torch_tpu.tools.validate", description=__doc__.split("\n\n")[0])
    p.add_argument("--families", help=f"comma-separated subset of: {','.join(FAMILY_NAMES)}")
    p.add_argument("--group", choices=GROUPS, help="only this group of families")
    p.add_argument("--modes", help=f"comma-separated subset of: {','.join(MODE_NAMES)}")
    p.add_argument("--no-integration", action="store_true", help="skip the transformers probe and Trainer rows")
    p.add_argument("--cpu-fallback", action="store_true",
                   help="run ops without a tpu lowering on the CPU (torch_tpu.cpu_fallback_mode) to find every "
                        "missing op of a family and check the rest; rows that needed it still FAIL, naming the "
                        "ops (each op is named once per process, in the first row that needs it)")
    p.add_argument("--list", action="store_true", help="list families and modes, then exit")
    p.add_argument("-v", "--verbose", action="store_true", help="print the traceback of each failure")
    args = p.parse_args(argv)

    if args.list:
        for f in FAMILIES:
            print(f"{f.name:<18} {f.group}")
        for m in MODES:
            skip = m.skip_reason()
            print(f"mode {m.name:<8} {m.description}" + (f"  (skipped: {skip})" if skip else ""))
        return 0
    families = FAMILIES
    if args.families:
        families = [get_family(n.strip()) for n in args.families.split(",") if n.strip()]
    if args.group:
        families = [f for f in families if f.group == args.group]
    modes = MODES if not args.modes else [get_mode(n.strip()) for n in args.modes.split(",") if n.strip()]

    import transformers
    transformers.logging.set_verbosity_error()  # tiny configs trip advisory checks (token ids etc.)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"device {torch.tpu.get_device_name()}, precision HIGHEST", flush=True)
    with torch_tpu.cpu_fallback_mode(args.cpu_fallback):
        rows = run(families, modes, integration=not args.no_integration, verbose=args.verbose)
    return 0 if all(r.passed for r in rows if r.ran) else 1


if __name__ == "__main__":
    sys.exit(main())
