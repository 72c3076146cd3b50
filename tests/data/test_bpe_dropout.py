"""BPE-dropout (data.bpe_dropout): training sentences in several random segmentations of one vocabulary."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer.config import ConfigError, ModelConfig, build_run_config
from transformer.data.tokenizer import TokenizerError, train_word
from transformer.model_dir import load_model, load_tokenizers
from transformer.training import distributed as D
from transformer.training.corpora import prepare_data
from transformer.training.trainer import train

WORDS = ["river", "mountain", "shepherd", "vineyard", "harvest", "kingdom", "servant", "stranger", "morning",
         "evening", "blessing", "promise", "wilderness", "covenant", "thunder", "garden"]


@pytest.fixture(scope="module")
def text_data(tmp_path_factory):
    """A small parallel corpus of long, frequent words: BPE merges them, so dropping merges shows."""
    out = tmp_path_factory.mktemp("text")
    rng = random.Random(0)
    for split, n in (("train", 60), ("valid", 8)):
        src = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5))) for _ in range(n)]
        (out / f"{split}.src").write_text("\n".join(src) + "\n")
        (out / f"{split}.tgt").write_text("\n".join(s.upper() for s in src) + "\n")
    return out


def _config(data_dir: Path, **data):
    return build_run_config({
        "model": {"d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1, "d_ff": 64,
                  "dropout": 0.1, "max_positions": 64},
        "data": {"train_src": str(data_dir / "train.src"), "train_tgt": str(data_dir / "train.tgt"),
                 "valid_src": str(data_dir / "valid.src"), "valid_tgt": str(data_dir / "valid.tgt"),
                 "vocab_size": 320, "max_len": 64, **data},
        "train": {"batch_tokens": 400, "max_steps": 12, "warmup_steps": 4, "valid_every": 6, "save_every": 5,
                  "keep_last": 3, "log_every": 6, "precision": "fp32"},
        "decode": {"beam_size": 1},
    })


def _prepare(config, run_dir: Path, resume: bool = False, said: list | None = None):
    dist = D.DistInfo(0, 1, 0, torch.device("cpu"))
    return prepare_data(config, run_dir, dist, (said if said is not None else []).append, resume)


def _ids(corpus, side: str) -> list[list[int]]:
    return [getattr(corpus[i], side) for i in range(len(corpus))]


def test_each_segmentation_is_the_same_text_in_other_tokens_and_validation_is_not_dropped(text_data, tmp_path):
    plain = _prepare(_config(text_data), tmp_path / "plain")
    said = []
    data = _prepare(_config(text_data, bpe_dropout=0.3, segmentations=3), tmp_path / "run", said=said)
    tok = data.target_tokenizer
    assert tok.tokenizer.to_str() == plain.target_tokenizer.tokenizer.to_str()  # the run's tokenizer: no dropout
    assert json.loads((tmp_path / "run" / "tokenizer.json").read_text())["model"]["dropout"] is None
    assert len(data.segmentations) == 3 and data.train is data.segmentations[0] and not plain.segmentations
    assert any("BPE-dropout 0.3: 3 segmentations" in line for line in said)

    reference = {side: [tok.decode(ids) for ids in _ids(plain.train, side)] for side in ("src", "tgt")}
    segmented = []
    for corpus in data.segmentations:
        assert len(corpus) == len(plain.train)
        for side in ("src", "tgt"):
            assert [tok.decode(ids) for ids in _ids(corpus, side)] == reference[side]  # the same text
        segmented.append(_ids(corpus, "tgt"))
        assert corpus.tgt_lengths.sum() > plain.train.tgt_lengths.sum()  # fewer merges: more tokens
    every = segmented + [_ids(plain.train, "tgt")]
    assert all(a != b for i, a in enumerate(every) for b in every[i + 1:])  # no two segmentations alike
    assert [(e.src, e.tgt) for e in data.valid] == [(e.src, e.tgt) for e in plain.valid]

    # epoch e reads segmentation e mod 3: its batches index it, its collated ids are its ids
    for epoch in range(4):
        corpus = data.corpus(epoch)
        assert corpus is data.segmentations[epoch % 3]
        batches = data.train_batches(epoch)
        assert sorted(i for b in batches for i in b) == list(range(len(corpus)))
        first = batches[0]
        batch = data.collate(first, _model_config(data), epoch=epoch)
        row = batch.tgt_out[0][batch.tgt_out[0] != 0].tolist()
        assert row == corpus[first[0]].tgt + [3]  # ... </s>
        assert data.target_tokens(first, epoch) == int(corpus.tgt_lengths[first].sum()) + len(first)

    # a resumed run opens the same segmentations from the cache instead of drawing new ones
    again = _prepare(_config(text_data, bpe_dropout=0.3, segmentations=3), tmp_path / "run", resume=True)
    for a, b in zip(data.segmentations, again.segmentations, strict=True):
        assert a.path == b.path and np.array_equal(a.tgt_lengths, b.tgt_lengths)
        assert _ids(a, "tgt") == _ids(b, "tgt")


def _model_config(data):
    return ModelConfig(vocab_size=data.target_tokenizer.vocab_size, d_model=8, n_heads=1, d_ff=8)


def test_training_with_bpe_dropout_crosses_epochs_and_resumes_exactly(text_data, tmp_path):
    cfg = _config(text_data, bpe_dropout=0.2, segmentations=2)
    full = train(cfg, tmp_path / "full", log=lambda _: None)
    assert full.steps == 12
    records = [json.loads(line) for line in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    assert max(r["epoch"] for r in records if r["split"] == "train") >= 2  # both segmentations and back

    class Crash(Exception):
        pass

    def crash_at_8(step, record):
        if step == 8:
            raise Crash

    with pytest.raises(Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=crash_at_8)
    train(cfg, tmp_path / "cut", resume=True, log=lambda _: None)

    def losses(run):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        return {r["step"]: r["loss"] for r in map(json.loads, lines) if r["split"] == "train"}

    assert losses(tmp_path / "cut") == losses(tmp_path / "full")
    a, b = load_model(tmp_path / "full" / "last"), load_model(tmp_path / "cut" / "last")
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    src_tok, _ = load_tokenizers(tmp_path / "full" / "last")
    assert json.loads(src_tok.tokenizer.to_str())["model"]["dropout"] is None  # the saved model segments as trained


@pytest.mark.parametrize("data, message", [
    ({"bpe_dropout": 1.0}, r"data.bpe_dropout=1.0 must be in \[0, 1\)"),
    ({"bpe_dropout": -0.1}, r"data.bpe_dropout=-0.1 must be in \[0, 1\)"),
    ({"bpe_dropout": 0.1, "tokenizer": "unigram"}, "data.bpe_dropout is for data.tokenizer = \"bpe\""),
    ({"bpe_dropout": 0.1, "segmentations": 0}, "data.segmentations"),
])
def test_bad_bpe_dropout_settings_name_the_key(text_data, data, message):
    with pytest.raises(ConfigError, match=message):
        _config(text_data, **data)


def test_bpe_dropout_is_for_translation_and_language_models(text_data):
    with pytest.raises(ConfigError, match="data.bpe_dropout is for objectives seq2seq and lm, not 'mlm'"):
        build_run_config({"model": {"arch": "encoder", "d_model": 32, "n_heads": 2, "n_encoder_layers": 1,
                                    "d_ff": 64},
                          "data": {"train_text": str(text_data / "train.tgt"), "bpe_dropout": 0.1}})


def test_a_tokenizer_that_is_not_bpe_cannot_drop_merges(text_data):
    word = train_word((text_data / "train.src").read_text().splitlines(), 100)
    with pytest.raises(TokenizerError, match="BPE-dropout needs a BPE tokenizer, this one is 'word'"):
        word.with_bpe_dropout(0.1)
