"""Metrics on plain strings and numbers: sacreBLEU's BLEU and chrF (with their signatures),
perplexity, and classification scores. No model here: evaluation.scoring drives a model.

BLEU and chrF take detokenised hypotheses and references, one line each, and report the
sacreBLEU signature so that a number can be reproduced (Post 2018). Perplexity is
exp(summed negative log-likelihood / token count).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MetricScore:
    """A corpus-level score with what is needed to reproduce it."""

    name: str
    """BLEU or chrF."""
    score: float
    """The score, 0-100."""
    signature: str
    """sacreBLEU's signature (references, case, tokenisation, smoothing, version)."""
    detail: str
    """sacreBLEU's full line (n-gram precisions, brevity penalty, lengths)."""

    def __str__(self) -> str:
        return f"{self.detail} | {self.signature}"


def _references(
    hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]]
) -> list[list[str]]:
    """One reference stream per reference set (sacreBLEU's layout), checked against the
    hypotheses."""
    if len(references) and isinstance(references[0], str):
        streams = [list(references)]
    else:
        streams = [list(r) for r in references]
    for k, stream in enumerate(streams):
        if len(stream) != len(hypotheses):
            which = "the references" if len(streams) == 1 else f"reference set {k}"
            raise ValueError(
                f"{len(hypotheses):,} hypotheses but {len(stream):,} lines in "
                f"{which}: "
                "they must be aligned line by line"
            )
    return streams


def bleu(
    hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], **options
) -> MetricScore:
    """Corpus BLEU (Papineni et al. 2002) by sacreBLEU; references: one list of lines, or several
    sets of them.

    options go to sacrebleu.metrics.BLEU (tokenize="13a", lowercase=False, ...).
    """
    from sacrebleu.metrics import BLEU

    metric = BLEU(**options)
    result = metric.corpus_score(list(hypotheses), _references(hypotheses, references))
    return MetricScore("BLEU", float(result.score), str(metric.get_signature()), str(result))


def chrf(
    hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], **options
) -> MetricScore:
    """Corpus chrF (Popović 2015) by sacreBLEU; options go to sacrebleu.metrics.CHRF (word_order=2
    for chrF++)."""
    from sacrebleu.metrics import CHRF

    metric = CHRF(**options)
    result = metric.corpus_score(list(hypotheses), _references(hypotheses, references))
    return MetricScore("chrF", float(result.score), str(metric.get_signature()), str(result))


def perplexity(total_nll: float, n_tokens: float, max_nll: float = math.inf) -> float:
    """exp(total negative log-likelihood in nats / number of predicted tokens), the mean NLL capped
    at max_nll (training logs a diverged step's as exp(50), not as an overflow)."""
    if n_tokens <= 0:
        raise ValueError(f"perplexity needs at least one predicted token; got n_tokens={n_tokens}")
    return math.exp(min(total_nll / n_tokens, max_nll))


@dataclass(frozen=True)
class ClassificationScores:
    """Accuracy, macro-F1, per-class precision / recall / F1 / support, and the confusion matrix."""

    labels: list[str]
    confusion: list[list[int]]
    """confusion[i][j]: examples of class i (gold) predicted as class j."""

    @property
    def total(self) -> int:
        return sum(map(sum, self.confusion))

    @property
    def accuracy(self) -> float:
        return sum(self.confusion[i][i] for i in range(len(self.labels))) / max(self.total, 1)

    def per_class(self) -> list[dict[str, float]]:
        """For each class: precision, recall, f1 (0 where undefined) and support (gold count)."""
        rows = []
        for i, label in enumerate(self.labels):
            tp = self.confusion[i][i]
            gold = sum(self.confusion[i])
            predicted = sum(row[i] for row in self.confusion)
            p = tp / predicted if predicted else 0.0
            r = tp / gold if gold else 0.0
            rows.append(
                {
                    "label": label,
                    "precision": p,
                    "recall": r,
                    "f1": 2 * p * r / (p + r) if p + r else 0.0,
                    "support": gold,
                    "predicted": predicted,
                }
            )
        return rows

    @property
    def macro_f1(self) -> float:
        """The mean F1 over the classes that occur in the gold labels or the predictions (as
        scikit-learn's f1_score(average="macro") without a label list)."""
        present = [row["f1"] for row in self.per_class() if row["support"] or row["predicted"]]
        return sum(present) / len(present) if present else 0.0


def classification_scores(
    predicted: Sequence[int], gold: Sequence[int], labels: Sequence[str]
) -> ClassificationScores:
    """Scores of predicted class indices against gold ones (indices into labels)."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold labels: give one each")
    n = len(labels)
    confusion = [[0] * n for _ in range(n)]
    for p, g in zip(predicted, gold, strict=True):
        confusion[g][p] += 1
    return ClassificationScores(list(labels), confusion)


def task_name(text: str) -> str:
    """A text-to-text input's task: what precedes its first ": " (e.g. "translate Spanish to
    English"), or "-" when there is none."""
    head, sep, _ = text.partition(": ")
    return head if sep else "-"
