"""Word-overlap metrics on plain strings: ROUGE-1/2/L for summaries (Lin 2004, as Google's
rouge-score package computes them), SQuAD's exact match and token F1 for extracted answers
(Rajpurkar et al. 2016, as its evaluation script v1.1 computes them), and the word error rate of
transcripts (the fewest word edits, as jiwer computes it, on normalised words).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence

ROUGE_KINDS = ("rouge1", "rouge2", "rougeL")


def rouge_tokens(text: str) -> list[str]:
    """rouge-score's tokens: lowercased, every run of characters other than a-z and 0-9 a
    separator (no stemming: the package's default)."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).split()


def _f1(overlap: int, predicted: int, gold: int) -> tuple[float, float, float]:
    precision = overlap / predicted if predicted else 0.0
    recall = overlap / gold if gold else 0.0
    f = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f


def _ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _lcs(a: list[str], b: list[str]) -> int:
    """The length of the longest common subsequence of a and b (one row of the table at a
    time)."""
    if len(a) < len(b):
        a, b = b, a
    row = [0] * (len(b) + 1)
    for x in a:
        previous = 0  # the table's [i-1][j-1]
        for j, y in enumerate(b, start=1):
            previous, row[j] = row[j], previous + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def rouge_pair(hypothesis: str, reference: str) -> dict[str, tuple[float, float, float]]:
    """ROUGE-1, ROUGE-2 and ROUGE-L of one hypothesis against one reference: {kind: (precision,
    recall, F1)}, each 0-1. ROUGE-N counts clipped n-gram matches; ROUGE-L is the longest common
    subsequence of the two token lists (summary-level ROUGE-Lsum is not computed)."""
    hyp, ref = rouge_tokens(hypothesis), rouge_tokens(reference)
    scores = {}
    for n in (1, 2):
        h, r = _ngrams(hyp, n), _ngrams(ref, n)
        scores[f"rouge{n}"] = _f1(sum((h & r).values()), sum(h.values()), sum(r.values()))
    scores["rougeL"] = _f1(_lcs(hyp, ref), len(hyp), len(ref))
    return scores


def rouge(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Corpus ROUGE-1/2/L: the mean over pairs of each pair's F1, times 100 (what rouge-score's
    scorer gives averaged over a test set, without bootstrap resampling)."""
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses):,} hypotheses but {len(references):,} references: they must be "
            "aligned line by line"
        )
    totals = dict.fromkeys(ROUGE_KINDS, 0.0)
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        for kind, (_, _, f) in rouge_pair(hypothesis, reference).items():
            totals[kind] += f
    return {kind: 100 * total / max(len(hypotheses), 1) for kind, total in totals.items()}


# SQuAD v1.1's evaluation script: answers normalised (lowercase, punctuation and the articles
# a / an / the removed, whitespace collapsed), then exact match and bag-of-tokens F1, each the
# best over the gold answers of a question.

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lowercase, punctuation removed, articles removed, spaces collapsed."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD's F1 of the normalised tokens (0 when there is no common token)."""
    predicted, true = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = sum((Counter(predicted) & Counter(true)).values())
    if common == 0:
        return 0.0
    return _f1(common, len(predicted), len(true))[2]


def squad_scores(predictions: Sequence[str], golds: Sequence[Sequence[str]]) -> dict[str, float]:
    """{"exact_match", "f1"} times 100 over questions, each the best over its gold answers (as the
    script's metric_max_over_ground_truths)."""
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions):,} predictions for {len(golds):,} questions")
    if any(not answers for answers in golds):
        raise ValueError("a question without a gold answer cannot be scored (SQuAD 1.1)")
    n = max(len(predictions), 1)
    return {
        "exact_match": 100
        * sum(max(exact_match(p, g) for g in gs) for p, gs in zip(predictions, golds, strict=True))
        / n,
        "f1": 100
        * sum(max(token_f1(p, g) for g in gs) for p, gs in zip(predictions, golds, strict=True))
        / n,
    }


def set_f1(predicted: set, gold: set) -> float:
    """F1 of two sets (verse-level F1: the verses an answer covers against the gold verses)."""
    return _f1(len(predicted & gold), len(predicted), len(gold))[2]


# The word error rate (WER) of transcripts: both sides normalised (normalize_transcript), then the
# fewest word substitutions S, deletions D and insertions I that turn the reference into the
# hypothesis (Levenshtein on words). Ties between alignments of as few edits go to the one with
# the fewest substitutions, i.e. the most matched words ("a b" heard as "b c": b matched, a
# deleted, c inserted; not two substitutions); D and I follow, as D - I = |ref| - |hyp|. Corpus
# WER = 100 * (S + D + I) / N summed over the pairs, N the reference words: the edits of the whole
# test set over its words, not a mean of per-pair rates (a long clip weighs more). It can pass 100
# (insertions). With no reference words at all it is 0.0 when the hypotheses are empty too and
# 100.0 when they are not.

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})  # ’ ‘ ʼ as '


def normalize_transcript(text: str) -> str:
    """The usual normalisation for English WER: lowercased; an apostrophe between two letters or
    digits kept ("don't", "o'clock"; ’ written as '); every other punctuation mark or symbol
    (Unicode categories P and S: . , ! ? " - – — / ( ) $ % and the rest, quotes and the apostrophes
    at a word's edge) a space, so hyphenated words and "u.s." fall apart into words; whitespace
    collapsed, ends stripped. Digits and accents are kept as written ("3.5" -> "3 5")."""
    text = text.lower().translate(_APOSTROPHES)
    out = []
    for i, c in enumerate(text):
        if c == "'" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
            out.append(c)
        else:
            out.append(" " if unicodedata.category(c)[0] in "PS" else c)
    return " ".join("".join(out).split())


def word_errors(hypothesis: str, reference: str) -> tuple[int, int, int, int]:
    """(substitutions, deletions, insertions, reference words) of the normalised hypothesis against
    the normalised reference: the fewest edits, then the fewest substitutions (see above). The
    table of edits is filled one reference word (row) at a time, each cell (edits, S, D, I)."""
    hyp, ref = normalize_transcript(hypothesis).split(), normalize_transcript(reference).split()
    row = [(j, 0, 0, j) for j in range(len(hyp) + 1)]  # the empty reference: j insertions
    for word in ref:
        previous = row[0]  # the table's [i-1][j-1]
        row[0] = (previous[0] + 1, previous[1], previous[2] + 1, previous[3])
        for j, heard in enumerate(hyp, start=1):
            e, s, d, i = previous
            diagonal = previous if word == heard else (e + 1, s + 1, d, i)
            e, s, d, i = row[j]  # [i-1][j]: the reference word deleted
            deleted = (e + 1, s, d + 1, i)
            e, s, d, i = row[j - 1]  # [i][j-1]: the heard word inserted
            inserted = (e + 1, s, d, i + 1)
            previous, row[j] = row[j], min(diagonal, deleted, inserted)
    _, s, d, i = row[-1]
    return s, d, i, len(ref)


def wer(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus word error rate times 100: all edits over all reference words (see above)."""
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses):,} hypotheses but {len(references):,} references: they must be "
            "aligned line by line"
        )
    edits = words = 0
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        s, d, i, n = word_errors(hypothesis, reference)
        edits, words = edits + s + d + i, words + n
    if words == 0:  # then every edit is an inserted word
        return 100.0 if edits else 0.0
    return 100 * edits / words
