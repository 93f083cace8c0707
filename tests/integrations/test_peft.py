"""PEFT (its public get_peft_model / PeftModel API): LoRA fine-tuning of a
tiny Llama on tpu against the same run on CPU, merge_and_unload, and the
adapter saved and loaded onto a tpu model."""

import copy

import pytest
import torch

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")


def _tiny_llama():
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def _lora(model):
    config = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                             target_modules=["q_proj", "v_proj", "down_proj"],
                             init_lora_weights=False)  # random B: the adapter changes outputs
    torch.manual_seed(1)
    return peft.get_peft_model(model, config)


def _train(model, device, ids, steps=4):
    model = model.to(device)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for step in range(steps):
        batch = ids[step % len(ids)].to(device)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


@pytest.mark.usefixtures("highest_matmul_precision")
def test_lora_fine_tuning_merge_and_adapter_round_trip(tmp_path):
    base = _tiny_llama()
    ids = torch.randint(0, 128, (4, 2, 16), generator=torch.Generator().manual_seed(2))
    cpu_model = _lora(copy.deepcopy(base))
    tpu_model = _lora(copy.deepcopy(base))
    trainable = [n for n, p in tpu_model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)

    expected = _train(cpu_model, "cpu", ids)
    actual = _train(tpu_model, "tpu", ids)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    for (name, p), (_, q) in zip(tpu_model.named_parameters(), cpu_model.named_parameters()):
        assert p.device.type == "tpu", name
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-3, atol=1e-4, msg=name)
    frozen = dict(base.named_parameters())
    for name, p in tpu_model.base_model.model.named_parameters():
        if "lora_" not in name and name.replace(".base_layer", "") in frozen:
            torch.testing.assert_close(p.detach().cpu(), frozen[name.replace(".base_layer", "")])

    probe = ids[0]
    with torch.no_grad():
        adapted = tpu_model(input_ids=probe.to("tpu")).logits.cpu()
        torch.testing.assert_close(adapted, cpu_model(input_ids=probe).logits, rtol=1e-3, atol=1e-3)

    # The adapter alone, saved from tpu, loaded onto a fresh tpu base model.
    tpu_model.save_pretrained(tmp_path / "adapter")
    reloaded = peft.PeftModel.from_pretrained(copy.deepcopy(base).to("tpu"), tmp_path / "adapter")
    assert next(reloaded.parameters()).device.type == "tpu"
    with torch.no_grad():
        torch.testing.assert_close(reloaded(input_ids=probe.to("tpu")).logits.cpu(), adapted,
                                   rtol=1e-5, atol=1e-5)

    # merge_and_unload: a plain Llama whose weights hold the adapter.
    merged = tpu_model.merge_and_unload()
    assert isinstance(merged, transformers.LlamaForCausalLM)
    assert not any("lora_" in n for n, _ in merged.named_parameters())
    cpu_merged = cpu_model.merge_and_unload()
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=probe.to("tpu")).logits.cpu(), adapted,
                                   rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(
            merged.model.layers[0].self_attn.q_proj.weight.cpu(),
            cpu_merged.model.layers[0].self_attn.q_proj.weight, rtol=1e-3, atol=1e-4)
