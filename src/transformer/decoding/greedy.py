"""Greedy search: at each step the most probable next token, for a whole batch over the KV cache.

Also the loop that sampling shares: one token per row per step, and a sentence that has
produced </s> (or reached its length bound) leaves the cache, so it stops costing work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..config import DecodeConfig
from .history import AttentionHistory
from .repetition import RepetitionGuards
from .step import SourceInput, Stepper, blocked_tokens, inference

OnStep = Callable[[torch.Tensor, torch.Tensor], None]


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


def self_key_count(stepper: Stepper, steps: int) -> int:
    """Self-attention keys seen while predicting `steps` tokens: <s> (or the decoder prefix) +
    outputs, or the padded prompt + outputs."""
    if steps == 0:
        return 0
    first = stepper.src_ids.shape[1] if stepper.decoder_only else stepper.prefix_length
    return first + steps - 1


def one_token_per_row(
    stepper: Stepper,
    choose: Callable[[torch.Tensor], torch.Tensor],
    max_new: torch.Tensor,
    min_len: int = 0,
    return_attention: bool = False,
    on_step: OnStep | None = None,
):
    """The greedy/sampling loop. choose maps log-probs (N, V) to tokens (N,).

    on_step(rows, tokens), if given, is called after each step with the batch rows still decoding
    (N,) and the token each chose (N,), </s> included: to stream the output as it is made. An
    exception it raises stops the decoding and propagates (a server's way to drop a request).

    Returns ids (B, T) right-padded with pad_id and without </s>, the summed log-probabilities
    of the chosen tokens (</s> included) (B,), and the attention weights or None.
    """
    cfg = stepper.config
    device = stepper.device
    b = stepper.batch_size
    max_new = max_new.to(device)
    steps = int(max_new.max()) if b else 0
    out = torch.full((b, steps), cfg.pad_id, dtype=torch.long, device=device)
    scores = torch.zeros(b, device=device)
    lengths = torch.zeros(b, dtype=torch.long, device=device)
    history = None
    if return_attention:
        dec = stepper.model.decoder
        history = AttentionHistory(
            b,
            len(dec.layers),
            cfg.n_heads,
            steps,
            self_key_count(stepper, steps),
            None if stepper.decoder_only else stepper.source_positions,
            device,
        )
    if steps > 0:
        alive = torch.arange(b, device=device)
        log_probs = stepper.start()  # (B, V)
        if not bool((max_new > 0).all()):
            keep = (max_new > 0).nonzero().squeeze(1)
            stepper.reorder(keep)
            alive, log_probs = alive[keep], log_probs[keep]
            if stepper.weights is not None:
                stepper.weights = {
                    k: None if v is None else [w[keep] for w in v]
                    for k, v in stepper.weights.items()
                }
        for t in range(steps):
            if history is not None:
                history.write(t, stepper.weights, alive)
            blocked_tokens(log_probs, cfg, t, min_len)
            tokens = choose(log_probs)  # (N,)
            if on_step is not None:
                on_step(alive, tokens)
            scores[alive] += log_probs.gather(1, tokens[:, None]).squeeze(1)
            is_eos = tokens == cfg.eos_id
            out[alive, t] = torch.where(is_eos, cfg.pad_id, tokens)
            lengths[alive] += (~is_eos).long()
            keep = ~(is_eos | (t + 1 >= max_new[alive]))
            if not bool(keep.any()):
                break
            if not bool(keep.all()):
                index = keep.nonzero().squeeze(1)
                stepper.reorder(index)  # finished sentences leave the cache
                alive, tokens = alive[index], tokens[index]
            log_probs = stepper.step(tokens)
    width = int(lengths.max()) if b else 0
    attention = None
    if history is not None:
        keys = self_key_count(stepper, width)
        # Rows past a sentence's output are zero (the query that predicted </s> has no token, no
        # row).
        real = (torch.arange(width, device=device)[None] < lengths[:, None])[
            :, None, None, :, None
        ]  # (B, 1, 1, T, 1)
        attention = {
            "self": history.self[:, :, :, :width, :keys] * real,
            "cross": None if history.cross is None else history.cross[:, :, :, :width] * real,
        }
    return out[:, :width], scores, attention


def greedy_search(
    model: torch.nn.Module,
    src_ids: SourceInput,
    max_len_a: float = DecodeConfig.max_len_a,
    max_len_b: int = DecodeConfig.max_len_b,
    min_len: int = DecodeConfig.min_len,
    src_mask: torch.Tensor | None = None,
    return_scores: bool = False,
    return_attention: bool = False,
    on_step: OnStep | None = None,
    no_repeat_ngram_size: int = DecodeConfig.no_repeat_ngram_size,
    repetition_penalty: float = DecodeConfig.repetition_penalty,
    prefix: Sequence[int] | None = None,
    suppress_tokens: Sequence[int] = (),
    begin_suppress_tokens: Sequence[int] = (),
):
    """Greedy decoding for a batch: the argmax token at every step.

    src_ids: (B, S) ids right-padded with pad_id (or with an explicit src_mask), or a list of
    sequences. For a decoder-only model they are prompts and the output is their continuation.
    At most floor(max_len_a * source_length + max_len_b) tokens are generated per row
    (</s> included); </s> is blocked before min_len tokens; no_repeat_ngram_size and
    repetition_penalty guard each row's output against repetition (repetition.py).
    Returns ids (B, T) without <s>/</s>, right-padded with pad_id; with return_scores also the
    summed log-probabilities (B,) (</s> included; with repetition_penalty, of the penalised
    distribution); with return_attention also
    {"self": (B, layers, H, T, keys), "cross": (B, layers, H, T, S) or None}. on_step: see
    one_token_per_row. prefix: an encoder-decoder's forced first decoder tokens (None = the start
    token), not repeated in the output; suppress_tokens are never generated, begin_suppress_tokens
    not as the first token. A speech model (config.audio) takes log-mel features (B, n_mels, F)
    as src_ids and a frame mask (B, F) as src_mask.
    """
    DecodeConfig(
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        min_len=min_len,
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
        ids, scores, attention = one_token_per_row(
            stepper, lambda lp: lp.argmax(dim=-1), max_new, min_len, return_attention, on_step
        )
    return pack_outputs(ids, scores, attention, return_scores, return_attention)
