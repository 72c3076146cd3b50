"""Inference precision: bf16 and int8 models compute what the fp32 model does, within their rounding;
Pipeline.load / the CLI pick the precision from the flag, then decode.json, and "auto" measures."""

import json

import pytest
import torch

import transformer
import transformer.runtime.precision as precision_module
from transformer.config import ConfigError, DecodeConfig, cpu_tiny
from transformer.data.tokenizer import train_bpe
from transformer.decoding.beam import beam_search
from transformer.decoding.inputs import PipelineError
from transformer.decoding.pipeline import Pipeline
from transformer.model import quantize
from transformer.model.quantize import (
    PrecisionError,
    WeightOnlyLinear,
    model_precision,
    quantize_weights,
    set_inference_precision,
)

TEXT = ["the cat sat on the mat", "a dog ran in the park", "el gato se sentó", "hace sol hoy"] * 30
FAMILIES = {
    "encoder-decoder": dict(arch="encoder-decoder"),
    "decoder": dict(arch="decoder", positional="rope", norm="rmsnorm", activation="swiglu", n_kv_heads=2),
    "encoder": dict(arch="encoder", norm_position="post"),
}


def outputs(model, arch, ids, mask):
    with torch.no_grad():
        if arch == "encoder-decoder":
            return model(ids, ids[:, :5], src_mask=mask).float()
        return model(ids, attention_mask=mask).float()


@pytest.mark.parametrize("arch", FAMILIES)
@pytest.mark.parametrize(
    "precision, tolerance", [("bf16", 0.05), ("int8", 0.05), ("q8", 0.05), ("q4", 0.25)]
)
def test_reduced_precision_stays_close_to_fp32(arch, precision, tolerance, monkeypatch):
    monkeypatch.setattr(quantize, "MIN_WEIGHT", 0)  # the tiny model's layers are quantized too
    torch.manual_seed(0)
    model = transformer.build_model(cpu_tiny(vocab_size=208, **FAMILIES[arch])).eval()
    ids = torch.randint(4, 208, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[1, 6:] = False  # padding, so masks go through the reduced-precision path too
    reference = outputs(model, arch, ids, mask)
    set_inference_precision(model, precision)
    assert model_precision(model) == precision
    got = outputs(model, arch, ids, mask)
    assert got.dtype == torch.float32 and torch.isfinite(got).all()
    error = (got - reference).abs().max() / reference.abs().max()
    assert error < tolerance, f"{precision} {arch}: relative error {error:.3g}"
    if precision == "int8":  # the linear layers really were replaced
        assert not any(type(m) is torch.nn.Linear for m in model.modules())
    elif precision in ("q8", "q4"):  # all but the output layer, whose logits stay fp32
        kept = [name for name, m in model.named_modules() if type(m) is torch.nn.Linear]
        assert kept == (["lm_head"] if arch != "encoder" else []), kept
    else:
        assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("bias", [True, False])
def test_weight_only_linear_is_the_product_with_its_dequantized_weight(bits, bias):
    """The kernel's product equals the plain one with the weight it says it uses, and that weight
    is the original within half a quantization step (per row for 8 bits, per group of 32 for 4)."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(320, 384, bias=bias)
    layer.weight.data[5, 7] = 3.0  # an outlier: its row (8 bits) or group (4 bits) gets a coarse step
    q = WeightOnlyLinear(layer, bits)
    w, deq = layer.weight.detach(), q.dequantized()
    if bits == 8:
        step = w.abs().amax(dim=1, keepdim=True) / 127
        assert (q.qweight.abs() <= 127).all()
    else:
        groups = w.view(384, 10, 32)
        step = ((groups.amax(-1) - groups.amin(-1)) / 15).repeat_interleave(32, dim=1)
    assert ((deq - w).abs() <= step / 2 * 1.02 + 1e-3).all()  # bf16-stored scales: 2% of a step
    x = torch.randn(3, 5, 320)  # (B, T, K): any leading shape
    with torch.no_grad():
        got = q(x)
        plain = torch.nn.functional.linear(x.bfloat16().float(), deq, layer.bias)
    assert got.shape == (3, 5, 384) and got.dtype == torch.float32
    assert (got - plain).abs().max() <= 1e-2 * plain.abs().max()  # bf16 output rounding only
    assert model_precision(torch.nn.Sequential(q)) == f"q{bits}"


def test_weight_only_quantization_picks_the_layers_it_can_hold():
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 256),  # quantized
        torch.nn.Linear(256, 8),  # under MIN_WEIGHT: stays fp32
        torch.nn.Linear(300, 512),  # 300 inputs: q8 yes, q4 no (groups of 32)
        torch.nn.Linear(512, 520),  # 520 outputs: q8 yes, q4 no (packed by 16)
    )
    q8 = quantize_weights(model, 8)
    assert [type(m).__name__ for m in q8] == ["WeightOnlyLinear", "Linear"] + ["WeightOnlyLinear"] * 2
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 256), torch.nn.Linear(300, 512), torch.nn.Linear(512, 520)
    )
    q4 = quantize_weights(model, 4)
    assert [type(m).__name__ for m in q4] == ["WeightOnlyLinear", "Linear", "Linear"]


def test_int8_refuses_a_model_not_on_the_cpu_and_unknown_names():
    model = transformer.build_model(cpu_tiny(vocab_size=50)).to("meta")
    with pytest.raises(PrecisionError, match="int8 runs on the CPU only.*use bf16 on a GPU"):
        set_inference_precision(model, "int8")
    with pytest.raises(PrecisionError, match="q4 runs on the CPU only.*use bf16 on a GPU"):
        set_inference_precision(model, "q4")
    with pytest.raises(PrecisionError, match="unknown inference precision 'int4'"):
        set_inference_precision(model, "int4")
    with pytest.raises(ConfigError, match="precision"):
        DecodeConfig(precision="int4")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    torch.manual_seed(0)
    tok = train_bpe(TEXT, vocab_size=300)
    model = transformer.build_model(cpu_tiny(vocab_size=tok.vocab_size, max_positions=32))
    return transformer.save_model(model, tmp_path_factory.mktemp("m") / "mt", tokenizer=tok,
                                  decode=DecodeConfig(beam_size=2, max_len_b=6))


def test_pipeline_precision_comes_from_the_argument_then_decode_json(model_dir):
    assert Pipeline.load(model_dir).precision.precision == "fp32"  # no precision in decode.json: exact
    for precision in ("fp32", "bf16", "int8"):
        pipe = Pipeline.load(model_dir, precision=precision)
        assert (pipe.precision.precision, model_precision(pipe.model)) == (precision, precision)
        assert len(pipe.translate(["the cat", "hace sol"])) == 2
    decode = json.loads((model_dir / "decode.json").read_text())
    (model_dir / "decode.json").write_text(json.dumps({**decode, "precision": "int8"}))
    try:
        assert model_precision(Pipeline.load(model_dir).model) == "int8"
        assert model_precision(Pipeline.load(model_dir, precision="fp32").model) == "fp32"  # the argument wins
    finally:
        (model_dir / "decode.json").write_text(json.dumps(decode))
    with pytest.raises(PipelineError, match="precision is set when the model is loaded"):
        Pipeline.load(model_dir).translate(["the cat"], precision="bf16")


@pytest.mark.parametrize("speedup, chosen", [(3.0, "bf16"), (0.6, "fp32")])
def test_auto_follows_the_bf16_measurement_and_says_so(model_dir, monkeypatch, capsys, speedup, chosen):
    from transformer.cli import main

    monkeypatch.setenv("TRANSFORMER_PRECISION_CACHE", "0")
    monkeypatch.setattr(precision_module, "measure_bf16_speedup", lambda *shape: speedup)
    pipe = Pipeline.load(model_dir, precision="auto")
    assert model_precision(pipe.model) == chosen and pipe.precision.speedup == speedup
    src = model_dir.parent / "src.txt"
    src.write_text("the cat\nhace sol\n")
    assert main(["translate", str(model_dir), "--precision", "auto", "--input", str(src)]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    assert f"note: precision {chosen} (bf16 measured {speedup:.2f}x fp32 on this CPU)" in captured.err
    assert main(["translate", str(model_dir), "--precision", "int8", "--input", str(src)]) == 0
    assert capsys.readouterr().err == ""  # an explicit choice needs no note


@pytest.mark.parametrize("precision", ["q8", "q4"])
def test_fused_projections_give_what_the_separate_layers_give(precision, monkeypatch):
    """q8/q4 stack W^Q, W^K, W^V (and a gated feed-forward's W1, W3) into one product: the logits
    (padded batch, with and without the KV cache) and the greedy tokens are those of the separate
    layers."""
    monkeypatch.setattr(quantize, "MIN_WEIGHT", 0)
    cfg = cpu_tiny(vocab_size=208, **FAMILIES["decoder"])
    torch.manual_seed(0)
    fused = transformer.build_model(cfg).eval()
    separate = transformer.build_model(cfg).eval()
    separate.load_state_dict(fused.state_dict())
    set_inference_precision(fused, precision)
    with monkeypatch.context() as m:
        m.setattr(quantize, "fuse_projections", lambda model, bits: None)
        set_inference_precision(separate, precision)
    assert all(layer.self_attn.qkv_proj is not None for layer in fused.decoder.layers)
    assert all(layer.feed_forward.w13 is not None for layer in fused.decoder.layers)
    assert all(layer.self_attn.qkv_proj is None for layer in separate.decoder.layers)
    ids = torch.randint(4, 208, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[1, :3] = False  # left padding, as a batch of prompts has
    torch.testing.assert_close(outputs(fused, "decoder", ids, mask), outputs(separate, "decoder", ids, mask),
                               atol=1e-5, rtol=1e-5)
    prompts = [[5, 9, 30, 41], [7, 7, 100]]
    got, want = (transformer.sample(m, prompts, max_new_tokens=12, temperature=0.0, min_new_tokens=12)
                 for m in (fused, separate))
    assert torch.equal(got, want)
    # beam search: the beams' queries go through the prefix-tree cache's path
    got, want = (beam_search(m, prompts, beam_size=3, max_len_a=0, max_len_b=10, n_best=3, return_scores=True)
                 for m in (fused, separate))
    assert torch.equal(got[0], want[0])
    torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=1e-5)
