"""Inference precision: bf16 and int8 models compute what the fp32 model does, within their rounding;
Pipeline.load / the CLI pick the precision from the flag, then decode.json, and "auto" measures."""

import json

import pytest
import torch

import transformer
import transformer.runtime.precision as precision_module
from transformer.config import ConfigError, DecodeConfig, cpu_tiny
from transformer.data.tokenizer import train_bpe
from transformer.decoding.pipeline import Pipeline, PipelineError
from transformer.model.quantize import PrecisionError, model_precision, set_inference_precision

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
@pytest.mark.parametrize("precision, tolerance", [("bf16", 0.05), ("int8", 0.05)])
def test_reduced_precision_stays_close_to_fp32(arch, precision, tolerance):
    torch.manual_seed(0)
    model = transformer.build_model(cpu_tiny(vocab_size=200, **FAMILIES[arch])).eval()
    ids = torch.randint(4, 200, (3, 9))
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
    else:
        assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


def test_int8_refuses_a_model_not_on_the_cpu_and_unknown_names():
    model = transformer.build_model(cpu_tiny(vocab_size=50)).to("meta")
    with pytest.raises(PrecisionError, match="int8 runs on the CPU only.*use bf16 on a GPU"):
        set_inference_precision(model, "int8")
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
