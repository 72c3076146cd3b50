"""Batched beam search over the KV cache (the paper's decoder, §6.1: beam 4, length penalty alpha =
0.6): a thin shell over the beam lane.

Legend (model/__init__.py): B sentences, T output tokens; attention records as in history.py
(layers, H heads, S source length, keys).

The settings become one DecodeConfig, validated here; the batch is admitted into a beam lane
(beam_lane.py, which holds the scoring conventions: what |Y| counts, when the length penalty
applies, each early_stopping mode) and the lane is stepped until every sentence has stopped; the
server's continuous batching steps the same lane. Then each sentence's n_best hypotheses, best
first, are packed into batch-first tensors.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..config import DecodeConfig
from .beam_lane import BeamLane, Hypothesis, candidates, is_done, next_beams
from .greedy import pack_outputs
from .history import stack_attention
from .lanes import Request
from .one_row import self_key_count
from .step import SourceInput, Stepper, inference

_is_done = is_done  # the name continuous.py imported before the lanes
__all__ = [
    "Hypothesis",
    "beam_search",
    "candidates",
    "collect_hypotheses",
    "next_beams",
    "run_beam",
]


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


def run_beam(
    model: torch.nn.Module,
    src_ids: SourceInput,
    settings: DecodeConfig,
    src_mask: torch.Tensor | None = None,
    return_attention: bool = False,
    **stepper,
) -> tuple[list[Request], Stepper]:
    """A batch decoded on a beam lane stepped to the end, under settings already validated
    (beam_search builds them): each row is a request whose `results` are its n_best hypotheses,
    best first. stepper: the Stepper's prefix, suppress and begin_suppress. Returns the requests
    and the batch's Stepper."""
    with inference(model):
        lane = BeamLane(model, settings)
        batch = Stepper(
            model, src_ids, src_mask, need_weights=return_attention, guards=lane.guards, **stepper
        )
        seqs = [Request(None, settings) for _ in range(batch.batch_size)]
        lane.admit_batch(batch, seqs)
        while lane.seqs:
            lane._advance()
    return seqs, batch


def collect_hypotheses(
    stepper: Stepper,
    finished: list[list[Hypothesis]],
    n_best: int,
    return_scores: bool,
    return_attention: bool,
):
    """Ids (B, [n_best,] T), scores (B, [n_best]) and attention (beam_search's doc) from each
    sentence's hypotheses, best first."""
    cfg = stepper.config
    device = stepper.device
    best = finished  # each sentence's n_best, best first (BeamLane._stop)
    width = max((len(h.tokens) for hyps in best for h in hyps), default=0)
    b = len(best)
    ids = torch.full((b, n_best, width), cfg.pad_id, dtype=torch.long, device=device)
    scores = torch.full((b, n_best), -float("inf"), device=device)
    for i, hyps in enumerate(best):
        for j, h in enumerate(hyps):
            ids[i, j, : len(h.tokens)] = h.tokens
            scores[i, j] = h.score
    attention = None
    if return_attention:
        keys = self_key_count(stepper, width)
        empty = {
            "self": torch.zeros(
                len(stepper.model.decoder.layers), cfg.n_heads, 0, 0, device=device
            ),
            "cross": None
            if stepper.decoder_only
            else torch.zeros(
                len(stepper.model.decoder.layers),
                cfg.n_heads,
                0,
                stepper.source_positions,
                device=device,
            ),
        }
        per_sentence = [
            stack_attention(
                [hyps[j].attention if j < len(hyps) else empty for j in range(n_best)], width, keys
            )
            for hyps in best
        ]
        attention = {
            "self": torch.stack([a["self"] for a in per_sentence]),
            "cross": None
            if per_sentence[0]["cross"] is None
            else torch.stack([a["cross"] for a in per_sentence]),
        }
        if n_best == 1:
            attention = {key: None if v is None else v[:, 0] for key, v in attention.items()}
    if n_best == 1:
        ids, scores = ids[:, 0], scores[:, 0]
    return pack_outputs(ids, scores, attention, return_scores, return_attention)
