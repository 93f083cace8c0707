"""Sweeps over every architecture of an installed model library, built from
a shrunk default configuration with random weights, on CPU and on tpu.

    python -m torch_tpu.tools.sweep transformers [--kind causal-lm|base]
        [--modes strict,compile] [--only llama,mistral] [--limit N]
        [--timeout 300] [--jsonl results.jsonl]
    python -m torch_tpu.tools.sweep timm         (one model a family)
    python -m torch_tpu.tools.sweep torchvision [--kind classification|detection|segmentation]

Each architecture runs in a child process with a time limit: the model is
built on the CPU (seeded, dropout off), run forward and one training step
(loss, gradients, an SGD step) on the CPU, then the same on tpu in each mode
at HIGHEST matmul precision, compared with the tolerances of
``torch_tpu.tools.validate``. One line per architecture and mode, then a
summary: passed, failed (with the first error), skipped because the CPU
itself fails (or the architecture needs inputs the sweep does not make).

The shrinking is written once, for every configuration: depth to 2 layers,
widths to 64, 4 heads (2 key-value heads), 4 experts (2 per token), a small
vocabulary; lists with one entry per layer are cut to the new depth, and
sub-configurations (text, vision, ...) are shrunk the same way. A setting
the configuration class rejects is dropped and the model built again.

Base models are fed by their main input (tokens, images, raw audio or
log-mel features; see `input_candidates`).

Image models have no configuration to shrink: timm runs the smallest model
of each family (by parameter count, built on the meta device), torchvision
every classification model, both at 64x64 images (128, then the model's
own size, where the CPU refuses a smaller one), 10 classes, one training
step of the mean square of the logits, dropout and drop-path off.
torchvision's detection and segmentation models run their forward in eval
(batch norm calibrated on the input, every detection kept and matched to
the CPU's before comparing).
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import argparse  # noqa: E402
import collections  # noqa: E402
import copy  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any, Dict, List, Optional, Tuple  # noqa: E402

# Configuration attributes and the values they shrink to (only ever made
# smaller; an attribute a configuration lacks is left out).
DEPTH = 2
SHRINK: Dict[str, int] = {
    **{k: DEPTH for k in (
        "num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_decoder_layers",
        "num_encoder_layers", "encoder_layers", "decoder_layers", "num_blocks")},
    **{k: 64 for k in ("hidden_size", "n_embd", "d_model", "dim", "embed_dim", "model_dim",
                       "word_embed_proj_dim")},
    **{k: 128 for k in ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "encoder_ffn_dim",
                        "decoder_ffn_dim", "ffn_hidden_size", "mlp_dim")},
    **{k: 4 for k in ("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads",
                      "decoder_attention_heads", "num_heads")},
    **{k: 2 for k in ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num")},
    **{k: 16 for k in ("head_dim", "kv_channels", "d_kv", "attention_head_dim")},
    **{k: 4 for k in ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts",
                      "num_routed_experts")},
    **{k: 2 for k in ("num_experts_per_tok", "moe_topk", "num_selected_experts", "top_k_experts")},
    **{k: 32 for k in ("moe_intermediate_size", "shared_expert_intermediate_size",
                       "expert_intermediate_size")},
    # Expert groups of DeepSeek-style routers (experts per group must stay >= 1).
    "n_group": 1, "topk_group": 1,
    "rotary_dim": 8,
    # Multi-head latent attention.
    "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16, "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "vocab_size": 256,
    "max_position_embeddings": 128,
}
SEQ = 16
BATCH = 2
# Image models above this many parameters are skipped (--max-params).
IMAGE_MAX_PARAMS = 350_000_000


# Derived from other settings in these configurations (multi-head latent
# attention: head_dim is the rope part), so not shrunk on its own.
_DERIVED = {"head_dim": "qk_rope_head_dim"}


_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
              "sep_token_id", "cls_token_id", "mask_token_id", "unk_token_id")


def _get(config, key):
    """getattr that treats any error as a missing attribute (some configs
    raise their own errors for per-layer settings)."""
    try:
        return getattr(config, key)
    except Exception:  # noqa: BLE001
        return None


def _shrunk_kwargs(config_cls, drop=(), depth=DEPTH) -> Dict[str, Any]:
    """Keyword arguments that shrink `config_cls`'s default configuration to
    `depth` layers; lists with one entry per layer keep their first `depth`,
    lists of layer indices keep those below it (at least the last layer),
    and token ids stay inside the smaller vocabulary."""
    from transformers import PretrainedConfig

    default = config_cls()
    original = _depth(default)
    kwargs: Dict[str, Any] = {}
    for key, value in SHRINK.items():
        current = _get(default, key)
        if key in drop or current is None:
            continue
        if key in _DERIVED and _get(default, _DERIVED[key]) is not None:
            continue
        if value == DEPTH:
            value = depth
        if isinstance(current, int) and not isinstance(current, bool) and current > value:
            kwargs[key] = value
    # Named variants of the same widths (vocab_size_per_layer_input,
    # hidden_size_per_layer_input, text_intermediate_size, ...).
    for key, current in vars(default).items():
        if key in drop or key in kwargs or isinstance(current, bool) or not isinstance(current, int):
            continue
        for part, value in (("vocab_size", SHRINK["vocab_size"]), ("hidden_size", 64),
                            ("intermediate_size", 128)):
            if part in key and current > value:
                kwargs[key] = value
                break
    vocab = kwargs.get("vocab_size")
    for i, key in enumerate(k for k in _TOKEN_IDS if k not in drop):
        current = _get(default, key)
        if vocab and isinstance(current, int) and current >= vocab:
            kwargs[key] = i
        elif vocab and isinstance(current, list) and any(t >= vocab for t in current):
            kwargs[key] = [i]
    for key, value in vars(default).items():
        if key in drop:
            continue
        if isinstance(value, PretrainedConfig):
            sub = _shrunk_kwargs(type(value), drop, depth)
            if sub:  # passed through the config's dict form only when something shrinks
                kwargs[key] = dict(value.to_dict(), **sub)
        elif isinstance(value, list) and original and original > depth:
            if len(value) == original:
                kwargs[key] = value[:depth]
            elif ("layer" in key or "idx" in key) and value and all(
                    isinstance(v, int) and not isinstance(v, bool) and 0 <= v < original
                    for v in value):
                kwargs[key] = [v for v in value if v < depth] or [depth - 1]
    return kwargs


def _depth(config) -> Optional[int]:
    for key in ("num_hidden_layers", "n_layer", "n_layers", "num_layers"):
        value = _get(config, key)
        if isinstance(value, int):
            return value
    return None


def shrunk_config(config_cls, depth=DEPTH):
    """The shrunk configuration; settings the class refuses are dropped, one
    at a time, until it builds."""
    dropped: List[str] = []
    last: Optional[BaseException] = None
    for _ in range(len(SHRINK) + 1):
        kwargs = _shrunk_kwargs(config_cls, dropped, depth)
        try:
            return config_cls(**kwargs), dropped
        except Exception as e:  # noqa: BLE001 - a refused setting: try without it
            last = e
            bad = next((k for k in kwargs if k not in dropped and k in str(e)), None)
            if bad is None:
                bad = next((k for k in kwargs if k not in dropped), None)
            if bad is None:
                break
            dropped.append(bad)
    raise RuntimeError(f"cannot shrink {config_cls.__name__}: {last}")


def architectures(kind: str, library: str = "transformers") -> List[Tuple[str, str, str]]:
    """(name, and two library-specific fields) of every architecture of the
    installed library: for transformers (model type, config class, model
    class) of this kind; for timm each family (module); for torchvision each
    classification model."""
    if library == "timm":
        import timm

        return [(m, m, "") for m in sorted(timm.list_modules()) if timm.list_models(module=m)]
    if library == "torchvision":
        import torchvision

        module = getattr(torchvision.models, kind) if kind in TORCHVISION_INFERENCE else torchvision.models
        return [(m, m, "") for m in sorted(torchvision.models.list_models(module=module))]
    from transformers.models.auto import configuration_auto, modeling_auto

    mapping = {"causal-lm": modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
               "base": modeling_auto.MODEL_MAPPING_NAMES}[kind]
    configs = configuration_auto.CONFIG_MAPPING_NAMES
    out = []
    for model_type, cls in mapping.items():
        if isinstance(cls, (list, tuple)):
            cls = cls[0]
        if model_type in configs:
            out.append((model_type, configs[model_type], cls))
    return sorted(out)


def _randomize_zero_matrices(model) -> None:
    """Weight matrices a model initializes to zero (MoE router gates, the
    classifier heads of ViTs) get small random values: a zero router makes
    every expert score equal, and top-k of equal values comes in an order
    PyTorch leaves unspecified (CPU's from std::nth_element); a zero head
    makes the logits, the loss and every gradient zero, checking nothing."""
    import torch

    from . import validate as V

    g = V._gen(99)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.is_floating_point() and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)


class NotApplicable(Exception):
    """The sweep cannot build or feed this architecture (not a tpu failure)."""


def _setting(config, *keys, default=None):
    """The first of `keys` set to an int on the config or on its vision /
    audio / encoder sub-configuration (an [h, w] pair gives h)."""
    for c in (config, *(_get(config, f"{k}_config") for k in ("vision", "audio", "encoder", "backbone"))):
        for k in keys:
            v = _get(c, k) if c is not None else None
            if isinstance(v, (list, tuple)) and v and isinstance(v[0], int):
                v = v[0]
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    return default


def input_candidates(model, config) -> List[Dict[str, Any]]:
    """Inputs to feed a base model, by its `main_input_name`: tokens (then
    tokens with images, for text-image models that need both); images (the
    configuration's size, then 64 and 224 px); raw audio (a batch of 4000
    samples, also with a channel dim for codecs), then a spectrogram of the
    configuration's `(max_length, num_mel_bins)`; log-mel features (length
    twice the encoder's positions, Whisper's rule, then 64 frames in either
    layout). An encoder-decoder model also gets decoder tokens, a model that
    requires other tokens (`*input_ids`) gets them, and a model whose forward
    takes `<main input>_mask` a mask of ones. The sweep uses the
    first candidate the CPU runs."""
    import inspect

    import torch

    from . import validate as V

    params = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    vocab = getattr(config, "vocab_size", None) or getattr(
        getattr(config, "text_config", None), "vocab_size", None) or 256
    ids = torch.randint(3, min(int(vocab), 256), (BATCH, SEQ), generator=V._gen())
    extra: Dict[str, Any] = {}
    if "decoder_input_ids" in params and _get(config, "is_encoder_decoder"):
        extra["decoder_input_ids"] = ids[:, : SEQ // 2].clone()
    g = V._gen(1)
    channels = _setting(config, "num_channels", default=3)
    sizes = list(dict.fromkeys(s for s in (_setting(config, "image_size"), 64, 224) if s))

    def images(size):
        return torch.randn(BATCH, channels, size, size, generator=g)

    # Tokens a model needs beside its main input (BLIP-2's `input_ids`,
    # InstructBLIP's `qformer_input_ids`), with their masks.
    for name, p in params.items():
        if name.endswith("input_ids") and name != main and p.default is inspect.Parameter.empty:
            extra[name] = ids
            mask = name.replace("input_ids", "attention_mask")
            if mask in params:
                extra[mask] = torch.ones(BATCH, SEQ, dtype=torch.long)

    def fed(name, value):
        inputs = {name: value, **extra}
        if f"{name}_mask" in params:
            inputs[f"{name}_mask"] = torch.ones(BATCH, value.shape[-1], dtype=torch.long)
        return inputs

    if main == "input_ids":
        text = dict(input_ids=ids)
        if "attention_mask" in params:
            text["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
        with_images = [dict(text, pixel_values=images(s)) for s in sizes] if "pixel_values" in params else []
        return [dict(text, **extra)] + [dict(c, **extra) for c in with_images]
    if main == "pixel_values":
        return [fed("pixel_values", images(s)) for s in sizes]
    if main == "input_values":
        shapes = [(BATCH, 4000), (BATCH, 1, 4000)]
        bins = _setting(config, "num_mel_bins")
        if bins:
            shapes.append((BATCH, _setting(config, "max_length", default=64), bins))
        return [fed("input_values", torch.randn(shape, generator=g)) for shape in shapes]
    if main == "input_features":
        f = _setting(config, "num_mel_bins", "feature_size", "input_feat_per_channel", "n_mels", default=80)
        t = 2 * _setting(config, "max_source_positions", default=32)
        shapes = dict.fromkeys(((BATCH, f, t), (BATCH, 64, f), (BATCH, f, 64)))
        return [fed("input_features", torch.randn(shape, generator=g)) for shape in shapes]
    raise NotApplicable(f"inputs are {main}: not made by the sweep")


class _NoMoreInputs(Exception):
    """Every input candidate of the model has been tried."""


def build_case(kind: str, config_name: str, model_name: str, depth: int = DEPTH,
               variant: int = 0):
    """The validate.Case of one architecture: a shrunk model on the CPU and
    its inputs (a causal LM trains on its own tokens; a base model on the
    mean square of its first floating output, fed the `variant`th of
    `input_candidates`)."""
    import torch
    import transformers

    from . import validate as V

    config_cls = getattr(transformers, config_name)
    model_cls = getattr(transformers, model_name, None)
    if model_cls is None:
        raise NotApplicable(f"transformers has no {model_name}")
    config, dropped = shrunk_config(config_cls, depth)
    try:
        model = V._make(model_cls, config)
    except Exception as e:  # noqa: BLE001
        raise NotApplicable(f"building {model_name} on the CPU failed: {V._first_line(e)}") from e
    _randomize_zero_matrices(model)
    n = sum(p.numel() for p in model.parameters())
    if n > 30_000_000:
        raise NotApplicable(f"{n / 1e6:.0f}M parameters after shrinking")
    if kind == "causal-lm":
        if getattr(model, "main_input_name", "input_ids") != "input_ids":
            raise NotApplicable(f"inputs are {model.main_input_name}, not tokens")
        inputs = input_candidates(model, config)[0]
        ids = inputs["input_ids"]
        inputs["attention_mask"] = torch.ones_like(ids)
        prompt = dict(input_ids=ids[:1, :8], attention_mask=inputs["attention_mask"][:1, :8])
        return V.Case(model, inputs, dict(inputs, labels=ids),
                      generate_inputs=dict(prompt, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                                           num_beams=1)), dropped
    candidates = input_candidates(model, config)
    if variant >= len(candidates):
        raise _NoMoreInputs()
    inputs = candidates[variant]
    return V.Case(model, inputs, inputs, loss=first_output_loss), dropped


def first_output_loss(out):
    """The loss of a model without one: the mean square of its first
    floating-point output (a codec's first output may be integer codes)."""
    from . import validate as V

    t = next((t for t in V._tensors(out, "").values() if t.is_floating_point()), None)
    if t is None:
        raise NotApplicable("no floating-point output to train on")
    return t.float().pow(2).mean()


IMAGE_SIZES = (64, 128, None)  # None: the model's own input size
NUM_CLASSES = 10
# torchvision's model kinds checked in eval only (forward), beside the
# classifiers' training step: detectors (boxes, scores, labels after nms)
# and segmenters.
TORCHVISION_INFERENCE = ("detection", "segmentation")


def _no_dropout(model) -> None:
    """Dropout, drop-path and stochastic depth off: the CPU and tpu draw
    different random numbers."""
    for m in model.modules():
        name = type(m).__name__
        if "Dropout" in name or "DropPath" in name or "StochasticDepth" in name or "DropBlock" in name:
            for attr in ("p", "drop_prob"):
                if isinstance(getattr(m, attr, None), float):
                    setattr(m, attr, 0.0)


@functools.lru_cache(maxsize=None)
def _timm_smallest(family: str) -> str:
    """The family's model with the fewest parameters (built on meta; once,
    whatever the image sizes tried)."""
    import timm
    import torch

    best: Optional[Tuple[int, str]] = None
    for name in timm.list_models(module=family):
        try:
            with torch.device("meta"):
                m = timm.create_model(name, pretrained=False, num_classes=NUM_CLASSES)
            n = sum(p.numel() for p in m.parameters())
        except Exception:  # noqa: BLE001 - a model meta cannot build
            continue
        if best is None or n < best[0]:
            best = (n, name)
    if best is None:
        raise NotApplicable(f"no model of {family} builds")
    return best[1]


def _first_that_builds(build, size_kwargs):
    """build(**kw) for the first image-size keyword the model takes (a
    TypeError: it has no such argument), else with none."""
    for kw in size_kwargs:
        try:
            return build(**kw)
        except TypeError:
            continue
    return build()


def _build_image_model(library: str, name: str, size: Optional[int], kind: str = "classification"):
    """(model, its input size) at `size` (None: the model's own)."""
    if library == "timm":
        import timm

        model = _first_that_builds(
            lambda **kw: timm.create_model(name, pretrained=False, num_classes=NUM_CLASSES, **kw),
            [dict(img_size=size)] if size else [])
        own = model.pretrained_cfg.get("input_size", (3, 224, 224))[-1]
        return model, size or own
    import torchvision

    if kind in TORCHVISION_INFERENCE:
        # Detectors resize their input to min_size/max_size (800/1333 by
        # default): both follow the image size tried; and every box is kept
        # whatever its score (random heads score below the default 0.05:
        # no detections would be compared).
        model = _first_that_builds(
            lambda **kw: torchvision.models.get_model(name, weights=None, weights_backbone=None,
                                                      num_classes=NUM_CLASSES, **kw),
            [dict(min_size=size, max_size=size)] if size and kind == "detection" else [])
        for m in model.modules():
            if isinstance(getattr(m, "score_thresh", None), float):
                m.score_thresh = 0.0
        _torchvision_cpu_kernels()
        return model, size or 224
    model = _first_that_builds(
        lambda **kw: torchvision.models.get_model(name, weights=None, num_classes=NUM_CLASSES, **kw),
        [dict(image_size=size), dict(input_size=(size, size))] if size else [])
    if size is None:
        # The size the model was built for (a vision transformer's
        # `image_size`: 224 for vit_h_14 without weights, whose first
        # weights' transforms crop to 518), else its weights' crop size.
        size = getattr(model, "image_size", None)
    if size is None:
        weights = torchvision.models.get_model_weights(name)
        size = list(weights)[0].transforms().crop_size[0] if len(weights) else 224
    return model, size


def _calibrate_batch_norm(model, inputs) -> None:
    """Running statistics of every batch norm set to those of `inputs`.
    A randomly initialized model in eval normalizes with mean 0 / variance 1,
    so activations grow layer by layer: a ResNet-50 detector's scores all
    saturate at 1.0 (RetinaNet) or no box survives (Faster R-CNN), and the
    comparison checks nothing. One forward with each batch norm in training
    mode and momentum 1 gives them the statistics they would have learnt."""
    import torch

    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    model.eval()
    saved = [m.momentum for m in norms]
    for m in norms:
        m.train()
        m.momentum = 1.0
    with torch.no_grad():
        model(**inputs)
    for m, momentum in zip(norms, saved):
        m.momentum = momentum
    model.eval()


def _torchvision_cpu_kernels() -> None:
    """Where torchvision's C++ library did not load (its CUDA build beside a
    CPU-only torch), the CPU reference of a detector runs torch_tpu's
    kernels for torchvision's ops on the CPU (written with ATen ops, they
    run on any device): the sweep then checks the models' lowering and
    numerics against the CPU; the ops' semantics are checked against
    independent references in tests/integrations/test_torchvision_ops.py."""
    import torch

    from ..integrations import torchvision as tv

    if tv._load_error is None or _CPU_LIBS:
        return
    lib = torch.library.Library("torchvision", "IMPL")
    for name, (fn, _) in tv._KERNELS.items():
        lib.impl(name, fn, "CPU", allow_override=True)
    _CPU_LIBS.append(lib)
    # torchvision.ops.roi_align took `_has_ops` by name at import and, with
    # it False, runs its pure-PyTorch `_roi_align` on the CPU, which (unlike
    # its C++ kernels) does not zero samples past [-1, size]: boxes reaching
    # the image's edge pooled differently. The CPU goes to the kernel above.
    import torchvision.ops  # noqa: F401 - the module, not torchvision.ops.roi_align the function

    sys.modules["torchvision.ops.roi_align"]._has_ops = lambda: True


_CPU_LIBS: List[Any] = []


def build_image_case(library: str, name: str, size: Optional[int], kind: str = "classification"):
    """The validate.Case of an image model: a batch of random images, the
    mean square of the logits as the loss (classifiers)."""
    import inspect

    import torch

    from . import validate as V

    if library == "timm":
        name = _timm_smallest(name)
    torch.manual_seed(0)
    try:
        model, size = _build_image_model(library, name, size, kind)
    except Exception as e:  # noqa: BLE001
        if size is not None:  # a model built for larger images (MaxViT's partitions): the next size
            raise RuntimeError(f"building {name} for {size} px failed: {V._first_line(e)}") from e
        raise NotApplicable(f"building {name} on the CPU failed: {V._first_line(e)}") from e
    _no_dropout(model)
    _randomize_zero_matrices(model)
    n = sum(p.numel() for p in model.parameters())
    # The CPU reference and the tpu copies must fit in memory (24 GB here).
    limit = int(os.environ.get("TORCH_TPU_SWEEP_MAX_PARAMS", IMAGE_MAX_PARAMS))
    if n > limit:
        raise NotApplicable(f"{name}: {n / 1e6:.0f}M parameters")
    x = torch.randn(BATCH, 3, size, size, generator=V._gen())
    # forward(x) for classifiers and segmenters, forward(images) for detectors
    inputs = {next(iter(inspect.signature(model.forward).parameters)): x}
    if kind in TORCHVISION_INFERENCE:
        _calibrate_batch_norm(model, inputs)
    return V.Case(model, inputs, inputs, loss=first_output_loss,
                  align=align_detections if kind == "detection" else None), name, size


def align_detections(tpu_out, cpu_out):
    """tpu's detections (a dict per image: boxes, scores, labels, masks,
    keypoints) put in the CPU's order, each CPU detection matched to the
    nearest unmatched tpu one of its label (boxes and score): a random
    head's scores lie within rounding of each other (RetinaNet's 211 boxes
    within 6e-4), so the two score sorts may order them differently. The
    values are then compared as usual; an image whose counts differ is left
    as it is (the comparison reports the shapes)."""
    import torch

    aligned = []
    for got, want in zip(tpu_out, cpu_out):
        n = want["boxes"].shape[0]
        if got["boxes"].shape[0] != n or n == 0:
            aligned.append(got)
            continue
        gb = torch.cat([got["boxes"].detach().cpu().double(), got["scores"].detach().cpu().double()[:, None]], 1)
        wb = torch.cat([want["boxes"].double(), want["scores"].double()[:, None]], 1)
        cost = (wb[:, None, :] - gb[None, :, :]).abs().amax(-1)
        cost += (want["labels"][:, None] != got["labels"].cpu()[None, :]).double() * 1e30
        order, used = [], torch.zeros(n, dtype=torch.bool)
        for j in range(n):
            i = int(cost[j].masked_fill(used, float("inf")).argmin())
            used[i] = True
            order.append(i)
        index = torch.tensor(order, device=got["boxes"].device)
        aligned.append({k: (v.index_select(0, index) if isinstance(v, torch.Tensor) and v.dim() and
                            v.shape[0] == n else v) for k, v in got.items()})
    return aligned


def run_one(library: str, kind: str, model_type: str, config_name: str, model_name: str,
            modes: List[str]) -> Dict[str, Any]:
    """Checks one architecture in this process (the child's work)."""
    from . import validate as V

    row: Dict[str, Any] = {"type": model_type, "model": model_name, "results": {}}
    generate = library == "transformers" and kind == "causal-lm"
    # A hybrid model may need more layers than two to hold one layer of each
    # kind (an attention layer every 4th or 8th): deeper when the CPU fails.
    # An image model may need larger images than the smallest.
    if library != "transformers":
        tries = [(size, 0) for size in IMAGE_SIZES]
    else:
        tries = [(depth, v) for depth in (DEPTH, 4, 8) for v in range(4 if kind == "base" else 1)]
    for t, variant in tries:
        try:
            if library == "transformers":
                case, dropped = build_case(kind, config_name, model_name, t, variant)
                row["dropped"], row["depth"] = dropped, t
                row["inputs"] = {k: list(v.shape) for k, v in case.forward_inputs.items()}
            else:
                case, row["model"], row["image"] = build_image_case(library, model_type, t, kind)
            family = V.Family(model_type, "sweep", lambda: case, generate=generate,
                              train=kind not in TORCHVISION_INFERENCE)
            with V._stage("cpu reference"):
                ref = V.reference(family, generate=generate)
            break
        except _NoMoreInputs:
            continue
        except NotApplicable as e:
            row["skipped"] = str(e)
            return row
        except Exception as e:  # noqa: BLE001 - the CPU itself fails
            row["skipped"] = f"CPU fails: {V._first_line(e)}"
    else:
        return row
    row.pop("skipped", None)
    if not family.train and not any(t.numel() for t in V._tensors(ref.forward, "").values()
                                    if t.is_floating_point()):
        row["skipped"] = "the CPU output is empty (no detections): nothing to compare"
        return row
    print("SWEEP-CPU-DONE", flush=True)
    for name in modes:
        mode = V.get_mode(name)
        why = mode.skip_reason()
        if why:
            row["results"][name] = f"skipped: {why}"
            continue
        try:
            worst = V.check(family, mode, ref=ref, generate=generate)
            row["results"][name] = f"pass ({worst:.1e})"
        except Exception as e:  # noqa: BLE001 - reported per mode
            row["results"][name] = f"FAIL: {V._first_line(e)}"
            if name == "compile":
                cpu_error = _compile_fails_on_cpu(ref, family.train, e)
                if cpu_error:
                    row["results"][name] = f"skipped: fails on the CPU too ({cpu_error})"
                    continue
            # Values off CPU's f32 ones: as accurate as CPU's f32, or not?
            if isinstance(e, V.StageError) and e.stage in ("forward", "train", "optimizer step") \
                    and isinstance(e.error, V.Mismatch):
                try:
                    row["results"][name] = _f64_arbitration(ref, mode, family.train)
                except Exception as e64:  # noqa: BLE001 - the f32 failure stands
                    row["results"][name] += f" (float64 check failed: {V._first_line(e64)})"
    return row


_ROUNDING_RUNS = 8


def _compile_fails_on_cpu(ref, train: bool, error: BaseException) -> Optional[str]:
    """Whether torch.compile itself fails on this model, whatever the device:
    the CPU copy under Dynamo and AOTAutograd with PyTorch's `aot_eager`
    backend (no tpu anywhere), in the stage where tpu's compile failed. A
    failure in generation: the CPU copy's `generate` with the static cache
    the compile mode asks for (not compiled: a model that does not support
    a static cache fails there). A compiled gradient where eager has None:
    whether `aot_eager` gives that parameter one too (torch.compile's
    backward may return zeros for a parameter the loss does not reach).
    Returns what the CPU shows, or None when it runs as eager does (the
    failure is tpu's)."""
    import torch
    import torch._dynamo

    from . import validate as V

    stage = error.stage if isinstance(error, V.StageError) else ""
    cause = getattr(error, "error", None)
    mismatch = isinstance(cause, V.Mismatch)
    cause = str(cause)
    extra_grad = (stage == "train" and mismatch and cause.startswith("grad of ")
                  and cause.endswith(": tpu tensor, cpu None"))
    if stage not in ("forward", "train", "generate") or (mismatch and not extra_grad):
        return None
    torch._dynamo.reset()
    model = copy.deepcopy(ref.initial)
    try:
        with V._quiet():
            if stage == "generate":
                with torch.no_grad():
                    model.eval().generate(**ref.case.generate_inputs,
                                          **V.get_mode("compile").generate_kwargs,
                                          disable_compile=True)
            elif stage == "forward":
                with torch.no_grad():
                    torch.compile(model, backend="aot_eager").eval()(**ref.case.forward_inputs)
            elif train:
                V._train_step(model, torch.compile(model, backend="aot_eager").train(), ref.case)
    except Exception as e:  # noqa: BLE001 - the CPU's own failure is the answer
        if extra_grad:
            return None  # no answer from the CPU: the failure stands
        how = "static cache" if stage == "generate" else "aot_eager"
        return f"{how}: {type(e).__name__}: {V._first_line(e)}"[:200]
    finally:
        torch._dynamo.reset()
    if extra_grad:
        name = cause[len("grad of "):-len(": tpu tensor, cpu None")]
        grad = dict(model.named_parameters())[name].grad
        if grad is not None:
            return (f"aot_eager: grad of {name} is a tensor (max {grad.abs().max().item():.1g}) "
                    "where eager's is None")
    return None


def _rounding_noise(model, seed: int):
    """`model` with each leaf module's floating output multiplied by
    (1 + r * 2^-23), r in {-1, 0, 1} at random: one rounding's worth of
    difference per layer, as between two correct f32 implementations."""
    import torch

    gen = torch.Generator().manual_seed(seed)

    def perturb(module, args, out):
        if isinstance(out, torch.Tensor) and out.dtype == torch.float32:
            r = torch.randint(-1, 2, out.shape, generator=gen).to(out.dtype)
            return out * (1 + r * 2.0 ** -23)
        return None

    for m in model.modules():
        if not any(True for _ in m.children()):
            m.register_forward_hook(perturb)
    return model


def _float64_everywhere():
    """A torch function mode under which float32 is float64: a `dtype`
    argument of float32 becomes float64 and float32 results are widened, so
    a model that makes float32 tensors of its own (DETR's position
    embeddings: `torch.arange(..., dtype=torch.float32)`) runs wholly in
    float64 for the float64 check."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_map

    def widen(x):
        if isinstance(x, torch.Tensor) and x.dtype == torch.float32:
            return x.double()
        return torch.float64 if x is torch.float32 else x

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = {k: widen(v) for k, v in (kwargs or {}).items()}
            return tree_map(widen, func(*tree_map(widen, args), **kwargs))

    return Mode()


def _f64_arbitration(ref, mode, train: bool = True) -> str:
    """Whether values that differ from CPU's f32 ones are as accurate as
    CPU's. Batch norm in training over a few values (batch 2 at 2x2 maps)
    amplifies rounding, and a ReLU whose input is within rounding of zero
    flips its mask and its gradient with it (found on DenseNet-169: one
    value of 8.9e-6 in float64, -7.3e-6 on tpu, moved every gradient
    upstream by 10%; tpu's input there was as accurate as CPU's). Measured
    on timm's GhostNet at 64 px, CPU's own f32 training
    forward is 58% (of the largest logit) away from a float64 run of the
    same model, DenseNet-121's f32 gradients up to 43%. So the model's eval
    forward, training loss and gradients are rerun in float64 on the CPU,
    and in f32 on the CPU as is and with every layer's output perturbed by
    one rounding (±1 ulp at random: what any other correctly rounded f32
    implementation may differ by; up to `_ROUNDING_RUNS` seeds). tpu passes
    if, for each of the three, its worst relative error against float64 is
    within max(the tolerance, 2x the worst of those f32 runs'); an
    inference model (`train` False) is judged on its output alone. Returns the
    verdict ("pass ..." or "FAIL: ..."); raises where a rerun fails."""
    import copy

    import torch

    from . import validate as V

    case = ref.case

    exact_output = []  # float64's output, that the others' are aligned to

    def run(model, inputs, call=None):
        call = call or model
        model.eval()
        with torch.no_grad():
            out = call(**inputs)
        if case.align is not None:
            if exact_output:
                out = case.align(out, exact_output[0])
            else:
                exact_output.append(out)
        parts = [("output", V._tensors(out, ""))]
        if train:
            model.train()
            loss = case.loss(call(**inputs))
            loss.backward()
            grads = {n: p.grad.detach() for n, p in model.named_parameters() if p.grad is not None}
            parts += [("loss", {"loss": loss}), ("gradients", grads)]
        return {k: {n: t.detach().cpu().double() for n, t in d.items()} for k, d in parts}

    def as_double(obj):
        if isinstance(obj, torch.Tensor) and obj.is_floating_point():
            return obj.double()
        return obj

    m64 = copy.deepcopy(ref.initial).double()
    if getattr(getattr(m64, "config", None), "_experts_implementation", None) not in (None, "eager"):
        m64.set_experts_implementation("eager")  # the CPU's grouped matmul takes no float64
    with V._quiet():
        with _float64_everywhere():
            r64 = run(m64, {k: as_double(v) for k, v in case.train_inputs.items()})
        with mode.context(), V.highest_precision():
            model = V.to_tpu(ref.initial)
            rt = run(model, V._to(case.train_inputs, "tpu"), mode.wrap(model))
    tolerance = {"output": V.FORWARD_RTOL, "loss": V.LOSS_RTOL, "gradients": V.GRAD_RTOL}

    def worst(what, got):
        # Relative to each tensor's largest value, floored as validate's
        # checks are (a value that is zero in float64 is not divided by).
        exact = r64[what]
        floor = V.GRAD_FLOOR * max((t.abs().max().item() for t in exact.values() if t.numel()), default=0.0)
        return max(((got[n] - exact[n]).abs().max().item() / max(exact[n].abs().max().item(), floor, 1e-30)
                    if got[n].shape == exact[n].shape else float("inf"))
                   for n in exact if n in got and exact[n].numel())

    tpu = {what: worst(what, rt[what]) for what in r64}
    cpu = dict.fromkeys(r64, 0.0)
    # CPU's f32 as is, then with rounding noise until its worst errors
    # reach half of tpu's (a flipped ReLU mask is a matter of chance: on
    # DenseNet-169, 4 of 8 seeds flip one and land as far as tpu) or the
    # seeds run out.
    for seed in range(-1, _ROUNDING_RUNS):
        with V._quiet():
            model = copy.deepcopy(ref.initial)
            r32 = run(model if seed < 0 else _rounding_noise(model, seed), case.train_inputs)
        cpu = {what: max(cpu[what], worst(what, r32[what])) for what in r64}
        ok = all(tpu[w] <= max(tolerance[w], 2 * cpu[w]) for w in r64)
        if ok:
            break
    parts = [f"{w} tpu {tpu[w]:.1e} / CPU f32 {cpu[w]:.1e}" for w in r64]
    verdict = "vs float64: " + ", ".join(parts)
    return f"pass {verdict}" if ok else f"FAIL: {verdict}"


def _child(argv: List[str]) -> int:
    library, kind, model_type, config_name, model_name, modes = argv
    row = run_one(library, kind, model_type, config_name, model_name, modes.split(","))
    print("SWEEP-ROW " + json.dumps(row), flush=True)
    return 0


def _run_child(library, kind, arch, modes, timeout) -> Dict[str, Any]:
    model_type, config_name, model_name = arch
    cmd = [sys.executable, "-m", "torch_tpu.tools.sweep", "--child", library, kind, model_type,
           config_name, model_name, ",".join(modes)]
    row = {"type": model_type, "model": model_name, "results": {}}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        stdout, code = r.stdout, r.returncode
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        code, tail = None, f"over the {timeout} s limit"
    for line in stdout.splitlines():
        if line.startswith("SWEEP-ROW "):
            return json.loads(line[len("SWEEP-ROW "):])
    why = tail if code is None else f"child exited {code}: {tail[:200]}"
    if "SWEEP-CPU-DONE" not in stdout:  # it never got past the CPU reference
        row["skipped"] = f"CPU run did not finish ({why})"
    else:
        row["results"] = {m: f"FAIL: {why}" for m in modes}
    return row


def _cause(result: str) -> str:
    """A failure's cause, for the summary: the first error without numbers."""
    import re

    text = result.split(": ", 1)[-1]
    return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", text)[:120]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return _child(argv[1:])
    p = argparse.ArgumentParser(prog="python -m torch_tpu.tools.sweep",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("library", choices=["transformers", "timm", "torchvision"])
    p.add_argument("--kind", choices=["causal-lm", "base", "classification", *TORCHVISION_INFERENCE],
                   help="transformers: causal-lm (default) or base; torchvision: classification "
                        "(default), detection or segmentation (eval only)")
    p.add_argument("--modes", default="strict", help="comma-separated validate modes")
    p.add_argument("--only", help="comma-separated model types")
    p.add_argument("--limit", type=int, help="the first N architectures only")
    p.add_argument("--timeout", type=int, default=300, help="seconds per architecture")
    p.add_argument("--max-params", type=float, default=IMAGE_MAX_PARAMS / 1e6,
                   help="timm, torchvision: skip models over this many million parameters "
                        "(the CPU reference and the tpu copies must fit in memory)")
    p.add_argument("--jsonl", help="also write one JSON row per architecture here")
    p.add_argument("--resume", action="store_true",
                   help="with --jsonl: keep the rows already in the file, run only the "
                        "architectures it lacks, and summarize them all")
    a = p.parse_args(argv)
    os.environ["TORCH_TPU_SWEEP_MAX_PARAMS"] = str(int(a.max_params * 1e6))  # for the children
    if a.kind is None:
        a.kind = "causal-lm" if a.library == "transformers" else "classification"
    archs = architectures(a.kind, a.library)
    if a.only:
        wanted = set(a.only.split(","))
        archs = [x for x in archs if x[0] in wanted]
    if a.limit:
        archs = archs[:a.limit]
    modes = a.modes.split(",")
    rows: List[Dict[str, Any]] = []
    if a.resume and a.jsonl and os.path.exists(a.jsonl):
        with open(a.jsonl) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        done = {r["type"] for r in rows}
        rows = [r for r in rows if r["type"] in {x[0] for x in archs}]
        archs = [x for x in archs if x[0] not in done]
        print(f"resuming: {len(rows)} rows from {a.jsonl}, {len(archs)} architectures to run", flush=True)
    out = open(a.jsonl, "a" if a.resume else "w") if a.jsonl else None
    start = time.time()
    for arch in archs:
        t = time.time()
        row = _run_child(a.library, a.kind, arch, modes, a.timeout)
        row["seconds"] = round(time.time() - t, 1)
        rows.append(row)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()
        label = arch[0]
        if row.get("model") and row["model"] != arch[0] and a.library == "timm":
            label = f"{arch[0]}:{row['model']}"
        if row.get("image"):
            label += f"@{row['image']}"
        if "skipped" in row:
            print(f"{label:<28} {'-':<8} skipped: {row['skipped'][:150]}", flush=True)
            continue
        for mode in modes:
            result = row["results"].get(mode, "FAIL: no result")
            print(f"{label:<28} {mode:<8} {result[:160]}  ({row['seconds']:.0f} s)", flush=True)
    if out:
        out.close()
    what = {"timm": "families", "torchvision": f"{a.kind} models"}.get(a.library, a.kind)
    print()
    print("\n".join(summary(rows, modes, f"{a.library} architectures ({what})",
                             time.time() - start)))
    return 0


def summary(rows: List[Dict[str, Any]], modes: List[str], what: str, seconds: float) -> List[str]:
    """The closing lines of a sweep: counts, pass rate per mode, failures by cause."""
    skipped = sum("skipped" in r for r in rows)
    lines = [f"{len(rows)} {what}, {skipped} skipped (CPU fails or cannot be fed), {seconds:.0f} s"]
    causes = collections.Counter()
    for mode in modes:
        ran = [r["results"].get(mode, "FAIL: no result") for r in rows if "skipped" not in r]
        # A model skipped in one mode (torch.compile failing on the CPU too)
        # is out of that mode's count.
        results = [x for x in ran if not x.startswith("skipped")]
        passed = sum(x.startswith("pass") for x in results)
        causes.update(_cause(x) for x in results if x.startswith("FAIL"))
        line = f"{mode}: {passed}/{len(results)} passed ({100 * passed / max(len(results), 1):.1f}%)"
        if len(ran) > len(results):
            line += f"; {len(ran) - len(results)} more skipped in this mode"
        lines.append(line)
    lines += [f"  {n:3d}  {cause}" for cause, n in causes.most_common(20)]
    return lines


if __name__ == "__main__":
    sys.exit(main())
