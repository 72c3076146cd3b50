"""LoRA (model/lora.py): an adapted product is W x + (alpha / r) B A x; a fresh adapter is the
pretrained model; merged equals unmerged; its FLOPs are what lora_flops says; a model directory of
it holds the adapters only and reads back whole; and its logits equal Hugging Face peft's on the
same weights and the same A and B."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from transformer import ModelConfig, build_model, save_model
from transformer.config import LoraConfig
from transformer.model.io import ModelFileError
from transformer.model.lora import (
    Adapter,
    LoRALinear,
    add_lora,
    lora_flops,
    lora_layers,
    merge_lora,
)
from transformer.model_dir import (
    ADAPTER_FILE,
    ADAPTER_WEIGHTS_FILE,
    WEIGHTS_FILE,
    load_model,
    weights_sha256,
)

ALL = ("q_proj", "k_proj", "v_proj", "out_proj", "w1", "w2", "w3")


def tiny_decoder(**changes) -> nn.Module:
    cfg = ModelConfig(arch="decoder", vocab_size=50, d_model=32, n_heads=4, n_kv_heads=2,
                      n_decoder_layers=2, d_ff=48, norm_position="pre", norm="rmsnorm",
                      positional="rope", activation="swiglu", bias=False, dropout=0.0,
                      max_positions=64, **changes)
    torch.manual_seed(0)
    return build_model(cfg).eval()


def randomize(model: nn.Module, seed: int = 1) -> None:
    """Nonzero B (a fresh adapter's B is zero: every update would vanish)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in lora_layers(model):
            layer.lora_B.copy_(torch.randn(layer.lora_B.shape, generator=g) * 0.1)


def test_product_is_the_pretrained_one_plus_the_scaled_update():
    torch.manual_seed(0)
    base = nn.Linear(12, 7)
    layer = LoRALinear(base, rank=3, alpha=6.0)
    with torch.no_grad():
        layer.lora_B.normal_()
    x = torch.randn(2, 5, 12)
    expect = x @ base.weight.T + base.bias + 2.0 * (x @ layer.lora_A.T @ layer.lora_B.T)
    torch.testing.assert_close(layer(x), expect, rtol=1e-5, atol=1e-5)
    assert layer.weight is base.weight  # nothing copied


def test_a_fresh_adapter_is_the_pretrained_model_and_merging_is_exact():
    model = tiny_decoder()
    ids = torch.randint(0, 50, (3, 11))
    before = model(ids)
    wrapped = add_lora(model, LoraConfig(rank=4, targets=ALL))
    assert len(wrapped) == 2 * 7 and "layers.0.self_attn.q_proj" in " ".join(wrapped)
    torch.testing.assert_close(model(ids), before)  # B = 0
    randomize(model)
    adapted = model(ids)
    assert (adapted - before).abs().max() > 1e-3
    merge_lora(model)
    assert not lora_layers(model) and all(type(m) is not LoRALinear for m in model.modules())
    torch.testing.assert_close(model(ids), adapted, rtol=1e-5, atol=1e-5)


def test_added_flops_are_what_lora_flops_reports():
    layer = LoRALinear(nn.Linear(40, 24, bias=False), rank=5, alpha=10.0)
    x = torch.randn(9, 40)  # 9 tokens
    with FlopCounterMode(display=False) as counted:
        layer(x)
    plain = 2 * 40 * 24 * 9
    assert counted.get_total_flops() - plain == 9 * lora_flops(40, 24, 5)


def test_refusals():
    model = tiny_decoder()  # tied output layer: lm_head is the embedding
    with pytest.raises(ValueError, match="shares its weight with the token embedding"):
        add_lora(model, LoraConfig(targets=("lm_head",)))
    encoder = build_model(ModelConfig(arch="encoder", vocab_size=30, d_model=16, n_heads=2,
                                      n_encoder_layers=1, d_ff=16))
    with pytest.raises(ValueError, match="names no linear layer"):
        add_lora(encoder, LoraConfig(targets=("w3",)))  # no gated feed-forward


def adapted_dir(tmp_path):
    """A base model directory, and an adapted model of it saved beside it."""
    base = tiny_decoder()
    save_model(base, tmp_path / "base")
    model = load_model(tmp_path / "base")
    lora = LoraConfig(rank=2, alpha=4.0, targets=("q_proj", "v_proj", "w2"))
    model.requires_grad_(False)
    add_lora(model, lora)
    randomize(model)
    trained = tuple(n for n, _ in model.named_parameters() if "lora_" in n)
    file = tmp_path / "base" / WEIGHTS_FILE
    model.adapter = Adapter(lora, str(tmp_path / "base"), weights_sha256(file), trained)
    save_model(model, tmp_path / "adapted")
    return model, trained


def test_a_model_directory_holds_the_adapters_only_and_reads_back(tmp_path):
    model, trained = adapted_dir(tmp_path)
    files = sorted(p.name for p in (tmp_path / "adapted").iterdir())
    assert WEIGHTS_FILE not in files and ADAPTER_FILE in files and ADAPTER_WEIGHTS_FILE in files
    size = (tmp_path / "adapted" / ADAPTER_WEIGHTS_FILE).stat().st_size
    assert size < (tmp_path / "base" / WEIGHTS_FILE).stat().st_size / 5
    ids = torch.randint(0, 50, (2, 9))
    expect = model(ids)
    apart = load_model(tmp_path / "adapted", merge=False)
    assert apart.adapter.trained == trained
    assert [n for n, p in apart.named_parameters() if p.requires_grad] == list(trained)
    torch.testing.assert_close(apart(ids), expect)
    merged = load_model(tmp_path / "adapted")
    assert not lora_layers(merged) and getattr(merged, "adapter", None) is None
    torch.testing.assert_close(merged(ids), expect, rtol=1e-5, atol=1e-5)


def test_a_changed_or_missing_base_is_named(tmp_path):
    adapted_dir(tmp_path)
    other = tiny_decoder(norm_eps=1e-6)
    with torch.no_grad():
        next(other.parameters()).add_(1.0)
    save_model(other, tmp_path / "base")  # the base's weights changed since
    with pytest.raises(ModelFileError, match="has changed since the adapters"):
        load_model(tmp_path / "adapted")
    (tmp_path / "base" / WEIGHTS_FILE).unlink()
    with pytest.raises(ModelFileError, match="base model of the adapters must be there"):
        load_model(tmp_path / "adapted")


def test_logits_equal_peft_on_the_same_weights_and_adapters():
    """Hugging Face peft's LoraConfig model (a tiny Llama) against ours imported from the same
    weights, with peft's A and B copied across (each matched by its base weight)."""
    transformers = pytest.importorskip("transformers", reason="needs transformers")
    peft = pytest.importorskip("peft", reason="needs peft (pip install peft)")
    from transformer.interop.hf import from_hf

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64,
                                      tie_word_embeddings=True)
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(config).eval()
    ours = from_hf(hf).eval()
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    peft_model = peft.get_peft_model(
        hf, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=targets)
    ).eval()
    add_lora(ours, LoraConfig(rank=4, alpha=8.0, targets=ALL))
    theirs = {}
    g = torch.Generator().manual_seed(3)
    for module in peft_model.modules():
        if hasattr(module, "lora_A") and isinstance(module.lora_A, nn.ModuleDict):
            with torch.no_grad():
                module.lora_B["default"].weight.copy_(
                    torch.randn(module.lora_B["default"].weight.shape, generator=g) * 0.1
                )
            theirs[module.base_layer.weight.detach().clone()] = module
    matched = 0
    for layer in lora_layers(ours):
        module = None
        # our rotary layout permutes the rows of q and k (interleaved pairs, HF's halves): the
        # same product up to that order, so B's rows follow it
        for weight, candidate in theirs.items():
            if weight.shape != layer.weight.shape:
                continue
            rows = (layer.weight[:, None, :] == weight[None, :, :]).all(-1)  # (out ours, out HF)
            if rows.any(1).all():
                order, module = rows.float().argmax(1), candidate
                break
        assert module is not None, f"no peft layer has the weight of {layer}"
        with torch.no_grad():
            layer.lora_A.copy_(module.lora_A["default"].weight)
            layer.lora_B.copy_(module.lora_B["default"].weight[order])
        matched += 1
    assert matched == len(theirs) == 2 * 7
    ids = torch.randint(0, 64, (2, 10))
    with torch.no_grad():
        expect = peft_model(input_ids=ids).logits
    torch.testing.assert_close(ours(ids), expect, rtol=1e-4, atol=1e-4)


def test_export_to_a_plain_directory_and_info(tmp_path, capsys):
    """`transformer export --to dir` merges the adapters into a directory that needs no base;
    `transformer info` of the adapted directory names the adapters and what they add."""
    from tests.cli.common import run

    model, _ = adapted_dir(tmp_path)
    rc, out, err = run(["export", tmp_path / "adapted", "--to", "dir", "--out", tmp_path / "m"],
                       capsys)
    assert rc == 0, err
    assert (tmp_path / "m" / WEIGHTS_FILE).is_file() and not (tmp_path / "m" / ADAPTER_FILE).exists()
    (tmp_path / "base" / WEIGHTS_FILE).unlink()  # the merged model stands alone
    ids = torch.randint(0, 50, (2, 7))
    torch.testing.assert_close(load_model(tmp_path / "m")(ids), model(ids), rtol=1e-5, atol=1e-5)
    adapted_dir(tmp_path / "again")
    rc, out, err = run(["info", tmp_path / "again" / "adapted"], capsys)
    layers = lora_layers(load_model(tmp_path / "again" / "adapted", merge=False))
    added = sum(lora_flops(m.in_features, m.out_features, 2) for m in layers)
    assert rc == 0 and "rank 2, alpha 4 on 6 products (q_proj, v_proj, w2)" in out
    assert f"add {added:,} forward FLOPs per token" in out


def test_export_with_a_lora_scale_merges_that_share_of_the_update(tmp_path, capsys):
    """--lora-scale s writes W + s (alpha / r) B A for every adapted product: 0 is the base model
    exactly, 1 the trained one, 0.5 the weights half way (each merged weight checked against its
    arithmetic); it applies to --to dir and to a directory with adapters only."""
    from safetensors.torch import load_file

    from tests.cli.common import run

    model, _ = adapted_dir(tmp_path)
    base = load_file(tmp_path / "base" / WEIGHTS_FILE)
    deltas = {f"{name}.weight": m.delta() for name, m in model.named_modules() if isinstance(m, LoRALinear)}
    assert len(deltas) == 6
    for scale in (0.0, 0.5, 1.0):
        out = tmp_path / f"scaled-{scale}"
        rc, printed, err = run(["export", tmp_path / "adapted", "--to", "dir", "--out", out, "--lora-scale", str(scale)], capsys)
        assert rc == 0, err
        merged = load_file(out / WEIGHTS_FILE)
        assert set(merged) == set(base)
        for name, weight in base.items():
            expect = weight + scale * deltas[name] if name in deltas else weight
            torch.testing.assert_close(merged[name], expect, rtol=0, atol=1e-6)
            assert scale != 0.0 or torch.equal(merged[name], weight)  # the base, bit for bit
        assert f"(their updates times {scale:g}) merged into" in (out / "README.md").read_text()
    for to, scale, message in (
        ("hf", "0.5", "--lora-scale applies to --to dir"),
        ("dir", "-1", "--lora-scale -1.0: give a number >= 0"),
    ):
        out = tmp_path / f"refused-{to}"
        rc, _, err = run(["export", tmp_path / "adapted", "--to", to, "--out", out, "--lora-scale", scale], capsys)
        assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    rc, _, err = run(["export", tmp_path / "base", "--to", "dir", "--out", tmp_path / "b", "--lora-scale", "0.5"], capsys)
    assert rc == 2 and "--lora-scale scales LoRA adapters" in err and len(err.strip().splitlines()) == 1
