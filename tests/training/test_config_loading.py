"""A run config from TOML: overrides, round trip, one-line errors, the presets."""

from __future__ import annotations

from pathlib import Path

import pytest

from transformer.config import ConfigError, load_config


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_load_config_with_overrides_and_round_trip(tmp_path):
    file = _write(tmp_path / "c.toml", '[model]\narch = "decoder"\nd_model = 64\nn_heads = 4\n[data]\ntrain_text = "x.txt"\n[train]\nmax_steps = 5\n')
    cfg = load_config(file, ["train.max_steps=7", "train.lr_factor=2", "data.text.valid_text=v.txt", "train.precision=bf16",
                             "decode.beam_size=2"])
    assert (cfg.train.max_steps, cfg.train.lr_factor, cfg.data.text.valid_text) == (7, 2, "v.txt")
    assert cfg.train.precision == "bf16" and cfg.decode.beam_size == 2 and cfg.model.arch == "decoder"
    again = load_config(_write(tmp_path / "resolved.toml", cfg.to_toml()))
    assert again == cfg


@pytest.mark.parametrize("override, message", [
    ("train.max_step=3", r"unknown key train\.max_step \(did you mean 'max_steps'\?\); valid keys: accumulate"),
    ("trian.seed=1", r"unknown section \[trian\] \(did you mean \[train\]\?\)"),
    ("model.d_modle=8", r"unknown key model\.d_modle \(did you mean 'd_model'\?\)"),
    ("train.precision=fp8", r"train\.precision='fp8' is not valid: choose one of 'auto', 'fp32', 'bf16', 'fp16'"),
    ("train.max_steps=\"ten\"", r"train\.max_steps='ten' is not valid: it must be int"),
    ("data.vocab_size=100", r"data\.vocab_size=100 is too small"),
    ("model.vocab_size=300", r"model\.vocab_size is set by the trained tokenizer"),
    ("model.arch=\"encoder\"", r"model\.arch='encoder' cannot be trained with objective 'seq2seq'"),
    ("noequals", r"write section\.key=value"),
])
def test_bad_config_values_are_one_line_errors(tmp_path, override, message):
    file = _write(tmp_path / "c.toml", '[data]\ntrain_src = "a"\ntrain_tgt = "b"\n')
    with pytest.raises(ConfigError, match=message) as info:
        load_config(file, [override])
    assert "\n" not in str(info.value)


def test_preset_configs_load():
    presets = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.toml"))
    assert {p.stem for p in presets} >= {"copy", "base", "big", "cpu-translation", "lm"}
    for preset in presets:
        load_config(preset)
    big = load_config(presets[[p.stem for p in presets].index("big")])
    assert (big.model.d_model, big.model.d_ff, big.model.n_heads, big.model.dropout) == (1024, 4096, 16, 0.3)
