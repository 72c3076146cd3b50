"""Sampling from a model: temperature, top-k (Fan et al. 2018) and nucleus / top-p (Holtzman et al.
2020).

A thin shell: the settings become one DecodeConfig, validated here, and the batch is decoded on the
one-row lane (search/one_row.py) stepped to the end, every row drawing from the one generator. The
draw itself and the temperature-0 rule live in search/draw.py.

Reproducible: pass a torch.Generator (seeded by you); nothing here touches global random state.
"""

from __future__ import annotations

import torch

from ..config import DecodeConfig
from .search.batch import pack_outputs, run_one_row
from .search.one_row import OnStep
from .search.step import SourceInput


def sample(
    model: torch.nn.Module,
    prompt_ids: SourceInput,
    max_new_tokens: int = DecodeConfig.max_new_tokens,
    temperature: float = DecodeConfig.temperature,
    top_k: int = DecodeConfig.top_k,
    top_p: float = DecodeConfig.top_p,
    generator: torch.Generator | None = None,
    min_new_tokens: int = 0,
    prompt_mask: torch.Tensor | None = None,
    return_scores: bool = False,
    return_attention: bool = False,
    on_step: OnStep | None = None,
    no_repeat_ngram_size: int = DecodeConfig.no_repeat_ngram_size,
    repetition_penalty: float = DecodeConfig.repetition_penalty,
):
    """Sample a continuation of each prompt (decoder-only) or a translation of each source (encoder-
    decoder).

    Each step draws from softmax(logits / temperature), restricted to the top_k tokens and then
    to the top_p nucleus; temperature 0 takes the most probable token (greedy search's output).
    The repetition guards apply first, to the logits and log-probabilities before temperature
    and filtering (search/repetition.py; Hugging Face's order). Returns ids (B, T) without </s>,
    right-padded with pad_id; with return_scores also the summed log-probabilities of the drawn
    tokens under the model itself (temperature 1, no filtering; with repetition_penalty, the
    penalised distribution) (B,). on_step(rows, tokens) is called after each step
    (greedy.greedy_search).
    """
    settings = DecodeConfig(
        beam_size=1,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        min_len=min_new_tokens,
        no_repeat_ngram_size=no_repeat_ngram_size,
        repetition_penalty=repetition_penalty,
    )  # the one validation
    device = next(model.parameters()).device
    ids, scores, attention = run_one_row(
        model,
        prompt_ids,
        settings,
        prompt_mask,
        generator=default_generator(device) if generator is None else generator,
        max_new=max_new_tokens,
        return_attention=return_attention,
        on_step=on_step,
    )
    return pack_outputs(ids, scores, attention, return_scores, return_attention)


def default_generator(device: torch.device) -> torch.Generator:
    """torch's own generator for a device: what torch.multinomial draws from when given none."""
    if device.type == "cuda":
        return torch.cuda.default_generators[
            torch.cuda.current_device() if device.index is None else device.index
        ]
    return torch.default_generator
