"""Drawing one token from next-token log-probabilities: temperature, top-k (Fan et al. 2018) and
nucleus / top-p (Holtzman et al. 2020), as pure functions.

Reproducible: pass a torch.Generator (seeded by you); nothing here touches global random state
unless you pass none.

Temperature 0 is greedy decoding: the limit of softmax(logits / T) as T -> 0 puts all the mass on
the most probable token, so each step takes the argmax (top_k and top_p change nothing) and no
random number is drawn. This is the one place that rule lives: the CLI, the config and the server
pass temperature 0 through to here.
"""

from __future__ import annotations

import torch


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
