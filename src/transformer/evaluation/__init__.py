"""Evaluation: sacreBLEU BLEU and chrF on plain strings, perplexity, classification scores."""

from .metrics import (
    ClassificationScores,
    MetricScore,
    bleu,
    chrf,
    classification_scores,
    model_nll,
    perplexity,
    score_classifier,
    text_perplexity,
)

__all__ = ["ClassificationScores", "MetricScore", "bleu", "chrf", "classification_scores", "model_nll", "perplexity",
           "score_classifier", "text_perplexity"]
