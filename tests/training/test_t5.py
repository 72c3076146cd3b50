"""T5's span corruption (data.noising) and its pretraining objective on a T5-layout encoder-decoder."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

import pytest
import torch

from transformer.config import build_run_config
from transformer.data.noising import corrupt_spans, noise_spans, span_corruption_lengths, uncorrupt
from transformer.evaluation.overlap import rouge
from transformer.model_dir import load_model, load_tokenizers
from transformer.model_records import load_special_tokens
from transformer.training.trainer import train

SENTINELS = list(range(1000, 1100))


@pytest.mark.parametrize("length", [1, 2, 3, 7, 20, 33, 100, 512])
def test_corruption_reassembles_the_text_with_sentinels_in_order(length):
    gen = torch.Generator().manual_seed(length)
    ids = [random.Random(length).randrange(5, 900) for _ in range(length)]
    for _ in range(20):
        inputs, targets = corrupt_spans(ids, SENTINELS, gen)
        assert uncorrupt(inputs, targets, SENTINELS) == ids
        used = [t for t in targets if t in SENTINELS]
        assert used == SENTINELS[:len(used)] and [t for t in inputs if t in SENTINELS] == used  # 0, 1, 2, ... both sides
        assert targets[0] == SENTINELS[0]  # the target starts with the first sentinel
        assert (len(inputs), len(targets)) == span_corruption_lengths(length)


def test_noise_density_and_span_lengths_follow_t5():
    gen = torch.Generator().manual_seed(0)
    hidden = total = 0
    span_lengths, first_kept = [], []
    for length in range(20, 220):
        spans = noise_spans(length, gen)
        hidden += sum(end - start for start, end in spans)
        total += length
        span_lengths += [end - start for start, end in spans]
        first_kept.append(spans[0][0])
        assert all(a[1] < b[0] for a, b in zip(spans[:-1], spans[1:], strict=True))  # kept tokens between spans
        assert spans[-1][1] == length  # T5's runs alternate kept, noise, ...: the text ends in noise
    assert hidden / total == pytest.approx(0.15, abs=0.005)
    assert statistics.mean(span_lengths) == pytest.approx(3.0, abs=0.15)
    assert min(first_kept) >= 1  # ... and starts with kept tokens
    assert noise_spans(1, gen) == [(0, 1)]  # a one-token text is one span


def test_sentinels_run_out_is_a_clear_error():
    with pytest.raises(ValueError, match="only 2 sentinel tokens: train the tokenizer with more"):
        corrupt_spans(list(range(10, 110)), [1, 2], torch.Generator().manual_seed(0))


def _t5_config(root: Path, **train_values) -> dict:
    words = "the a of and to in is it that was on for with as by at from this be".split()
    r = random.Random(0)
    for name, n in (("train", 300), ("valid", 40)):
        (root / f"{name}.txt").write_text("".join(" ".join(r.choice(words) for _ in range(r.randint(4, 30))) + "\n"
                                                  for _ in range(n)))
    return {
        "model": {"arch": "encoder-decoder", "d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1,
                  "d_ff": 64, "dropout": 0.0, "norm_position": "pre", "norm": "rmsnorm", "positional": "t5_bias",
                  "bias": False, "activation": "geglu_tanh", "scale_embedding": False, "scale_attention": False,
                  "relative_bias": {"buckets": 8, "max_distance": 16}},
        "data": {"train_text": str(root / "train.txt"), "valid_text": str(root / "valid.txt"), "tokenizer": "word",
                 "vocab_size": 60, "sentinels": 10, "max_len": 40, "cache": str(root / "cache")},
        "train": {"objective": "span_corruption", "batch_tokens": 400, "max_steps": 40, "warmup_steps": 10,
                  "lr_factor": 1.0, "valid_every": 20, "save_every": 20, "log_every": 10, "bleu_samples": 0,
                  "precision": "fp32", **train_values},
    }


def test_span_corruption_training_reserves_sentinels_and_learns(tmp_path):
    config = build_run_config(_t5_config(tmp_path))
    lines = []
    train(config, tmp_path / "run", log=lines.append)
    tok, _ = load_tokenizers(tmp_path / "run" / "last")
    assert [tok.token_to_id(f"<extra_id_{k}>") for k in range(10)] == list(range(4, 14))  # after <pad> <unk> <s> </s>
    record = load_special_tokens(tmp_path / "run" / "last")
    assert record == {"sentinels": " ".join(f"<extra_id_{k}>" for k in range(10))}
    model = load_model(tmp_path / "run" / "last")
    assert model.config.positional == "t5_bias" and model.config.vocab_size == tok.vocab_size
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    valid = [m["valid_loss"] for m in metrics if m.get("split") == "valid"]
    # it learns the targets' structure (sentinel, a span of filler words, the next sentinel, </s>): far
    # below a uniform guess over the vocabulary (ln V), and below a uniform guess over the 20 words
    assert len(valid) == 2 and max(valid) < min(0.75 * math.log(tok.vocab_size), math.log(20))


def test_span_corruption_resumes_exactly(tmp_path):
    config = build_run_config(_t5_config(tmp_path, max_steps=30, save_every=15, valid_every=100))
    train(config, tmp_path / "whole", log=lambda _: None)
    half = build_run_config(_t5_config(tmp_path, max_steps=15, save_every=15, valid_every=100))
    train(half, tmp_path / "resumed", log=lambda _: None)
    train(config, tmp_path / "resumed", resume=True, log=lambda _: None)
    a, b = (load_model(tmp_path / run / "last").state_dict() for run in ("whole", "resumed"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def _pairs_task(root: Path) -> Path:
    """Two tasks in one TSV: 'reverse: w1 w2 ...' -> the words reversed, 'first: w1 w2 ...' -> w1."""
    r = random.Random(1)
    words = "sun moon star rain snow wind fire leaf rock tree".split()
    for name, n in (("train", 1200), ("valid", 60)):
        lines = []
        for _ in range(n):
            ws = [r.choice(words) for _ in range(r.randint(2, 5))]
            lines.append(f"reverse: {' '.join(ws)}\t{' '.join(reversed(ws))}" if r.random() < 0.5 else
                         f"first: {' '.join(ws)}\t{ws[0]}")
        (root / f"{name}.tsv").write_text("\n".join(lines) + "\n")
    return root


def test_a_text_to_text_mixture_trains_evaluates_per_task_and_translates_with_a_prefix(tmp_path, capsys):
    from transformer.cli import main

    root = _pairs_task(tmp_path)
    values = _t5_config(tmp_path, objective="seq2seq", max_steps=60, warmup_steps=20, valid_every=20,
                        save_every=60, batch_tokens=600, lr_factor=0.5)
    values["data"] = {"train_pairs": str(root / "train.tsv"), "valid_pairs": str(root / "valid.tsv"),
                      "tokenizer": "word", "vocab_size": 40, "max_len": 16, "cache": str(root / "cache")}
    values["model"] = {"arch": "encoder-decoder", "d_model": 64, "n_heads": 4, "n_encoder_layers": 2,
                       "n_decoder_layers": 2, "d_ff": 128, "dropout": 0.0, "norm_position": "pre", "max_positions": 32}
    config = build_run_config(values)
    assert config.objective == "seq2seq"
    train(config, tmp_path / "run", log=lambda _: None)
    model_dir = str(tmp_path / "run" / "last")
    assert main(["evaluate", model_dir, "--pairs", str(root / "valid.tsv"), "--beam", "1"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert set(rows) == {"reverse", "first", "all"}
    assert int(rows["reverse"][1].replace(",", "")) + int(rows["first"][1]) == 60 == int(rows["all"][1])
    out = tmp_path / "outputs.txt"
    assert main(["evaluate", model_dir, "--pairs", str(root / "valid.tsv"), "--beam", "1", "--metric", "rouge",
                 "--output", str(out)]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == ["task", "lines", "ROUGE-1", "ROUGE-2", "ROUGE-L", "exact"]
    rows = {line.split()[0]: line.split() for line in lines}
    targets = [line.split("\t")[1] for line in (root / "valid.tsv").read_text().splitlines()]
    expected = rouge(out.read_text().splitlines(), targets)  # the "all" row: every line
    assert [float(x) for x in rows["all"][2:5]] == [round(expected[k], 2) for k in ("rouge1", "rouge2", "rougeL")]
    metrics = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    valid = [m["valid_loss"] for m in metrics if m.get("split") == "valid"]
    assert valid[-1] < valid[0]  # it learns (60 steps: the tasks are not solved yet)
    (tmp_path / "in.txt").write_text("sun rain tree\n\nfire moon\n")
    (tmp_path / "prefixed.txt").write_text("first: sun rain tree\n\nfirst: fire moon\n")
    assert main(["translate", model_dir, "--prefix", "first: ", "--input", str(tmp_path / "in.txt"), "--beam", "1"]) == 0
    with_flag = capsys.readouterr().out.splitlines()
    assert main(["translate", model_dir, "--input", str(tmp_path / "prefixed.txt"), "--beam", "1"]) == 0
    assert with_flag == capsys.readouterr().out.splitlines() and len(with_flag) == 3 and with_flag[1] == ""
    assert main(["generate", model_dir, "--prefix", "first: ", "--prompt", "fire moon", "--beam", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == [with_flag[2]]  # generate answers as translate does
    assert main(["generate", model_dir, "--prompt", "fire moon", "--temperature", "0.5"]) == 2
    assert "sampling and chat are for language models" in capsys.readouterr().err


@pytest.mark.parametrize("line, message", [
    ("no tab here", "line 2: no tab: each line must be input<TAB>target"),
    ("\ttarget only", "line 2: the input (before the tab) is empty"),
    ("input only\t ", "line 2: the target (after the tab) is empty"),
])
def test_malformed_pairs_are_one_line_naming_file_and_line(tmp_path, capsys, line, message):
    from transformer.cli import main

    (tmp_path / "bad.tsv").write_text(f"first: a b\ta\n{line}\n")
    (tmp_path / "cfg.toml").write_text('[model]\narch = "encoder-decoder"\nd_model = 16\nn_heads = 2\nd_ff = 32\n'
                                       f'[data]\ntrain_pairs = "{tmp_path / "bad.tsv"}"\ntokenizer = "word"\n'
                                       f'vocab_size = 20\ncache = "{tmp_path / "cache"}"\n')
    assert main(["train", str(tmp_path / "cfg.toml"), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"{tmp_path / 'bad.tsv'} {message}" in err
