"""Batched beam search over the KV cache (the paper's decoder, §6.1: beam 4, length penalty alpha =
0.6).

Legend (model/__init__.py): N sentences still searching, G beam size, V vocabulary, M = 2G
candidates per sentence; attention records as in history.py (layers, H heads, T' steps, S source
length, keys). The returned tensors are batch-first: B sentences.

Conventions (also in docs):
- Each step ranks the G*V continuations of a sentence's live beams by raw log-probability and
  keeps the top 2G candidates, so the G next live beams never run short when some candidates
  are </s>. At the first step only one beam exists, so it alone expands.
- A </s> candidate ranked within the top G becomes a finished hypothesis, scored
  log P(Y | X) / lp(|Y|) with |Y| counting </s> (penalties.py). Live beams are ranked by the
  raw log-probability; the length penalty applies to finished hypotheses only.
- At a sentence's maximum length its top-G candidates are all finalised; those that are not
  </s> are finalised without it (|Y| = the maximum length).
- early_stopping=True: a sentence stops once G hypotheses have finished (fairseq, Hugging Face's
  early_stopping=True). "never": it stops only when no live beam can still beat the G-th best
  finished one, bounding a live beam by its log-probability over the most favourable length
  penalty it could still reach. False: Hugging Face's heuristic (the bound uses the current length).
- A sentence that stops leaves the cache: finished sentences stop costing work.
- Repetition guards (repetition.py) act on each hypothesis's own output, which follows it through
  the reorders; the log-probabilities ranked above are those the guards leave.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..config import DecodeConfig
from .greedy import pack_outputs, self_key_count
from .history import AttentionHistory, stack_attention
from .penalties import best_attainable, length_penalty
from .repetition import RepetitionGuards
from .step import SourceInput, Stepper, blocked_tokens, inference


@dataclass
class Hypothesis:
    """A finished hypothesis: output tokens (without </s>), its penalised score and raw
    log-probability."""

    tokens: torch.Tensor
    """(T,) output ids, without </s>."""
    score: float
    """log P(Y | X) / lp(|Y|): what hypotheses are ranked by."""
    log_prob: float
    """log P(Y | X), </s> included when the hypothesis ended with it."""
    attention: dict | None = None
    """{"self": (layers, H, T', keys), "cross": (layers, H, T', S)} when asked for."""


def _is_done(
    finished: list[Hypothesis],
    best_live: float,
    step_len: int,
    max_len: int,
    k: int,
    alpha: float,
    kind: str,
    early_stopping: bool | str,
) -> bool:
    if len(finished) < k:
        return False
    if early_stopping is True:
        return True
    worst_kept = sorted(h.score for h in finished)[-k]  # the G-th best finished score
    if early_stopping == "never":
        bound = best_attainable(best_live, step_len, max_len, alpha, kind)
    else:  # False: Hugging Face's heuristic, the current length
        bound = best_live / length_penalty(step_len, alpha, kind)
    return not bound > worst_kept


def beam_search(
    model: torch.nn.Module,
    src_ids: SourceInput,
    beam_size: int = DecodeConfig.beam_size,
    length_penalty: float = DecodeConfig.length_penalty,
    length_penalty_kind: str = DecodeConfig.length_penalty_kind,
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
    DecodeConfig(
        beam_size=beam_size,
        length_penalty=length_penalty,
        length_penalty_kind=length_penalty_kind,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        min_len=min_len,
        n_best=n_best,
        early_stopping=early_stopping,
        no_repeat_ngram_size=no_repeat_ngram_size,
        repetition_penalty=repetition_penalty,
    )  # validates the values
    guards = RepetitionGuards.of(no_repeat_ngram_size, repetition_penalty)
    with inference(model):
        stepper = Stepper(
            model,
            src_ids,
            src_mask,
            need_weights=return_attention,
            guards=guards,
            prefix=prefix,
            suppress=suppress_tokens,
            begin_suppress=begin_suppress_tokens,
        )
        max_new = stepper.max_new_tokens(max_len_a, max_len_b)
        finished = _search(
            stepper,
            beam_size,
            length_penalty,
            length_penalty_kind,
            max_new,
            min_len,
            early_stopping,
            return_attention,
        )
    return _collect(stepper, finished, n_best, return_scores, return_attention)


def _search(
    stepper: Stepper,
    k: int,
    alpha: float,
    kind: str,
    max_new: torch.Tensor,
    min_len: int,
    early_stopping: bool | str,
    return_attention: bool,
) -> list[list[Hypothesis]]:
    """Each sentence's finished hypotheses, in the order they finished (rules: the module's)."""
    cfg, device = stepper.config, stepper.device
    finished: list[list[Hypothesis]] = [[] for _ in range(stepper.batch_size)]
    max_list = max_new.tolist()
    steps = max(max_list, default=0)
    if steps == 0:
        return finished
    history = _history(stepper, steps) if return_attention else None
    log_probs, alive = _start(stepper, max_list, history)  # (N, V): one beam per sentence at first
    n_cand = 2 * k
    beam_scores = torch.zeros(len(alive), 1, device=device)  # (N, G): live beams' log-probabilities
    tokens = torch.zeros(len(alive), 1, 0, dtype=torch.long, device=device)  # (N, G, t)
    for t in range(steps):
        if not alive:
            break
        b, beams = beam_scores.shape
        if history is not None:
            history.write(t, stepper.weights)
        blocked_tokens(log_probs, cfg, t, min_len)
        cand_scores, cand_beam, cand_token, is_eos = candidates(
            beam_scores, log_probs, k, cfg.eos_id
        )  # (N, M), best first
        at_max = torch.tensor([t + 1 >= max_list[s] for s in alive], device=device)  # (N,)
        in_top_k = torch.arange(n_cand, device=device) < k
        final = in_top_k & (is_eos | at_max[:, None]) & torch.isfinite(cand_scores)  # (N, M)
        for i, c in final.nonzero().tolist():
            beam = int(cand_beam[i, c])
            seq = tokens[i, beam]
            if not bool(is_eos[i, c]):
                seq = torch.cat([seq, cand_token[i, c : c + 1]])
            raw = float(cand_scores[i, c])
            attention = None if history is None else history.take(i * beams + beam, len(seq))
            score = raw / length_penalty(t + 1, alpha, kind)
            finished[alive[i]].append(Hypothesis(seq.clone(), score, raw, attention))
        next_scores, next_beam, next_token = next_beams(
            cand_scores, cand_beam, cand_token, is_eos, k
        )
        best_live = next_scores.max(dim=1).values.tolist()
        keep = [
            i
            for i, s in enumerate(alive)
            if not (
                bool(at_max[i])
                or best_live[i] == -float("inf")
                or _is_done(
                    finished[s], best_live[i], t + 1, max_list[s], k, alpha, kind, early_stopping
                )
            )
        ]
        if not keep:
            break
        keep_t = torch.tensor(keep, dtype=torch.long, device=device)
        rows = (keep_t[:, None] * beams + next_beam[keep_t]).view(-1)  # cache rows of kept beams
        # Beams follow their parents within their sentence; stopped sentences leave the cache.
        stepper.reorder(rows, group_size=k, sources=None if len(keep) == b else keep_t)
        if history is not None:
            history.reorder(rows)
        kept_tokens = tokens[keep_t[:, None], next_beam[keep_t]]
        tokens = torch.cat([kept_tokens, next_token[keep_t, :, None]], dim=2)
        beam_scores = next_scores[keep_t]
        alive = [alive[i] for i in keep]
        log_probs = stepper.step(next_token[keep_t].view(-1))
    return finished


def _history(stepper: Stepper, steps: int) -> AttentionHistory:
    """Room for every sentence's attention over `steps` steps."""
    return AttentionHistory(
        stepper.batch_size,
        len(stepper.model.decoder.layers),
        stepper.config.n_heads,
        steps,
        self_key_count(stepper, steps),
        None if stepper.decoder_only else stepper.source_positions,
        stepper.device,
    )


def _start(
    stepper: Stepper, max_list: list[int], history: AttentionHistory | None
) -> tuple[torch.Tensor, list[int]]:
    """The first step's log-probabilities (N, V) and the sentences that may produce a token:
    those with room for none leave the cache (and the attention history) before the search."""
    log_probs = stepper.start()
    alive = [i for i in range(len(max_list)) if max_list[i] > 0]
    if len(alive) < len(max_list):
        keep = torch.tensor(alive, dtype=torch.long, device=stepper.device)
        stepper.reorder(keep)
        log_probs = log_probs[keep]
        if history is not None:
            stepper.weights = {
                key: None if v is None else [w[keep] for w in v]
                for key, v in stepper.weights.items()
            }
            history.reorder(keep)
    return log_probs, alive


def candidates(
    beam_scores: torch.Tensor, log_probs: torch.Tensor, k: int, eos_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each sentence's 2k best continuations of its live beams (beam_scores (N, G), log_probs
    (N * G, V)), ranked by raw log-probability, best first: their scores, beams, tokens and whether
    the token is </s>, each (N, 2k)."""
    b, beams = beam_scores.shape
    vocab = log_probs.shape[-1]
    cand = (beam_scores[:, :, None] + log_probs.view(b, beams, vocab)).view(b, beams * vocab)
    scores, index = _top_candidates(cand, 2 * k)
    token = index % vocab
    return scores, index // vocab, token, token == eos_id


def next_beams(
    cand_scores: torch.Tensor,
    cand_beam: torch.Tensor,
    cand_token: torch.Tensor,
    is_eos: torch.Tensor,
    k: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The G next live beams of each sentence: its best k candidates that are not </s>, by raw
    log-probability (a sentence short of them gets -inf beams). Scores, parent beams and tokens,
    each (N, G)."""
    n_cand = cand_scores.shape[1]
    rank = is_eos.long() * n_cand + torch.arange(n_cand, device=cand_scores.device)
    order = rank.argsort(dim=-1)[:, :k]
    scores = cand_scores.gather(1, order).masked_fill(is_eos.gather(1, order), -float("inf"))
    return scores, cand_beam.gather(1, order), cand_token.gather(1, order)


def _top_candidates(cand: torch.Tensor, n_cand: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The n_cand best continuations (N, M) of (N, G * V) scores, best first; a vocabulary too small
    to fill them pads the list with impossible (-inf) entries."""
    top = min(n_cand, cand.shape[1])
    scores, index = cand.topk(top, dim=-1)
    if top < n_cand:
        fill = n_cand - top
        scores = torch.cat([scores, scores.new_full((cand.shape[0], fill), -float("inf"))], dim=1)
        index = torch.cat([index, index.new_zeros(cand.shape[0], fill)], dim=1)
    return scores, index


def _collect(
    stepper: Stepper,
    finished: list[list[Hypothesis]],
    n_best: int,
    return_scores: bool,
    return_attention: bool,
):
    cfg = stepper.config
    device = stepper.device
    # sorted is stable: on a tie, the hypothesis that finished first comes first
    best = [sorted(hyps, key=lambda h: -h.score)[:n_best] for hyps in finished]
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
