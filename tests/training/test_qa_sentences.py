"""Answer-sentence selection (objective qa_sentences): sentences cut, grouped by context and
labelled, the sentence head against its definition, the best run of sentences against a search of
every run, a small run that learns, its answers through padded batches against each text embedded
alone, and the answer / evaluate commands."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch

from transformer.cli import main
from transformer.config import ConfigError, ModelConfig, build_run_config
from transformer.data.sentences import best_run, context_rows, selected, sentence_bounds
from transformer.data.squad import read_squad
from transformer.data.text import DataError
from transformer.data.tokenizer import EncoderTokens
from transformer.decoding.pipeline import Pipeline
from transformer.model.heads import SentenceHead
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


def test_questions_are_grouped_by_context_and_a_sentence_is_in_the_answer_when_most_of_it_is():
    class Chars:  # one id per character: a row's length shows what was kept
        def encode(self, text):
            return [ord(c) % 50 + 10 for c in text]

    tokens = type("T", (), {"cls": 1, "sep": 2})()
    context, other = "aaaa. bbbb. cccc.", "dd. ee."
    bounds, other_bounds = sentence_bounds(context), sentence_bounds(other)
    # question 0 covers "bbbb." whole and 2 of the 5 characters of "cccc."; question 2 one more
    items = context_rows(Chars(), tokens, ["q", "r", "st"], [bounds, other_bounds, bounds],
                         [context, other, context], 12, [(6, 14), (0, 3), (5, 15)])
    assert [c.numbers for c in items] == [[0, 2], [1]]
    first, second = items
    assert first.labels == [[0.0, 1.0, 0.0], [0.0, 1.0, 1.0]] and second.labels == [[1.0, 0.0]]
    assert first.sentences[0] == [1, *Chars().encode("aaaa."), 2] and first.questions[1] == [1, *Chars().encode("st"), 2]
    assert first.tokens == 3 * 7 + 3 + 4
    cut = context_rows(Chars(), tokens, ["q"], [bounds], [context], 5)[0]
    assert cut.labels is None and [len(r) for r in cut.sentences] == [5, 5, 5]  # [CLS] + 3 + [SEP]
    with pytest.raises(DataError, match="raise data.max_len"):
        context_rows(Chars(), tokens, ["q"], [bounds], [context], 2)


def test_the_sentence_head_is_the_scaled_standardized_cosine():
    torch.manual_seed(0)
    head = SentenceHead()
    questions, sentences = torch.randn(3, 8), torch.randn(5, 8)
    with torch.no_grad():
        head.scale.fill_(2.0)
        head.bias.fill_(-0.5)
        out = head(questions, sentences)
    for i in range(3):  # the plain computation, one pair at a time
        cos = torch.tensor([float(torch.cosine_similarity(questions[i], s, dim=0)) for s in sentences])
        expected = 2.0 * (cos - cos.mean()) / cos.std(correction=0) - 0.5
        torch.testing.assert_close(out[i], expected, atol=1e-5, rtol=1e-5)
    assert float(head(questions, sentences[:1]).detach()[0, 0]) == pytest.approx(-0.5)  # one sentence: the bias


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
    # a lower threshold counts less likely sentences in: log-odds -1 beat log(0.2 / 0.8) = -1.39
    assert selected(context, sentence_bounds(context), [-1.0, 2.0, -1.0]).text == "two."
    assert selected(context, sentence_bounds(context), [-1.0, 2.0, -1.0], 0.2).text == context


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
    assert any("(question, sentence) pairs" in line for line in lines)
    assert any(line.startswith("sentence head fitted to the untrained embeddings") for line in lines)
    metrics = [json.loads(x) for x in (root / "run" / "metrics.jsonl").read_text().splitlines()]
    valid = [m for m in metrics if m.get("split") == "valid"][-1]
    decode = json.loads((root / "run" / "best" / "decode.json").read_text())
    assert decode["sentence_threshold"] == valid["valid_threshold"]  # validation's choice is kept
    # the first 2 sentences of each context (a guess of the answer's length) score F1 ~ 30
    assert valid["valid_f1"] > 90 and valid["valid_exact_match"] > 70


def test_answers_through_padded_batches_equal_each_text_embedded_alone(sentence_run):
    root, _ = sentence_run
    pipe = Pipeline.load(root / "run" / "best")
    model, tokenizer = pipe.model, pipe.source_tokenizer
    tokens = EncoderTokens(tokenizer, pipe.special_tokens)
    questions = read_squad(root / "valid.json")[:10]
    answers = pipe.answer([q.question for q in questions], [q.context for q in questions])

    def alone(text):  # the plain computation: one row, no padding, the mean of its states
        with torch.no_grad():
            return model(torch.tensor([[tokens.cls, *tokenizer.encode(text), tokens.sep]]))[0].mean(0)

    for q, answer in zip(questions, answers, strict=True):
        bounds = sentence_bounds(q.context)  # cut at the full stops: the file's verses
        assert bounds == sentence_bounds(q.context, q.verse_starts)
        with torch.no_grad():
            logits = model.sentence_head(alone(q.question)[None], torch.stack([alone(q.context[a:b]) for a, b in bounds]))
        threshold = pipe.settings().sentence_threshold  # validation's choice, saved in decode.json
        logits = (logits[0] - math.log(threshold / (1 - threshold))).tolist()
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


def test_rows_are_read_in_runs_of_similar_length_and_put_back_in_order():
    from transformer.training.objectives.sentences import LENGTH_SPREAD, length_runs

    r = random.Random(3)
    rows = [[7] * r.randint(3, 60) for _ in range(50)]
    blocks, restore = length_runs(rows, pad=0)
    stacked = [row for ids, mask in blocks for row, keep in zip(ids.tolist(), mask.tolist(), strict=True)
               for row in [[t for t, k in zip(row, keep, strict=True) if k]]]
    assert [stacked[i] for i in restore.tolist()] == rows
    for ids, mask in blocks:
        lengths = mask.sum(1)
        assert int(lengths.max()) <= LENGTH_SPREAD * int(lengths.min()) and ids.shape[1] == int(lengths.max())


def test_the_head_is_fitted_to_the_untrained_encoder_before_training():
    from transformer.config import ModelConfig
    from transformer.data.sentences import ContextRows
    from transformer.decoding.answer import embed_rows
    from transformer.model.build import build_model
    from transformer.training.objectives.sentences import fit_head

    torch.manual_seed(0)
    model = build_model(ModelConfig(arch="encoder", vocab_size=50, d_model=32, n_heads=4, n_encoder_layers=1,
                                    d_ff=64, max_positions=32, sentence_head=True)).eval()
    r = random.Random(0)
    items = []
    for _ in range(6):
        sentences = [[1, *(r.randrange(5, 50) for _ in range(r.randint(2, 9))), 2] for _ in range(7)]
        questions = [[1, *(r.randrange(5, 50) for _ in range(3)), 2] for _ in range(2)]
        labels = [[float(r.random() < 0.3) for _ in range(7)] for _ in range(2)]
        items.append(ContextRows(sentences, questions, [0, 1], labels))
    said = []
    fit_head(model, items, 0, said.append)
    assert said[0].startswith("sentence head fitted to the untrained embeddings (84 pairs of 6 contexts)")
    head = model.sentence_head
    logits, targets = [], []  # the plain computation: each context alone, then the loss's gradient
    for c in items:
        with torch.no_grad():
            q, s = embed_rows(model, c.questions, 0, 512), embed_rows(model, c.sentences, 0, 512)
        logits.append(head(q, s).flatten())
        targets += [v for row in c.labels for v in row]
    loss = torch.nn.functional.binary_cross_entropy_with_logits(torch.cat(logits), torch.tensor(targets))
    scale, bias = torch.autograd.grad(loss, [head.scale, head.bias])
    assert abs(float(scale)) < 1e-5 and abs(float(bias)) < 1e-5  # the logistic regression's optimum
