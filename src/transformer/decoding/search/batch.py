"""An offline batch: admitted at once into a lane (one_row.py, beams.py) that is stepped until it is
empty, then its results packed into batch-first tensors. `search` decodes one batch under a
DecodeConfig that is validated already (Pipeline's settings): greedy when beam_size is 1, else beam
search. The keyword shells (greedy_search, sample, beam_search) build their DecodeConfig and land in
the same runs; `search` is for a caller that holds one, so that nothing validates it again.

Legend (model/__init__.py): B sentences (rows), T output tokens; attention records as in history.py
(layers, H heads, S source length, keys).

The rules:
- Each row of the batch is one request (lanes.Request) of the one settings; a one-row batch's rows
  share its one generator (None: greedy) and max_new (None: from max_len_a/b).
- Outputs are right-padded with pad_id and hold neither <s> nor </s>; scores are summed
  log-probabilities (one-row: </s> included) or beam search's penalised scores (-inf for a slot no
  hypothesis filled); attention rows past a request's output are zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...config import DecodeConfig
from .beams import BeamLane, Hypothesis
from .history import stack_attention
from .lanes import Request
from .one_row import OneLane, OnStep, self_key_count
from .step import SourceInput, Stepper, inference


def search(
    model: torch.nn.Module,
    sources: SourceInput,
    settings: DecodeConfig,
    return_attention: bool = False,
    src_mask: torch.Tensor | None = None,
    prefix: Sequence[int] | None = None,
    suppress_tokens: Sequence[int] = (),
    begin_suppress_tokens: Sequence[int] = (),
):
    """Ids (B, T), or (B, n_best, T) for beam search with n_best > 1, as greedy_search /
    beam_search return them under the same settings (with return_attention, also the attention
    weights). A speech model's sources are log-mel features with their frame mask (src_mask);
    prefix, suppress_tokens and begin_suppress_tokens as greedy_search's."""
    stepper = dict(prefix=prefix, suppress=suppress_tokens, begin_suppress=begin_suppress_tokens)
    if settings.beam_size == 1:
        ids, scores, attention = run_one_row(
            model, sources, settings, src_mask, return_attention=return_attention, **stepper
        )
        return pack_outputs(ids, scores, attention, False, return_attention)
    seqs, batch = run_beam(model, sources, settings, src_mask, return_attention, **stepper)
    hypotheses = [seq.results for seq in seqs]
    return collect_hypotheses(batch, hypotheses, settings.n_best, False, return_attention)


def pack_outputs(
    ids: torch.Tensor,
    scores: torch.Tensor,
    attention: dict | None,
    return_scores: bool,
    return_attention: bool,
):
    """ids alone, or the tuple (ids[, scores][, attention]) the caller asked for."""
    if not return_scores and not return_attention:
        return ids
    out = (ids,)
    if return_scores:
        out += (scores,)
    if return_attention:
        out += (attention,)
    return out


def run_one_row(
    model: torch.nn.Module,
    src_ids: SourceInput,
    settings: DecodeConfig,
    src_mask: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    max_new: int | None = None,
    return_attention: bool = False,
    on_step: OnStep | None = None,
    **stepper,
) -> tuple[torch.Tensor, torch.Tensor, dict | None]:
    """A batch decoded on a one-row lane stepped to the end, under settings already validated
    (greedy_search and sample build them): each row is a request with the one generator (None:
    greedy) and max_new (None: from max_len_a/b). stepper: the Stepper's prefix, suppress and
    begin_suppress. Returns ids (B, T) without </s>, right-padded with pad_id; the summed
    log-probabilities of the chosen tokens (B,), </s> included; the attention weights
    {"self": (B, layers, H, T, keys), "cross": (B, layers, H, T, S) or None} or None."""
    with inference(model):
        lane = OneLane(model, settings)
        batch = Stepper(
            model,
            src_ids,
            src_mask,
            need_weights=return_attention,
            guards=lane.guards,
            static=True,
            **stepper,
        )
        seqs = [
            Request(None, settings, generator, max_new, rejoin=False)
            for _ in range(batch.batch_size)
        ]
        lane.on_step = on_step
        lane.admit_batch(batch, seqs)
        while lane.seqs:
            lane.advance()
    pad, device = model.config.pad_id, batch.device
    lengths = [len(seq.tokens) for seq in seqs]
    width = max(lengths, default=0)
    ids = torch.tensor(
        [seq.tokens + [pad] * (width - len(seq.tokens)) for seq in seqs], dtype=torch.long
    ).view(len(seqs), width)
    attention = None
    if lane.history is not None:
        keys = self_key_count(batch, width)
        # Rows past a request's output are zero (the query that predicted </s> has no token, no
        # row).
        real = (
            torch.arange(width, device=device)[None] < torch.tensor(lengths, device=device)[:, None]
        )
        real = real[:, None, None, :, None]  # (B, 1, 1, T, 1)
        history = lane.history
        attention = {
            "self": history.self[:, :, :, :width, :keys] * real,
            "cross": None if history.cross is None else history.cross[:, :, :, :width] * real,
        }
    return ids.to(device), lane.totals, attention


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
            lane.advance()
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
