"""Sampling from a model: temperature, top-k (Fan et al. 2018) and nucleus / top-p (Holtzman et al.
2020).

Reproducible: pass a torch.Generator (seeded by you); nothing here touches global random state.

Temperature 0 is greedy decoding: the limit of softmax(logits / T) as T -> 0 puts all the mass on
the most probable token, so each step takes the argmax (top_k and top_p change nothing) and no
random number is drawn. This is the one place that rule lives: the CLI, the config and the server
pass temperature 0 through to here.
"""

from __future__ import annotations

import torch

from ..config import DecodeConfig
from .greedy import OnStep, one_token_per_row, pack_outputs
from .repetition import RepetitionGuards
from .step import SourceInput, Stepper, inference


def top_k_filter(log_probs: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest entries of each row (N, V), set the rest to -inf (k = 0 keeps all)."""
    if k <= 0 or k >= log_probs.shape[-1]:
        return log_probs
    kth = log_probs.topk(k, dim=-1).values[:, -1:]  # (N, 1)
    return log_probs.masked_fill(log_probs < kth, -float("inf"))


def top_p_filter(log_probs: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of most probable tokens whose probability reaches p (N, V); the top
    token always stays."""
    if p >= 1.0:
        return log_probs
    sorted_lp, order = log_probs.sort(dim=-1, descending=True)
    probs = sorted_lp.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # mass of the strictly more probable tokens
    drop_sorted = before >= p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return log_probs.masked_fill(drop, -float("inf"))


def draw(
    log_probs: torch.Tensor,
    temperature: float,
    top_k: int,
    top_p: float,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """One token per row (N,) from log-probabilities (N, V): drawn from softmax(log_probs /
    temperature) within the top_k tokens and then the top_p nucleus; temperature 0 takes the most
    probable token (greedy: the limit T -> 0, see the module's doc) and draws nothing."""
    if temperature == 0:
        return log_probs.argmax(dim=-1)
    lp = torch.log_softmax(log_probs / temperature, dim=-1)
    lp = top_p_filter(top_k_filter(lp, top_k), top_p)
    return torch.multinomial(lp.softmax(dim=-1), 1, generator=generator).squeeze(1)


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
    and filtering (repetition.py; Hugging Face's order). Returns ids (B, T) without </s>,
    right-padded with pad_id; with return_scores also the summed log-probabilities of the drawn
    tokens under the model itself (temperature 1, no filtering; with repetition_penalty, the
    penalised distribution) (B,). on_step(rows, tokens) is called after each step
    (greedy.one_token_per_row).
    """
    DecodeConfig(
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        min_len=min_new_tokens,
        no_repeat_ngram_size=no_repeat_ngram_size,
        repetition_penalty=repetition_penalty,
    )  # validates the values
    guards = RepetitionGuards.of(no_repeat_ngram_size, repetition_penalty)

    def choose(log_probs: torch.Tensor) -> torch.Tensor:
        return draw(log_probs, temperature, top_k, top_p, generator)

    with inference(model):
        stepper = Stepper(
            model, prompt_ids, prompt_mask, need_weights=return_attention, guards=guards
        )
        max_new = stepper.max_new_tokens(0.0, max_new_tokens)
        ids, scores, attention = one_token_per_row(
            stepper, choose, max_new, min_new_tokens, return_attention, on_step
        )
    return pack_outputs(ids, scores, attention, return_scores, return_attention)
