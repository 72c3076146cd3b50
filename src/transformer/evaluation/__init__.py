"""Evaluation: metrics on plain strings and arrays (metrics.py: BLEU, chrF, perplexity,
classification scores) and the scoring of a model or Pipeline over a test set (scoring.py)."""

from .metrics import (
    ClassificationScores,
    MetricScore,
    bleu,
    chrf,
    classification_scores,
    perplexity,
)
from .scoring import model_nll, score_classifier, score_pairs, text_perplexity

__all__ = [
    "ClassificationScores",
    "MetricScore",
    "bleu",
    "chrf",
    "classification_scores",
    "model_nll",
    "perplexity",
    "score_classifier",
    "score_pairs",
    "text_perplexity",
]
