"""train.init_parts: a part of a new model loaded from another model directory. A ViT classifier's
encoder becomes a captioner's image encoder with the same outputs; a run logs what it loaded and
trains on; wrong names, sizes, tokens and tables are one-line errors."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.training.test_caption import NAMES, config, write_split
from transformer.config import ConfigError, build_run_config
from transformer.data.tokenizer import train_char
from transformer.model.build import build_model
from transformer.model_dir import load_model, load_tokenizers
from transformer.training.parts import load_parts
from transformer.training.trainer import train


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A ViT classifier and a captioner of the same encoder sizes, each trained a few steps."""
    root = tmp_path_factory.mktemp("parts")
    write_split(root / "train.safetensors", 8, 1)
    write_split(root / "valid.safetensors", 2, 2)
    classifier = config(root, 4, model={"arch": "encoder", "n_decoder_layers": 0})
    classifier["data"] = {k: v for k, v in classifier["data"].items() if k not in ("tokenizer", "vocab_size", "max_len")}
    train(build_run_config(classifier), root / "vit", log=lambda _: None)
    train(build_run_config(config(root, 4)), root / "captioner", log=lambda _: None)
    return root


def _pixels() -> torch.Tensor:
    return torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(0)) * 2 - 1


def test_a_classifiers_encoder_becomes_a_captioners_with_the_same_outputs(runs):
    source = load_model(runs / "vit" / "best").eval()
    captioner = build_model(load_model(runs / "captioner" / "best").config).eval()
    with torch.no_grad():
        assert not torch.allclose(captioner.encoder(_pixels()), source.encoder(_pixels()))
        lines = load_parts(captioner, {"encoder": {"from": str(runs / "vit" / "best"), "part": "encoder"}}, None)
        assert torch.equal(captioner.encoder(_pixels()), source.encoder(_pixels()))
    assert lines == [f"encoder: {runs / 'vit' / 'best'}'s encoder ({sum(p.numel() for p in source.encoder.parameters()) / 1e6:.2f}M parameters)"]


def test_a_run_loads_its_parts_and_trains_on(runs):
    lines = []
    values = config(runs, 2, train={"init_parts": {"encoder": str(runs / "vit" / "best")}})
    built = build_run_config(values)
    assert built.train.init_parts == {"encoder": {"from": str(runs / "vit" / "best"), "part": "encoder"}}
    assert 'encoder = {from = ' in built.to_toml()
    train(built, runs / "parts-run", log=lines.append)
    assert any(x.startswith("init_parts: encoder: ") for x in lines)
    assert (runs / "parts-run" / "last" / "model.safetensors").is_file()


def test_parts_that_do_not_fit_are_one_line(runs):
    captioner = load_model(runs / "captioner" / "best")
    vit = str(runs / "vit" / "best")
    with pytest.raises(ConfigError, match=r"this run's model has no part 'image_encoder': its parts are encoder, decoder, lm_head"):
        load_parts(captioner, {"image_encoder": {"from": vit, "part": "encoder"}}, None)
    with pytest.raises(ConfigError, match=rf"{vit} has no part 'decoder'"):
        load_parts(captioner, {"decoder": {"from": vit, "part": "decoder"}}, None)
    wider = build_model(dataclasses.replace(captioner.config, d_model=48))
    with pytest.raises(ConfigError, match=r"'s encoder does not fit this model's encoder \(.*\(here .*\): give \[model\]"):
        load_parts(wider, {"encoder": {"from": vit, "part": "encoder"}}, None)
    for bad in ([vit], {}, {"encoder": {"from": vit, "layer": "x"}}, {"encoder": 3}):
        with pytest.raises(ConfigError, match="is not valid: give a table of part = "):
            build_run_config(config(runs, 2, train={"init_parts": bad}))


def test_a_part_that_embeds_tokens_needs_its_tokenizer(runs):
    source = str(runs / "captioner" / "best")
    tokenizer = load_tokenizers(source)[1]
    model = build_model(load_model(source).config)
    load_parts(model, {"decoder": {"from": source, "part": "decoder"}}, tokenizer)  # the same tokens
    load_parts(model, {"encoder": {"from": source, "part": "encoder"}}, None)  # no tokens in the part
    upper = train_char([n.upper() for n in NAMES] * 2, 64)  # as many tokens, other ones
    assert upper.vocab_size == tokenizer.vocab_size
    for others in (upper, None):
        with pytest.raises(ConfigError, match=rf"{source}'s decoder embeds the tokens of its own tokenizer \(\d+ tokens\), and this run reads others"):
            load_parts(model, {"decoder": {"from": source, "part": "decoder"}}, others)
