"""Input corruption for pretraining objectives: BERT's masked-LM masking (Devlin et al. 2019, §3.1).

Of the tokens that may be chosen (every real token but the special ones: [CLS], [SEP], [PAD],
[UNK], [MASK]), each is chosen with probability p (0.15); a chosen token becomes [MASK] with
probability 0.8, a random ordinary token with 0.1, and stays itself with 0.1. The loss is taken
on the chosen positions only: `labels` holds their original ids and IGNORE everywhere else.

Choosing is per token (as Hugging Face's collator does, not BERT's fixed count per sequence), and a
row where no token came up gets one chosen at random, so every text of a batch teaches something
(a 10-token text draws none with probability 0.85^10 = 20%).
"""

from __future__ import annotations

import torch

IGNORE = -100
"""The label of a position that is not predicted (torch's cross_entropy ignore_index)."""


def mask_tokens(ids: torch.Tensor, special_ids: torch.Tensor, mask_id: int, vocab_size: int, probability: float,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """ids (B, L) -> (inputs, labels), both (B, L): inputs with the chosen tokens replaced as above,
    labels the original id at chosen positions and IGNORE elsewhere. special_ids: 1-D tensor of
    the ids never chosen nor drawn as random tokens (padding among them)."""
    if not 0 < probability < 1:
        raise ValueError(f"probability={probability!r}: it must be in (0, 1)")
    maskable = ~torch.isin(ids, special_ids)  # (B, L)
    chosen = (torch.rand(ids.shape, generator=generator) < probability) & maskable
    none = ~chosen.any(dim=1) & maskable.any(dim=1)  # rows that drew nothing but could have
    if none.any():
        scores = torch.rand(ids.shape, generator=generator).masked_fill(~maskable, -1.0)
        pick = scores.argmax(dim=1)  # a random maskable position per row
        chosen[none, pick[none]] = True
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    roll = torch.rand(ids.shape, generator=generator)
    to_mask = chosen & (roll < 0.8)
    to_random = chosen & (roll >= 0.8) & (roll < 0.9)
    ordinary = torch.ones(vocab_size, dtype=torch.bool)
    ordinary[special_ids[special_ids < vocab_size]] = False
    candidates = ordinary.nonzero().squeeze(1)  # the ids a random replacement is drawn from
    drawn = candidates[torch.randint(len(candidates), ids.shape, generator=generator)]
    inputs = torch.where(to_mask, torch.full_like(ids, mask_id), ids)
    inputs = torch.where(to_random, drawn, inputs)
    return inputs, labels
