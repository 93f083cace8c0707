"""The architecture sweep (python -m torch_tpu.tools.sweep): its generic
shrinking, and one run end to end in a child process per architecture."""

import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

from torch_tpu.tools import sweep  # noqa: E402

CHILDREN = pytest.mark.strict_pass("the sweep sets each mode itself")


def test_shrinking_is_generic():
    config, dropped = sweep.shrunk_config(transformers.Qwen3NextConfig)
    assert dropped == [] and config.num_hidden_layers == 2 and config.hidden_size == 64
    assert len(config.layer_types) == 2  # per-layer lists follow the depth
    deep, _ = sweep.shrunk_config(transformers.Qwen3NextConfig, depth=4)
    assert "full_attention" in deep.layer_types  # a deeper try holds every kind of layer
    mla, _ = sweep.shrunk_config(transformers.DeepseekV3Config)
    assert (mla.qk_rope_head_dim, mla.n_group, mla.topk_group) == (8, 1, 1)
    gemma, _ = sweep.shrunk_config(transformers.Gemma3Config)  # sub-configs shrink too
    assert gemma.text_config.num_hidden_layers == 2 and gemma.text_config.vocab_size == 256
    assert len(gemma.text_config.layer_types) == 2
    assert all(t < 256 for t in (gemma.text_config.pad_token_id or 0,))
    assert len(sweep.architectures("causal-lm")) > 150


@CHILDREN
def test_sweep_runs_architectures_in_children():
    r = subprocess.run([sys.executable, "-m", "torch_tpu.tools.sweep", "transformers",
                        "--only", "llama,afmoe", "--modes", "strict,fused"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    for arch in ("llama", "afmoe"):  # afmoe: zero-initialized router
        for mode in ("strict", "fused"):
            assert any(line.split()[:3] == [arch, mode, "pass"] for line in lines), r.stdout
    assert "strict: 2/2 passed" in r.stdout and "fused: 2/2 passed" in r.stdout


@CHILDREN
def test_image_models_are_checked():
    """timm (the smallest model of a family) and a torchvision classifier,
    each through the sweep's per-architecture check (the child's work, run
    here: the children themselves are tested above)."""
    pytest.importorskip("timm")
    pytest.importorskip("torchvision")
    assert len(sweep.architectures("", "torchvision")) > 70
    assert len(sweep.architectures("", "timm")) > 70
    for lib, arch in (("torchvision", "squeezenet1_1"), ("timm", "vision_transformer_relpos")):
        row = sweep.run_one(lib, "classification", arch, arch, "", ["strict"])
        assert "skipped" not in row and row["results"]["strict"].startswith("pass"), row


def test_base_model_inputs_follow_the_main_input():
    import torch

    def candidates(config_cls, model_cls):
        config, _ = sweep.shrunk_config(getattr(transformers, config_cls))
        with torch.device("meta"):
            model = getattr(transformers, model_cls)(config)
        return [{k: tuple(v.shape) for k, v in c.items()} for c in sweep.input_candidates(model, config)]

    def first(config_cls, model_cls):
        return candidates(config_cls, model_cls)[0]

    assert first("ViTConfig", "ViTModel") == {"pixel_values": (2, 3, 224, 224)}
    assert first("Wav2Vec2Config", "Wav2Vec2Model") == {"input_values": (2, 4000)}
    # Whisper's encoder takes exactly twice its positions; a decoder gets tokens.
    assert first("WhisperConfig", "WhisperModel") == {"input_features": (2, 80, 3000),
                                                      "decoder_input_ids": (2, 8)}
    assert first("T5Config", "T5Model") == {"input_ids": (2, 16), "attention_mask": (2, 16),
                                            "decoder_input_ids": (2, 8)}
    with pytest.raises(sweep.NotApplicable, match="past_values"):
        first("PatchTSTConfig", "PatchTSTModel")
    # An audio spectrogram transformer's input_values are (time, mel bins).
    assert candidates("ASTConfig", "ASTModel")[-1] == {"input_values": (2, 1024, 128)}
    # A text-image model is tried with images beside its tokens.
    assert candidates("CLIPConfig", "CLIPModel")[1] == {
        "input_ids": (2, 16), "attention_mask": (2, 16), "pixel_values": (2, 3, 224, 224)}
    # A mask named after the main input is given (ones).
    assert first("AudioFlamingo3EncoderConfig", "AudioFlamingo3Encoder")["input_features_mask"] == (2, 3000)


@CHILDREN
def test_base_sweep_checks_an_encoder_decoder_on_audio():
    row = sweep.run_one("transformers", "base", "whisper", "WhisperConfig", "WhisperModel", ["strict"])
    assert "skipped" not in row and row["results"]["strict"].startswith("pass"), row
    assert row["inputs"] == {"input_features": [2, 80, 3000], "decoder_input_ids": [2, 8]}


def test_detections_are_matched_before_comparing():
    import torch

    g = torch.Generator().manual_seed(0)
    boxes = torch.rand(5, 4, generator=g) * 50
    cpu = [{"boxes": boxes, "scores": torch.tensor([0.5, 0.5 - 1e-8, 0.4, 0.3, 0.3]),
            "labels": torch.tensor([1, 1, 2, 3, 3])}]
    perm = torch.tensor([1, 0, 2, 4, 3])  # near-equal scores sorted the other way
    tpu = [{k: v[perm] + (1e-6 if v.is_floating_point() else 0) for k, v in cpu[0].items()}]
    got = sweep.align_detections(tpu, cpu)[0]
    assert torch.equal(got["labels"], cpu[0]["labels"])
    assert torch.allclose(got["boxes"], boxes, atol=1e-5)
    # A detection that is missing is not hidden: the counts stay different.
    short = [{k: v[:4] for k, v in tpu[0].items()}]
    assert sweep.align_detections(short, cpu)[0]["boxes"].shape[0] == 4


@CHILDREN
def test_torchvision_inference_sweeps_run_children():
    """A detector (RPN, RoIAlign, nms) and a segmenter, in eval (children: a
    detector's CPU reference may register kernels for torchvision's ops)."""
    pytest.importorskip("torchvision")
    for kind, arch in (("detection", "fasterrcnn_mobilenet_v3_large_320_fpn"),
                       ("segmentation", "lraspp_mobilenet_v3_large")):
        r = subprocess.run([sys.executable, "-m", "torch_tpu.tools.sweep", "torchvision", "--kind", kind,
                            "--only", arch], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr[-3000:]
        assert "strict: 1/1 passed" in r.stdout, r.stdout


def test_float64_check_widens_the_models_own_float32_tensors():
    import torch

    class Positions(torch.nn.Module):  # as DETR's position embeddings
        def forward(self, x):
            dim_t = torch.arange(x.shape[-1], dtype=torch.float32)
            return x * dim_t + x.float().sum()

    x = torch.randn(2, 4, dtype=torch.float64)
    with sweep._float64_everywhere():
        out = Positions()(x)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, x * torch.arange(4, dtype=torch.float64) + x.sum())


def test_a_model_with_an_empty_parameter_is_compared():
    # DINOv3's register tokens with none configured: a (1, 0, d) parameter.
    import torch

    from torch_tpu.tools import validate as V

    class Registers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.registers = torch.nn.Parameter(torch.zeros(1, 0, 8))
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.proj(torch.cat([self.registers.expand(x.shape[0], -1, -1), x], dim=1))

    x = torch.randn(2, 3, 8)
    case = V.Case(Registers(), dict(x=x), dict(x=x), loss=sweep.first_output_loss)
    family = V.Family("registers", "sweep", lambda: case)
    ref = V.reference(family)
    assert V.check(family, V.get_mode("strict"), ref=ref) < 1e-4


def test_a_model_torch_compile_fails_on_everywhere_is_skipped_in_that_mode():
    # torch.compile failing on the CPU too (aot_eager, no tpu) is not tpu's
    # failure: the model is skipped in the compile mode and out of its count.
    import torch

    from torch_tpu.tools import validate as V

    class Untraceable(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):
            if torch.compiler.is_compiling():  # as Dory's masks: shapes that only tracing sees
                x = x + torch.ones(3)
            return self.proj(x)

    x = torch.randn(2, 8)
    case = V.Case(Untraceable(), dict(x=x), dict(x=x), loss=sweep.first_output_loss)
    ref = V.reference(V.Family("untraceable", "sweep", lambda: case))
    with pytest.raises(V.StageError) as failed:
        V.check(V.Family("untraceable", "sweep", lambda: case), V.get_mode("compile"), ref=ref)
    assert "fake tensor" in sweep._compile_fails_on_cpu(ref, True, failed.value)
    # A wrong value is never put down to the CPU.
    assert sweep._compile_fails_on_cpu(ref, True, V.StageError("forward", V.Mismatch("x"))) is None
    rows = [{"type": "a", "results": {"compile": "pass (1e-6)"}},
            {"type": "b", "results": {"compile": "skipped: fails on the CPU too (...)"}},
            {"type": "c", "results": {"compile": "FAIL: forward: ..."}}]
    lines = sweep.summary(rows, ["compile"], "models", 1.0)
    assert lines[1] == "compile: 1/2 passed (50.0%); 1 more skipped in this mode", lines


@pytest.mark.strict_pass("no tpu: the image size the sweep chooses")
def test_a_torchvision_model_runs_at_the_size_it_was_built_for(monkeypatch):
    # vit_h_14's first weights crop to 518 px, while the model built without
    # weights takes 224: the sweep fed it 518 and the CPU refused ("Wrong
    # image height!"). A weight set whose crop differs from the built size
    # stands in for it here (vit_h_14 itself has 632M parameters).
    torchvision = pytest.importorskip("torchvision")

    class Weights:
        def transforms(self):
            return type("T", (), {"crop_size": [518]})()

    monkeypatch.setattr(torchvision.models, "get_model_weights", lambda name: [Weights()])
    model, size = sweep._build_image_model("torchvision", "vit_b_32", None)
    assert size == model.image_size == 224
    model(torch.randn(1, 3, size, size))  # the size the model takes
    _, conv_size = sweep._build_image_model("torchvision", "squeezenet1_1", None)
    assert conv_size == 518  # no built size: the weights' crop
