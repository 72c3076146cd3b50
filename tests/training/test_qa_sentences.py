"""Answer-sentence selection (objective qa_sentences): sentences cut and labelled, the best run of
sentences against a search of every run, a small run that learns, its answers through padded
batches against each pair scored alone, and the answer / evaluate commands."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from transformer.cli import main
from transformer.config import ConfigError, ModelConfig, build_run_config
from transformer.data.sentences import best_run, selected, sentence_bounds, sentence_rows
from transformer.data.squad import read_squad
from transformer.data.text import DataError
from transformer.data.tokenizer import EncoderTokens
from transformer.decoding.pipeline import Pipeline
from transformer.training.trainer import train

WORDS = "sun moon star rain snow wind fire leaf rock tree lake hill road door bird fish".split()


def topic_file(path: Path, n: int, seed: int) -> Path:
    """Contexts of 8 sentences ("w w w.") given as verses; the question "where is T?" is answered
    by the 2 or 3 consecutive sentences holding T, which no other sentence holds."""
    r = random.Random(seed)
    data = []
    for k in range(n):
        topic = r.choice(WORDS)
        others = [w for w in WORDS if w != topic]
        length = r.randint(2, 3)
        first = r.randrange(0, 8 - length + 1)
        sentences = []
        for v in range(8):
            words = r.sample(others, 3)
            if first <= v < first + length:
                words[r.randrange(3)] = topic
            sentences.append(" ".join(words) + ".")
        starts = [len(" ".join(sentences[:v])) + (1 if v else 0) for v in range(8)]
        text = " ".join(sentences[first : first + length])
        qa = {"id": str(k), "question": f"where is {topic}?", "verses": [first + 1, first + length],
              "answers": [{"text": text, "answer_start": starts[first]}]}
        paragraph = {"context": " ".join(sentences), "verse_starts": starts, "qas": [qa]}
        data.append({"title": f"t{k}", "paragraphs": [paragraph]})
    path.write_text(json.dumps({"version": "test", "data": data}))
    return path


def test_sentences_are_cut_at_given_starts_or_at_sentence_ends():
    text = 'He said "go." Then   they went! Did they? yes'
    cut = sentence_bounds(text)
    assert [text[a:b] for a, b in cut] == ['He said "go."', "Then   they went!", "Did they?", "yes"]
    assert [text[a:b] for a, b in sentence_bounds(text, [0, 8, 14])] == [
        "He said", '"go."', "Then   they went! Did they? yes"]
    assert sentence_bounds("  a.  ", None) == [(2, 4)]
    for bad in ([3, 1], [0, 99], [-1, 2]):
        with pytest.raises(DataError, match="ascending character offsets"):
            sentence_bounds(text, bad)


def test_a_sentence_is_in_the_answer_when_most_of_it_is():
    class Words:  # one id per character: a row's length shows what was kept
        def encode(self, text):
            return [ord(c) % 50 + 10 for c in text]

    tokens = type("T", (), {"cls": 1, "sep": 2})()
    context = "aaaa. bbbb. cccc."
    bounds = sentence_bounds(context)
    # the answer covers "bbbb." whole and 2 of the 5 characters of "cccc."
    rows = sentence_rows(Words(), tokens, ["q"], [bounds], [context], 12, [(6, 14)])
    assert [r.label for r in rows] == [0.0, 1.0, 0.0]
    rows = sentence_rows(Words(), tokens, ["q"], [bounds], [context], 12, [(5, 15)])
    assert [r.label for r in rows] == [0.0, 1.0, 1.0]
    row = rows[0]
    assert row.ids[:3] == [1, Words().encode("q")[0], 2] and row.ids[-1] == 2
    assert row.types == [0, 0, 0] + [1] * 6  # 5 characters and [SEP]
    cut = sentence_rows(Words(), tokens, ["q"], [bounds], [context], 6, None)[0]
    assert len(cut.ids) == 6 and cut.label == 0.0  # [CLS] q [SEP] + 2 characters + [SEP]
    with pytest.raises(DataError, match="raise data.max_len"):
        sentence_rows(Words(), tokens, ["q"], [bounds], [context], 4, None)


def test_best_run_is_the_highest_sum_of_consecutive_logits():
    r = random.Random(0)
    for _ in range(300):
        logits = [r.uniform(-3, 2) for _ in range(r.randint(1, 9))]
        runs = [(i, j, sum(logits[i : j + 1])) for i in range(len(logits)) for j in range(i, len(logits))]
        best = max(runs, key=lambda t: t[2])
        first, last, total = best_run(logits)
        assert total == pytest.approx(best[2]) and sum(logits[first : last + 1]) == pytest.approx(total)
    assert best_run([-2.0, -0.5, -1.0]) == (1, 1, -0.5)
    assert best_run([1.0, -0.5, 1.0, -5.0, 0.2])[:2] == (0, 2)  # a weak sentence between two joins
    context = "one. two. three."
    answer = selected(context, sentence_bounds(context), [-1.0, 2.0, 0.5])
    assert (answer.text, answer.start, answer.end) == ("two. three.", 5, 16)


def test_a_sentence_head_is_an_answer_head_of_its_own():
    with pytest.raises(ConfigError, match="leave span_head at false"):
        ModelConfig(arch="encoder", sentence_head=True, span_head=True)
    with pytest.raises(ConfigError, match="heads of arch='encoder'"):
        ModelConfig(arch="decoder", sentence_head=True)


def _config(root: Path, steps: int) -> dict:
    return {
        "model": {"arch": "encoder", "d_model": 64, "n_heads": 4, "n_encoder_layers": 2, "d_ff": 128,
                  "dropout": 0.0, "norm_position": "pre", "positional": "learned", "max_positions": 32,
                  "n_token_types": 2, "scale_embedding": False},
        "data": {"train_squad": str(topic_file(root / "train.json", 400, 1)),
                 "valid_squad": str(topic_file(root / "valid.json", 40, 2)),
                 "tokenizer": "word", "vocab_size": 40, "max_len": 16, "cache": str(root / "cache")},
        "train": {"objective": "qa_sentences", "batch_tokens": 640, "max_steps": steps, "warmup_steps": 20,
                  "lr": 2e-3, "schedule": "cosine", "valid_every": steps, "save_every": steps, "log_every": 50,
                  "precision": "fp32"},
    }


@pytest.fixture(scope="module")
def sentence_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("qa_sentences")
    config = build_run_config(_config(root, 400))
    lines = []
    train(config, root / "run", log=lines.append)
    return root, lines


def test_a_sentence_run_learns_which_sentences_answer(sentence_run):
    root, lines = sentence_run
    assert any("(question, sentence) rows" in line for line in lines)
    metrics = [json.loads(x) for x in (root / "run" / "metrics.jsonl").read_text().splitlines()]
    valid = [m for m in metrics if m.get("split") == "valid"][-1]
    # the first 2 sentences of each context (a guess of the answer's length) score F1 ~ 30
    assert valid["valid_f1"] > 90 and valid["valid_exact_match"] > 70


def test_answers_through_padded_batches_equal_each_pair_scored_alone(sentence_run):
    root, _ = sentence_run
    pipe = Pipeline.load(root / "run" / "best")
    tokens = EncoderTokens(pipe.source_tokenizer, pipe.special_tokens)
    questions = read_squad(root / "valid.json")[:10]
    answers = pipe.answer([q.question for q in questions], [q.context for q in questions])
    for q, answer in zip(questions, answers, strict=True):
        bounds = sentence_bounds(q.context)  # cut at the full stops: the file's verses
        assert bounds == sentence_bounds(q.context, q.verse_starts)
        rows = sentence_rows(pipe.source_tokenizer, tokens, [q.question], [bounds], [q.context], 32)
        with torch.no_grad():  # the plain computation: one pair at a time, no padding
            logits = [float(pipe.model.sentence_logits(torch.tensor([r.ids]), None, torch.tensor([r.types])))
                      for r in rows]
        runs = [(sum(logits[i : j + 1]), i, j) for i in range(len(logits)) for j in range(i, len(logits))]
        score, first, last = max(runs)
        assert answer.score == pytest.approx(score, abs=1e-4)
        assert answer.text == q.context[bounds[first][0] : bounds[last][1]]
    given = pipe.answer(questions[0].question, questions[0].context, list(questions[0].verse_starts))
    assert given.text == answers[0].text


def test_the_answer_and_evaluate_commands_with_a_sentence_head(sentence_run, capsys, tmp_path):
    root, _ = sentence_run
    model = str(root / "run" / "best")
    question = read_squad(root / "valid.json")[0]
    (tmp_path / "context.txt").write_text(question.context + "\n")
    assert main(["answer", model, "--question", question.question, "--context", str(tmp_path / "context.txt"),
                 "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["answer"] == question.context[record["start"]:record["end"]]
    assert main(["evaluate", model, "--squad", str(root / "valid.json")]) == 0
    out = capsys.readouterr().out
    f1 = float(out.split("  F1 ")[1].split()[0])
    assert out.startswith("exact match ") and "verse F1" in out and f1 > 90
