"""Checkpoints: torch.save / torch.load of tpu tensors, views, state dicts and
optimizer states, every form of map_location, weights_only, safetensors and
Hugging Face save_pretrained / from_pretrained, compared with CPU."""

import io

import pytest
import torch
from torch import nn
from torch.testing import assert_close

TPU = torch.device("tpu")


def roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64,
                                   torch.int32, torch.uint8, torch.bool, torch.float64])
def test_tensor_roundtrip_keeps_values_dtype_and_device(dtype):
    cpu = (torch.randn(5, 7) * 10).to(dtype)
    back = roundtrip(cpu.to(TPU))
    assert back.device.type == "tpu" and back.dtype == dtype and back.shape == cpu.shape
    assert torch.equal(back.cpu(), cpu)


def test_views_stay_views_of_one_storage():
    base = torch.randn(6, 8, device=TPU)
    obj = {"base": base, "t": base.t(), "row": base[2], "cols": base[:, 1::3],
           "flat": base.view(-1)[5:17]}
    back = roundtrip(obj)
    for k, v in obj.items():
        assert back[k].shape == v.shape and back[k].stride() == v.stride(), k
        assert back[k].storage_offset() == v.storage_offset(), k
        assert torch.equal(back[k].cpu(), v.cpu()), k
    # One storage, as on CPU: a write through one view shows in the others.
    back["base"][2].fill_(7.0)
    assert torch.equal(back["row"].cpu(), torch.full((8,), 7.0))
    assert back["t"].untyped_storage().data_ptr() == back["base"].untyped_storage().data_ptr()


def test_reinterpreting_a_storage_as_bytes_and_back():
    # What the pickler does: a float storage copied to the host as bytes.
    x = torch.randn(10, device=TPU)
    raw = x.untyped_storage().cpu()
    assert raw.nbytes() == 40
    assert torch.equal(torch.tensor([], dtype=torch.float32).set_(raw), x.cpu())


@pytest.mark.parametrize("map_location", [
    None, "tpu", "tpu:0", TPU, torch.device("tpu", 0), {"tpu:0": "tpu:0"},
    lambda storage, loc: storage.tpu(), lambda storage, loc: storage.to(device="tpu"),
])
def test_map_location_to_tpu(map_location):
    x = torch.randn(4, 3, device=TPU)
    back = roundtrip({"x": x}, map_location=map_location)
    assert back["x"].device.type == "tpu"
    assert torch.equal(back["x"].cpu(), x.cpu())


@pytest.mark.parametrize("map_location", [
    "cpu", torch.device("cpu"), {"tpu:0": "cpu"}, lambda storage, loc: storage,
])
def test_map_location_to_cpu(map_location):
    x = torch.randn(4, 3, device=TPU)
    back = roundtrip({"x": x}, map_location=map_location)
    assert back["x"].device.type == "cpu"
    assert torch.equal(back["x"], x.cpu())


def test_cpu_checkpoint_loads_onto_tpu():
    x = torch.randn(3, 5)
    back = roundtrip({"x": x, "v": x[1:]}, map_location="tpu")
    assert back["x"].device.type == "tpu" and torch.equal(back["v"].cpu(), x[1:])


def test_path_and_file_object(tmp_path):
    x = torch.randn(8, device=TPU)
    path = tmp_path / "x.pt"
    torch.save(x, path)
    assert torch.equal(torch.load(path).cpu(), x.cpu())
    with open(tmp_path / "y.pt", "wb") as f:
        torch.save({"x": x}, f)
    with open(tmp_path / "y.pt", "rb") as f:
        assert torch.equal(torch.load(f, weights_only=True)["x"].cpu(), x.cpu())


def _train(model, opt, steps, seed):
    g = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        x = torch.randn(4, 6, generator=g).to(model[0].weight.device)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _model():
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))


@pytest.mark.parametrize("weights_only", [True, False])
def test_model_and_optimizer_state_resume_exactly(weights_only, highest_matmul_precision):
    torch.manual_seed(0)
    model = _model().to(TPU)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    _train(model, opt, 3, seed=1)
    ckpt = roundtrip({"model": model.state_dict(), "opt": opt.state_dict()},
                     weights_only=weights_only)
    step = ckpt["opt"]["state"][0]["step"]
    assert step.device == opt.state_dict()["state"][0]["step"].device and step.item() == 3
    expected = _train(model, opt, 3, seed=2)

    resumed = _model().to(TPU)
    resumed.load_state_dict(ckpt["model"])
    ropt = torch.optim.AdamW(resumed.parameters(), lr=1e-2)
    ropt.load_state_dict(ckpt["opt"])
    assert _train(resumed, ropt, 3, seed=2) == expected  # bit-equal


def test_state_dict_matches_cpu_checkpoint():
    torch.manual_seed(3)
    cpu = _model()
    tpu = _model().to(TPU)
    tpu.load_state_dict(cpu.state_dict())
    sd = roundtrip(tpu.state_dict(), map_location="cpu")
    for k, v in cpu.state_dict().items():
        assert torch.equal(sd[k], v), k


def test_safetensors_save_and_load_on_tpu(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    tensors = {"w": torch.randn(5, 4, device=TPU), "b": torch.arange(6, device=TPU)}
    path = str(tmp_path / "m.safetensors")
    safetensors_torch.save_file(tensors, path)
    for device in ("tpu", "tpu:0", TPU):
        back = safetensors_torch.load_file(path, device=device)
        for k, v in tensors.items():
            assert back[k].device.type == "tpu" and torch.equal(back[k].cpu(), v.cpu())
    from safetensors import safe_open
    with safe_open(path, framework="pt", device="tpu") as f:
        assert sorted(f.keys()) == ["b", "w"]
        assert torch.equal(f.get_slice("w")[1:3].cpu(), tensors["w"][1:3].cpu())
    assert safetensors_torch.load_file(path)["w"].device.type == "cpu"


def test_hugging_face_save_pretrained_and_from_pretrained(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    cfg = transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2, n_positions=16, vocab_size=32)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).to(TPU)
    model.save_pretrained(tmp_path)
    loaded = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, device_map="tpu")
    assert loaded.transformer.wte.weight.device.type == "tpu"
    ids = torch.randint(0, 32, (2, 8))
    cpu = transformers.GPT2LMHeadModel.from_pretrained(tmp_path)
    with torch.no_grad():
        want = cpu(ids).logits
        got = loaded(ids.to(TPU)).logits.cpu()
    assert_close(got, want, rtol=2e-2, atol=2e-2)  # tpu matmuls run at bf16 ("medium")
    for (k, v), (_, w) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(v.cpu(), w.cpu()), k

