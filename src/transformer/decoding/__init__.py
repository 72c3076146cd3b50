"""Decoding: greedy search, batched beam search and sampling, all over the model's KV cache."""

from .beam import Hypothesis, beam_search
from .greedy import greedy_search
from .penalties import length_penalty, penalized_score
from .sampling import sample, top_k_filter, top_p_filter
from .step import Stepper

__all__ = [
    "Hypothesis",
    "Stepper",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "penalized_score",
    "sample",
    "top_k_filter",
    "top_p_filter",
]
