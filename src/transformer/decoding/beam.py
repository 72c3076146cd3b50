"""Batched beam search over the KV cache (the paper's decoder, §6.1: beam 4, length penalty alpha =
0.6): a thin shell over the beam lane.

Legend (model/__init__.py): B sentences, T output tokens; attention records as in search/history.py
(layers, H heads, S source length, keys).

The settings become one DecodeConfig, validated here; the batch is admitted into a beam lane
(search/beams.py, which holds the scoring conventions: what |Y| counts, when the length penalty
applies, each early_stopping mode) and the lane is stepped until every sentence has stopped; the
server's continuous batching steps the same lane. Then each sentence's n_best hypotheses, best
first, are packed into batch-first tensors (search/batch.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..config import DecodeConfig
from .search.batch import collect_hypotheses, run_beam
from .search.step import SourceInput


def beam_search(
    model: torch.nn.Module,
    src_ids: SourceInput,
    beam_size: int = DecodeConfig.beam_size,
    length_penalty: float = DecodeConfig.length_penalty,
    length_penalty_kind: str = DecodeConfig.length_penalty_kind,
    length_counts_eos: bool = DecodeConfig.length_counts_eos,
    max_len_a: float = DecodeConfig.max_len_a,
    max_len_b: int = DecodeConfig.max_len_b,
    min_len: int = DecodeConfig.min_len,
    n_best: int = DecodeConfig.n_best,
    early_stopping: bool | str = DecodeConfig.early_stopping,
    src_mask: torch.Tensor | None = None,
    return_scores: bool = False,
    return_attention: bool = False,
    no_repeat_ngram_size: int = DecodeConfig.no_repeat_ngram_size,
    repetition_penalty: float = DecodeConfig.repetition_penalty,
    prefix: Sequence[int] | None = None,
    suppress_tokens: Sequence[int] = (),
    begin_suppress_tokens: Sequence[int] = (),
):
    """Beam search for a batch of sources (or prompts, for a decoder-only model).

    Returns ids (B, T) — or (B, n_best, T) when n_best > 1 — best first, without <s>/</s>,
    right-padded with pad_id; with return_scores also the penalised scores (B,) or (B, n_best)
    (-inf for a slot no hypothesis filled); with return_attention also
    {"self": (B, [n_best,] layers, H, T, keys), "cross": (B, [n_best,] layers, H, T, S) or None}.
    prefix, suppress_tokens, begin_suppress_tokens and speech input: as greedy_search.
    """
    settings = DecodeConfig(
        beam_size=beam_size,
        length_penalty=length_penalty,
        length_penalty_kind=length_penalty_kind,
        length_counts_eos=length_counts_eos,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        min_len=min_len,
        n_best=n_best,
        early_stopping=early_stopping,
        no_repeat_ngram_size=no_repeat_ngram_size,
        repetition_penalty=repetition_penalty,
    )  # the one validation
    seqs, stepper = run_beam(
        model,
        src_ids,
        settings,
        src_mask,
        return_attention=return_attention,
        prefix=prefix,
        suppress=suppress_tokens,
        begin_suppress=begin_suppress_tokens,
    )
    hypotheses = [seq.results for seq in seqs]
    return collect_hypotheses(stepper, hypotheses, n_best, return_scores, return_attention)
