"""data.protect_markup: the setting (TOML, --set, the run's config.toml), the pairs read masked for
the tokenizer, the corpus (its own cache key) and validation, the tokenizer's slot tokens checked
against the setting, and a tiny real run whose translations keep every placeholder."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from transformer.config import ConfigError, build_run_config, load_config
from transformer.data import corpus as C
from transformer.data.markup import span_texts
from transformer.data.tokenizer import TokenizerError, train_bpe
from transformer.training import distributed as D
from transformer.training.corpora import prepare_data
from transformer.training.tokenizing import check_slot_tokens, tokenizer_cache_key

SOLO = D.DistInfo(0, 1, 0, torch.device("cpu"))
WORDS = ["archivo", "ventana", "botón", "carpeta", "usuario"]
ENGLISH = {"archivo": "file", "ventana": "window", "botón": "button", "carpeta": "folder",
           "usuario": "user"}
MARKS = ["%s", "%d", "<b>", "</b>", "{name}", "&amp;", "$HOME", "https://x.org/a"]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Aligned pairs "abre el W M" -> "open the W' M" with placeholders M, and validation pairs."""
    tmp = tmp_path_factory.mktemp("markup")
    src, tgt = [], []
    for i in range(240):
        w, m = WORDS[i % 5], MARKS[i % len(MARKS)]
        src.append(f"abre el {w} {m} ahora")
        tgt.append(f"open the {ENGLISH[w]} {m} now")
    out = {}
    for split, n in (("train", 240), ("valid", 16)):
        for side, lines in (("src", src), ("tgt", tgt)):
            path = tmp / f"{split}.{side}"
            path.write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
            out[f"{split}_{side}"] = str(path)
    out["cache"] = str(tmp / "cache")
    return out


def config(files, protect=True, **train):
    return build_run_config({
        "model": {"d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1, "d_ff": 64,
                  "dropout": 0.0, "max_positions": 64},
        "data": {**{k: v for k, v in files.items() if k != "cache"}, "vocab_size": 300, "max_len": 48,
                 "cache": files["cache"], "protect_markup": protect, "source_lang": "es", "target_lang": "en"},
        "train": {"batch_tokens": 512, "max_steps": 30, "warmup_steps": 5, "valid_every": 30, "save_every": 30,
                  "log_every": 10, "precision": "fp32", "lr": 3e-3, "bleu_samples": 4, **train},
        "decode": {"beam_size": 1, "max_len_b": 12},
    })


def test_the_setting_reads_from_toml_and_set_and_round_trips(tmp_path, files):
    file = tmp_path / "c.toml"
    file.write_text(f'[data]\ntrain_src = "{files["train_src"]}"\ntrain_tgt = "{files["train_tgt"]}"\n'
                    "protect_markup = true\n", encoding="utf-8")
    assert load_config(file).data.protect_markup is True
    assert load_config(file, ["data.protect_markup=false"]).data.protect_markup is False
    again = tmp_path / "again.toml"
    again.write_text(load_config(file).to_toml(), encoding="utf-8")
    assert load_config(again).data.protect_markup is True
    assert load_config(again) == load_config(file)
    lm = tmp_path / "lm.toml"
    lm.write_text('[model]\narch = "decoder"\n[data]\ntrain_text = "t.txt"\nprotect_markup = true\n')
    with pytest.raises(ConfigError, match="data.protect_markup is for translation pairs"):
        load_config(lm)
    # the language pair: given whole, as codes, two of them, for translation only
    assert load_config(file, ['data.source_lang="es"', 'data.target_lang="en"']).data.target_lang == "en"
    for sets, message in (
        (['data.source_lang="es"'], "data.source_lang is set and data.target_lang is not"),
        (['data.source_lang="Spanish"', 'data.target_lang="en"'], "data.source_lang='Spanish' is not a language code"),
        (['data.source_lang="es"', 'data.target_lang="es"'], "are both 'es'"),
    ):
        with pytest.raises(ConfigError, match=message):
            load_config(file, sets)
    lm.write_text('[model]\narch = "decoder"\n[data]\ntrain_text = "t.txt"\nsource_lang = "es"\ntarget_lang = "en"\n')
    with pytest.raises(ConfigError, match="name a translation's languages"):
        load_config(lm)


def test_the_tokenizer_and_corpus_keys_know_the_setting(files):
    on, off = config(files), config(files, protect=False)
    assert tokenizer_cache_key(on) != tokenizer_cache_key(off)
    assert "protect_markup" not in tokenizer_cache_key(off)  # old caches keep their keys
    tok = train_bpe(["abre el archivo"] * 10, vocab_size=300)
    args = (files["train_tgt"], files["train_src"], tok, tok, 48)
    assert C.corpus_key(*args, protect=True) != C.corpus_key(*args) == C.corpus_key(*args, protect=False)


def test_prepared_data_is_masked_and_the_tokenizer_holds_the_slots(tmp_path, files):
    data = prepare_data(config(files), tmp_path / "run", SOLO, say=lambda _: None)
    tok = data.source_tokenizer
    assert tok.protects_markup
    pairs = [(tok.decode(e.src), tok.decode(e.tgt)) for e in data.train[:8]]
    assert pairs[0] == ("abre el archivo ｟1｠ ahora", "open the file ｟1｠ now")
    assert all("%" not in s and "<" not in t for s, t in pairs)
    assert data.valid_references[2] == "open the button ｟1｠ now"  # validation BLEU compares masked
    assert data.train.header["key"]["protect_markup"] is True
    plain = prepare_data(config(files, protect=False), tmp_path / "plain", SOLO, say=lambda _: None)
    assert plain.train.path != data.train.path and not plain.source_tokenizer.protects_markup
    assert plain.source_tokenizer.decode(plain.train[0].src) == "abre el archivo %s ahora"


def test_a_tokenizer_must_hold_the_slots_exactly_when_the_setting_is_on(files):
    tok = train_bpe(["abre el archivo"] * 10, vocab_size=300)
    with pytest.raises(TokenizerError, match="data.protect_markup is on but train.init_from's tokenizer has no slot"):
        check_slot_tokens(config(files), tok, "train.init_from's")
    check_slot_tokens(config(files, protect=False), tok, "train.init_from's")


def test_a_tiny_run_translates_keeping_every_placeholder(tmp_path, files, capsys):
    from transformer.cli import main
    from transformer.decoding.pipeline import Pipeline
    from transformer.training.trainer import train

    train(config(files), tmp_path / "run", log=lambda _: None)
    assert "protect_markup = true" in (tmp_path / "run" / "config.toml").read_text()
    pipeline = Pipeline.load(tmp_path / "run" / "last")
    assert pipeline.languages == {"source": "es", "target": "en"}  # the recipe's pair, recorded
    lines = ["abre el usuario %s ahora", "abre la <b>ventana</b> y {name} &amp; %d", "abre el botón"]
    for beam in (1, 2):
        for line, output in zip(lines, pipeline.translate(lines, beam_size=beam), strict=True):
            assert Counter(span_texts(output)) == Counter(span_texts(line)), (line, output)
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ref.write_text("open the user %s now\nx\nopen the button now\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "run" / "last"), "--src", str(src), "--ref", str(ref)]) == 0
    out = capsys.readouterr().out
    assert "placeholders kept: 100.0% (2 of the 2 lines with placeholders or markup" in out
    assert main(["evaluate", str(tmp_path / "run" / "last"), "--src", str(src), "--ref", str(ref),
                 "--no-keep-markup"]) == 0
    assert "placeholders kept:" in capsys.readouterr().out
