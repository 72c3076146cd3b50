"""A mixture of training sources (data.text.train_src as a list, data.text.train_weights): each epoch holds
weight x each source's examples, a pure function of (seed, epoch); the tokenizer sees the mixture;
validation lists are read one after the other; bad mixtures get one clear line."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer.config import ConfigError, DataConfig, RunConfig, build_run_config, load_config
from transformer.data.mixture import Mixture
from transformer.training import distributed as D
from transformer.training.corpora import prepare_data
from transformer.training.tokenizing import mixture_texts, tokenizer_cache_key

SOLO = D.DistInfo(0, 1, 0, torch.device("cpu"))


def write(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, str]:
    """Two aligned sources of different sizes whose lines say which source and row they are."""
    tmp = tmp_path_factory.mktemp("mixture")
    return {
        "a_src": write(tmp / "a.src", [f"uno {i} dos" for i in range(40)]),
        "a_tgt": write(tmp / "a.tgt", [f"one {i} two" for i in range(40)]),
        "b_src": write(tmp / "b.src", [f"adios {i}" for i in range(10)]),
        "b_tgt": write(tmp / "b.tgt", [f"bye {i}" for i in range(10)]),
        "cache": str(tmp / "cache"),
    }


def run_config(sources: dict[str, str], weights=(0.5, 2.5), **data) -> RunConfig:
    s = sources
    values = {
        "model": {"d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1,
                  "d_ff": 64, "max_positions": 64},
        "data": {"train_src": [s["a_src"], s["b_src"]], "train_tgt": [s["a_tgt"], s["b_tgt"]],
                 "train_weights": list(weights), "valid_src": [s["a_src"], s["b_src"]],
                 "valid_tgt": [s["a_tgt"], s["b_tgt"]], "vocab_size": 300, "max_len": 32,
                 "cache": s["cache"], **data},
        "train": {"batch_tokens": 128, "seed": 3, "precision": "fp32"},
    }
    return build_run_config(values)


@pytest.fixture(scope="module")
def data(sources, tmp_path_factory):
    return prepare_data(run_config(sources), tmp_path_factory.mktemp("run"), SOLO, say=print)


def decoded(data, example) -> tuple[str, str]:
    return data.source_tokenizer.decode(example.src), data.target_tokenizer.decode(example.tgt)


def test_an_epoch_holds_weight_times_each_source(data):
    """0.5 x 40 rows of a (20 distinct), 2.5 x 10 of b (each row twice, 5 of them three times); each
    example is its own source's aligned pair."""
    for epoch in range(3):
        view = data.corpus(epoch)
        pairs = [decoded(data, view[i]) for i in range(len(view))]
        a = Counter(p for p in pairs if p[0].startswith("uno"))
        b = Counter(p for p in pairs if p[0].startswith("adios"))
        assert len(view) == 45 and sum(a.values()) == 20 and sum(b.values()) == 25
        assert set(a.values()) == {1} and sorted(Counter(b.values()).items()) == [(2, 5), (3, 5)]
        for src, tgt in pairs:
            n = src.split()[1]
            assert tgt in (f"one {n} two", f"bye {n}")
        # the arrays describe the rows the view returns
        assert [len(view[i].tgt) for i in range(len(view))] == view.tgt_lengths.tolist()
        assert [len(view[i].src) for i in range(len(view))] == view.src_lengths.tolist()


def test_epochs_are_a_pure_function_of_seed_and_epoch(sources, data, tmp_path):
    again = prepare_data(run_config(sources), tmp_path, SOLO, say=lambda _: None)
    for epoch in range(3):
        assert np.array_equal(data.corpus(epoch).index, again.corpus(epoch).index)
        assert data.train_batches(epoch) == again.train_batches(epoch)
    assert not np.array_equal(np.sort(data.corpus(0).index), np.sort(data.corpus(1).index))
    assert np.array_equal(data.train.index, data.corpus(0).index)


def test_validation_lists_are_read_one_after_the_other(data):
    assert len(data.valid) == 50
    assert data.valid_references[:2] == ["one 0 two", "one 1 two"]
    assert data.valid_references[40:42] == ["bye 0", "bye 1"]


def test_the_tokenizer_sees_each_source_by_its_weight(sources):
    parts = [(sources["a_tgt"], sources["a_src"]), (sources["b_tgt"], sources["b_src"])]
    texts = list(mixture_texts(parts, [0.5, 2.5], "target", sample=20))
    a = sum(t.startswith("one") for t in texts)
    b = sum(t.startswith("bye") for t in texts)
    assert (a, b) == (9, 10)  # 20 x 20/45 and 20 x 25/45, b capped at its 10 lines
    assert len(list(mixture_texts(parts, [1, 1], "both", sample=0))) == 100
    assert tokenizer_cache_key(run_config(sources)) != tokenizer_cache_key(
        run_config(sources, weights=(1, 1))
    )


def test_weight_zero_leaves_a_source_out(sources, tmp_path):
    data = prepare_data(
        run_config(sources, weights=(1, 0)), tmp_path, SOLO, say=lambda _: None
    )
    assert len(data.train) == 40
    assert all(decoded(data, data.train[i])[0].startswith("uno") for i in range(40))


def test_the_resolved_config_round_trips_through_toml(sources, tmp_path):
    config = run_config(sources)
    path = tmp_path / "config.toml"
    path.write_text(config.to_toml(), encoding="utf-8")
    again = load_config(str(path))
    assert again.data == config.data
    assert again.data.text.train_weights == (0.5, 2.5) and again.data.train_sources[1][0].endswith("b.src")


@pytest.mark.parametrize(
    "values, says",
    [
        ({"train_src": ["a", "b"], "train_tgt": ["c"]}, "data.train_src has 2 files but data.train_tgt has 1"),
        ({"train_src": "a", "train_tgt": "b", "train_weights": [1, 2]}, "2 weights for 1"),
        ({"train_src": ["a", "b"], "train_tgt": ["c", "d"], "train_weights": [0, 0]}, "at least one of them above 0"),
        ({"train_src": ["a", "b"], "train_tgt": ["c", "d"], "train_weights": [1, -1]}, "numbers >= 0"),
        ({"train_src": ["a", 3], "train_tgt": ["c", "d"]}, "it must be str or a list of str"),
        ({"train_src": [], "train_tgt": []}, "empty list"),
        ({"train_text": "a", "train_weights": [1.0]}, "data.train_weights weighs the files of a mixture"),
        ({"train_src": ["a", "b"], "train_tgt": ["c", "d"], "bpe_dropout": 0.1}, "not a mixture"),
    ],
)
def test_bad_mixtures_say_what_to_change(values, says):
    with pytest.raises(ConfigError, match=says.replace("[", r"\[")):
        DataConfig.from_dict(values)


def test_a_mixture_of_one_file_is_the_plain_corpus(sources):
    d = DataConfig.from_dict({"train_src": [sources["a_src"]], "train_tgt": [sources["a_tgt"]]})
    assert not d.is_mixture and d.train_sources == ((sources["a_src"], sources["a_tgt"]),)
    assert Mixture([], [], 0).counts() == []
