"""A language model on packed text (objectives/lm.py): each epoch's batches predict every token of
the stream once, validation equals `evaluate --text` with windows of block_size side by side,
resume is exact, and settings that make no sense are refused in one line."""

import math
from collections import Counter

import pytest
import torch

from tests.cli.common import run
from transformer.config import ConfigError, build_run_config
from transformer.tasks import prepare_objective
from transformer.training import distributed as D
from transformer.training.objectives import PackedLM
from transformer.training.trainer import train

from ..data.test_stream import TEXT

SOLO = D.DistInfo(0, 1, 0, torch.device("cpu"))


@pytest.fixture
def texts(tmp_path):
    (tmp_path / "train.txt").write_text(TEXT * 30, encoding="utf-8")
    (tmp_path / "valid.txt").write_text(TEXT * 3, encoding="utf-8")
    return tmp_path


def lm_config(texts, data=None, **train):
    return build_run_config({
        "model": {"arch": "decoder", "d_model": 32, "n_heads": 2, "n_decoder_layers": 1, "d_ff": 64,
                  "norm_position": "pre", "max_positions": 32, "dropout": 0.1},
        "data": {"train_text": str(texts / "train.txt"), "valid_text": str(texts / "valid.txt"),
                 "tokenizer": "char", "vocab_size": 100, "block_size": 24, **(data or {})},
        "train": {"batch_tokens": 96, "max_steps": 10, "valid_every": 5, "save_every": 4, "keep_last": 2,
                  "schedule": "cosine", "lr": 3e-3, "warmup_steps": 2, "label_smoothing": 0.0,
                  "precision": "fp32", **train},
    })


@pytest.mark.parametrize("documents", ["file", "line"])
def test_an_epoch_predicts_every_token_once(texts, tmp_path, documents):
    cfg = lm_config(texts, {"documents": documents})
    task = prepare_objective(cfg, tmp_path / "run", SOLO, lambda _: None)
    assert isinstance(task, PackedLM) and task.rows == 4
    stream = task.train.ids.tolist()
    expect = Counter(t for t in stream if t != task.bos)  # a <s> only begins a document
    for epoch in (0, 1):
        got, units = Counter(), 0
        batches = task.batches(epoch)
        for k, indices in enumerate(batches):
            batch = task.collate(indices, (epoch, k))
            assert batch.tgt_in.shape[1] <= 24 and batch.src is None
            targets = batch.tgt_out[batch.tgt_out != task.pad].tolist()
            got.update(targets)
            assert task.units(indices, (epoch, k)) == batch.n_tokens == len(targets)
            units += batch.n_tokens
        assert got == expect and units == len(stream) - stream.count(task.bos)
    assert task.batches(0)[0] != task.batches(1)[0]  # another order (and offset) each epoch
    assert task.padding_share(task.batches(0)) < 24 / len(stream)


def test_validation_equals_evaluate_text(texts, tmp_path, runs, capsys):
    """The run's validation loss and bits per character are evaluate --text's with windows of
    block_size moved by block_size; the default training text needs no max_len."""
    result = train(lm_config(texts, max_steps=5), tmp_path / "run", log=lambda _: None)
    valid = runs.valid_records(tmp_path / "run")[-1]
    code, out, _ = run(["evaluate", str(result.last_dir), "--text", str(texts / "valid.txt"),
                        "--window", "24"], capsys)
    assert code == 0, out
    nats_token = float(out.split(": ")[1].split(" nats per token")[0])
    nats_char = float(out.split("; ")[1].split(" nats = ")[0])
    assert nats_token == pytest.approx(valid["valid_nll"], abs=1e-4)
    assert nats_char == pytest.approx(valid["valid_nll_per_char"], abs=1e-4)
    assert f"over {len(TEXT * 3):,} characters" in out


def test_resume_repeats_the_uninterrupted_losses(texts, tmp_path, runs):
    cfg = lm_config(texts)
    train(cfg, tmp_path / "full", log=lambda _: None)
    with pytest.raises(runs.Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=runs.crash_at(6))
    said = []
    train(cfg, tmp_path / "cut", resume=True, log=said.append)
    assert any(line.startswith("data: prepared stream") for line in said)
    full, resumed = runs.losses(tmp_path / "full"), runs.losses(tmp_path / "cut")
    assert sorted(full) == list(range(1, 11)) and resumed == full
    assert all(math.isfinite(v) for v in full.values())


@pytest.mark.parametrize("data,model,objective,message", [
    ({"block_size": 64}, {}, None, "data.block_size=64 exceeds model.max_positions=32"),
    ({"pack": True}, {"arch": "encoder"}, None, "data.pack is for objective lm, not 'mlm'"),
    ({"bpe_dropout": 0.1, "tokenizer": "bpe", "vocab_size": 300}, {}, None,
     "data.bpe_dropout is not available on packed text"),
    ({"documents": "page"}, {}, None, "data.text.documents"),
])
def test_settings_that_make_no_sense(texts, data, model, objective, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cfg = lm_config(texts, data)
        build_run_config({**cfg.to_dict(), "model": {**cfg.to_dict()["model"], **model}})


def test_one_example_per_line_is_kept(texts, tmp_path):
    """pack = false: the per-line language model (max_len applies, not block_size)."""
    cfg = lm_config(texts, {"pack": False, "max_len": 32})
    assert not cfg.packed
    task = prepare_objective(cfg, tmp_path / "run", SOLO, lambda _: None)
    assert not isinstance(task, PackedLM) and task.name == "lm"


def test_each_validation_sees_the_weights_of_its_step(texts, tmp_path, runs):
    """Validation's linear layers (64 x 1024: large enough for model.linear's packed copies) see
    the weights the fused AdamW wrote: each in-run validation equals the checkpoint of its step
    evaluated afresh. (The fused kernel does not bump version counters; before the loop did, the
    second validation read the packed weights of the first.)"""
    from transformer.model_dir import load_model

    cfg = lm_config(texts, max_steps=6, valid_every=3, save_every=3, lr=1e-2)
    cfg = build_run_config({**cfg.to_dict(), "model": {**cfg.to_dict()["model"], "d_model": 64, "d_ff": 1024}})
    train(cfg, tmp_path / "run", log=lambda _: None)
    task = prepare_objective(cfg, tmp_path / "again", SOLO, lambda _: None)
    in_run = {r["step"]: r["valid_loss"] for r in runs.valid_records(tmp_path / "run")}
    assert sorted(in_run) == [3, 6]
    for step, loss in in_run.items():
        model = load_model(tmp_path / "run" / "checkpoints" / f"step-{step:06d}")
        task.bind(model)
        assert task.validate(model, torch.device("cpu"))["valid_loss"] == pytest.approx(loss, rel=1e-5)
