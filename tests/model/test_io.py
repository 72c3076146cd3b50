"""Model directories: save -> load is exact; broken files give clear errors."""

import json

import pytest
import torch

import transformer
from transformer.config import cpu_tiny
from transformer.model.io import ModelFileError

CASES = [
    dict(arch="encoder-decoder"),
    dict(arch="encoder-decoder", tgt_vocab_size=30, tie_embeddings=False, output_bias=True),
    dict(arch="decoder", positional="rope", norm="rmsnorm", activation="swiglu", n_kv_heads=2, bias=False),
    dict(arch="encoder", positional="learned", n_token_types=2, mlm_head=True, pooler=True, n_classes=2),
]


@pytest.mark.parametrize("changes", CASES)
def test_save_load_gives_identical_outputs(tmp_path, changes):
    torch.manual_seed(0)
    model = transformer.build_model(cpu_tiny(vocab_size=40, **changes)).eval()
    ids = torch.randint(4, 30, (2, 6))
    out = model(ids, ids) if changes["arch"] == "encoder-decoder" else model(ids)
    transformer.save_model(model, tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["config.json", "model.safetensors"]
    loaded = transformer.load_model(tmp_path / "m")
    assert loaded.config == model.config
    again = loaded(ids, ids) if changes["arch"] == "encoder-decoder" else loaded(ids)
    assert torch.equal(out, again)
    if model.config.tie_embeddings and changes["arch"] != "encoder":
        assert loaded.lm_head.weight is loaded.decoder.embed.tokens.weight
    # loading skips random initialisation: the generator is untouched, and every parameter
    # (tied ones included) is the saved tensor, trainable as before
    state = torch.random.get_rng_state()
    loaded = transformer.load_model(tmp_path / "m")
    assert torch.equal(torch.random.get_rng_state(), state)
    saved = dict(model.named_parameters(remove_duplicate=False))
    for name, p in loaded.named_parameters(remove_duplicate=False):
        assert p.requires_grad and p.dtype == torch.float32 and torch.equal(p, saved[name]), name


@pytest.fixture
def saved(tmp_path):
    model = transformer.build_model(cpu_tiny(vocab_size=40))
    return transformer.save_model(model, tmp_path / "m")


def test_truncated_weights_are_a_clear_error(saved):
    file = saved / "model.safetensors"
    file.write_bytes(file.read_bytes()[:1000])
    with pytest.raises(ModelFileError, match="model.safetensors cannot be read .*truncated or corrupted"):
        transformer.load_model(saved)


def test_config_that_does_not_match_the_weights_is_named(saved):
    config = json.loads((saved / "config.json").read_text())
    config["d_ff"] = 256
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match=r"wrong shapes for encoder.layers.0.feed_forward.w1.weight \(128, 64\) \(config needs \(256, 64\)\)"):
        transformer.load_model(saved)
    config["d_ff"], config["n_decoder_layers"] = 128, 3
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match=r"missing decoder.layers.2"):
        transformer.load_model(saved)


def test_bad_config_json_is_named(saved):
    (saved / "config.json").write_text('{"d_model": 64, "colour": "red"}')
    with pytest.raises(ModelFileError, match="unknown key model.colour"):
        transformer.load_model(saved)
    (saved / "config.json").write_text("{not json")
    with pytest.raises(ModelFileError, match="not valid JSON"):
        transformer.load_model(saved)


def test_missing_directory_or_weights(saved, tmp_path):
    with pytest.raises(ModelFileError, match="is not a directory"):
        transformer.load_model(tmp_path / "nowhere")
    (saved / "model.safetensors").unlink()
    with pytest.raises(ModelFileError, match="no weights"):
        transformer.load_model(saved)


def test_save_leaves_no_temporary_files(saved):
    transformer.save_model(transformer.load_model(saved), saved)
    assert sorted(p.name for p in saved.iterdir()) == ["config.json", "model.safetensors"]


def test_save_model_and_load_model_sit_together_in_model_dir(tmp_path):
    """model_dir.py reads and writes a whole model directory; model/io.py only its config and weight
    files, knowing no directory's file names."""
    import transformer.model.io as io
    import transformer.model_dir as model_dir

    assert transformer.save_model is model_dir.save_model and transformer.load_model is model_dir.load_model
    assert not hasattr(io, "load_model") and not hasattr(io, "save_model")
    assert not any(name.endswith("_FILE") for name in vars(io))
    model = transformer.build_model(cpu_tiny(vocab_size=40)).eval()
    model_dir.save_weights(model, tmp_path / "m")
    assert model_dir.load_weights(tmp_path / "m").config == model.config
    io.write_config(model.config, tmp_path / "c.json")
    io.write_weights(model, tmp_path / "w.safetensors")
    again = io.read_weights(io.read_config(tmp_path / "c.json"), tmp_path / "w.safetensors", tmp_path / "c.json")
    assert again.config == model.config
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), model.state_dict().values(), strict=True))
