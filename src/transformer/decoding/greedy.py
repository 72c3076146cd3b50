"""Greedy search: at each step the most probable next token, for a whole batch over the KV cache.

A thin shell: the settings become one DecodeConfig, validated here, and the batch is decoded on the
one-row lane (search/one_row.py), stepped to the end; sampling shares that lane. A sentence that has
produced </s> (or reached its length bound) leaves the cache, so it stops costing work.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..config import DecodeConfig
from .search.batch import pack_outputs, run_one_row
from .search.one_row import OnStep
from .search.step import SourceInput


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
    repetition_penalty guard each row's output against repetition (search/repetition.py).
    Returns ids (B, T) without <s>/</s>, right-padded with pad_id; with return_scores also the
    summed log-probabilities (B,) (</s> included; with repetition_penalty, of the penalised
    distribution); with return_attention also
    {"self": (B, layers, H, T, keys), "cross": (B, layers, H, T, S) or None}.
    on_step(rows, tokens), if given, is called after each step with the batch rows still decoding
    (N,) and the token each chose (N,), </s> included: to stream the output as it is made; an
    exception it raises stops the decoding and propagates. prefix: an encoder-decoder's forced
    first decoder tokens (None = the start token), not repeated in the output; suppress_tokens are
    never generated, begin_suppress_tokens not as the first token. A speech model (config.audio)
    takes log-mel features (B, n_mels, F) as src_ids and a frame mask (B, F) as src_mask.
    """
    settings = DecodeConfig(
        beam_size=1,
        max_len_a=max_len_a,
        max_len_b=max_len_b,
        min_len=min_len,
        no_repeat_ngram_size=no_repeat_ngram_size,
        repetition_penalty=repetition_penalty,
    )  # the one validation
    ids, scores, attention = run_one_row(
        model,
        src_ids,
        settings,
        src_mask,
        return_attention=return_attention,
        on_step=on_step,
        prefix=prefix,
        suppress=suppress_tokens,
        begin_suppress=begin_suppress_tokens,
    )
    return pack_outputs(ids, scores, attention, return_scores, return_attention)
