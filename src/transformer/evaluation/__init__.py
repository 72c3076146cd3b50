"""Evaluation: sacreBLEU BLEU and chrF on plain strings, perplexity."""

from .metrics import MetricScore, bleu, chrf, model_nll, perplexity, text_perplexity

__all__ = ["MetricScore", "bleu", "chrf", "model_nll", "perplexity", "text_perplexity"]
