"""ROUGE against Google's rouge-score package and by hand; SQuAD's exact match and F1 on the
cases its evaluation script defines; verse-level (set) F1."""

from __future__ import annotations

import random

import pytest

from transformer.evaluation.overlap import (
    normalize_answer,
    rouge,
    rouge_pair,
    rouge_tokens,
    set_f1,
    squad_scores,
    token_f1,
)


def test_rouge_by_hand():
    # hypothesis 6 tokens, reference 6; unigrams in common: the, cat, on, mat (the twice in hyp,
    # once in ref: clipped to 1) -> 4; bigrams: "the cat" -> 1 of 5; LCS: the cat on mat -> 4
    scores = rouge_pair("The cat sat on the mat.", "the cat was on a mat")
    assert scores["rouge1"] == pytest.approx((4 / 6, 4 / 6, 4 / 6))
    assert scores["rouge2"] == pytest.approx((1 / 5, 1 / 5, 1 / 5))
    assert scores["rougeL"] == pytest.approx((4 / 6, 4 / 6, 4 / 6))
    assert rouge_tokens("Naïve café, 2024-11!") == ["na", "ve", "caf", "2024", "11"]
    assert rouge_pair("", "a b")["rouge1"] == (0.0, 0.0, 0.0)
    corpus = rouge(["a b", "c"], ["a b", "d"])
    assert corpus == {"rouge1": 50.0, "rouge2": 50.0, "rougeL": 50.0}
    with pytest.raises(ValueError, match="aligned line by line"):
        rouge(["a"], [])


def test_rouge_matches_rouge_score_on_random_text():
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])
    r = random.Random(0)
    words = "the a cat Cat's dog sat on mat, x1 2024 über naïve -- THE of".split()
    for _ in range(2000):
        hyp = " ".join(r.choices(words, k=r.randint(0, 15)))
        ref = " ".join(r.choices(words, k=r.randint(0, 15)))
        expected = scorer.score(ref, hyp)  # rouge-score takes (target, prediction)
        ours = rouge_pair(hyp, ref)
        for kind, score in expected.items():
            assert ours[kind] == pytest.approx(tuple(score), abs=1e-12), (hyp, ref, kind)


def test_squad_exact_match_and_f1_as_its_script_defines():
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert token_f1("the Broncos", "Denver Broncos") == pytest.approx(2 / 3)  # P 1, R 1/2
    assert token_f1("Carolina Panthers", "Denver Broncos") == 0.0
    # the best over a question's gold answers, then the mean over questions, times 100
    scores = squad_scores(["Denver Broncos", "Santa Clara"], [["denver broncos."], ["Levi's Stadium", "Santa Clara, California"]])
    assert scores["exact_match"] == 50.0
    assert scores["f1"] == pytest.approx(100 * (1 + 0.8) / 2)  # P 2/2, R 2/3 -> 0.8
    with pytest.raises(ValueError, match="without a gold answer"):
        squad_scores(["x"], [[]])


def test_set_f1():
    assert set_f1({1, 2, 3}, {2, 3, 4, 5}) == pytest.approx(2 * (2 / 3) * (2 / 4) / (2 / 3 + 2 / 4))
    assert set_f1(set(), {1}) == 0.0
    assert set_f1({7}, {7}) == 1.0
