"""Input corruption for pretraining objectives: BERT's masked-LM masking (Devlin et al. 2019, §3.1)
and T5's span corruption (Raffel et al. 2020, §3.1.4).

Masked LM:

Of the tokens that may be chosen (every real token but the special ones: [CLS], [SEP], [PAD],
[UNK], [MASK]), each is chosen with probability p (0.15); a chosen token becomes [MASK] with
probability 0.8, a random ordinary token with 0.1, and stays itself with 0.1. The loss is taken
on the chosen positions only: `labels` holds their original ids and IGNORE everywhere else.

Choosing is per token (as Hugging Face's collator does, not BERT's fixed count per sequence), and a
row where no token came up gets one chosen at random, so every text of a batch teaches something
(a 10-token text draws none with probability 0.85^10 = 20%).

Span corruption: of a text of L tokens, round(L x density) (at least 1, at most L - 1) are noise,
in round(noise / mean span length) spans (at least 1); the noise and the kept tokens are each cut
at random into that many non-empty runs, which alternate, kept first. The input is the kept runs
with each noise span replaced by one sentinel (<extra_id_0>, <extra_id_1>, ... in order); the
target is each sentinel followed by the span it hides. So input + target put together give the
text back, and their lengths follow from L alone (span_corruption_lengths).
"""

from __future__ import annotations

import torch

NOISE_DENSITY = 0.15
"""T5's share of noise tokens."""
MEAN_SPAN = 3.0
"""T5's mean noise span length."""

IGNORE = -100
"""The label of a position that is not predicted (torch's cross_entropy ignore_index)."""


def mask_tokens(
    ids: torch.Tensor,
    special_ids: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    probability: float,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
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


def noise_counts(
    length: int, density: float = NOISE_DENSITY, mean_span: float = MEAN_SPAN
) -> tuple[int, int]:
    """(noise tokens, spans) of a text of `length` tokens, as T5 counts them (a 1-token text is all
    noise)."""
    if length < 2:
        return length, 1
    noise = min(max(round(length * density), 1), length - 1)
    return noise, max(round(noise / mean_span), 1)


def span_corruption_lengths(
    length: int, density: float = NOISE_DENSITY, mean_span: float = MEAN_SPAN
) -> tuple[int, int]:
    """(input, target) lengths of a corrupted text of `length` tokens, before any </s>."""
    noise, spans = noise_counts(length, density, mean_span)
    return length - noise + spans, noise + spans


def _random_segmentation(total: int, pieces: int, generator: torch.Generator) -> list[int]:
    """`total` cut at random into `pieces` non-empty runs (each cut set equally likely)."""
    cuts = (torch.randperm(total - 1, generator=generator)[: pieces - 1] + 1).sort().values.tolist()
    bounds = [0, *cuts, total]
    return [b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def noise_spans(
    length: int,
    generator: torch.Generator,
    density: float = NOISE_DENSITY,
    mean_span: float = MEAN_SPAN,
) -> list[tuple[int, int]]:
    """The noise spans of a text of `length` >= 1 tokens: [(start, end), ...] in order."""
    if length < 2:
        if length < 1:
            raise ValueError("span corruption needs a text of at least 1 token")
        return [(0, 1)]  # too short to keep anything: the one token is the span
    noise, spans = noise_counts(length, density, mean_span)
    noise_runs = _random_segmentation(noise, spans, generator)
    kept_runs = _random_segmentation(length - noise, spans, generator)
    out, position = [], 0
    for kept, hidden in zip(kept_runs, noise_runs, strict=True):
        position += kept
        out.append((position, position + hidden))
        position += hidden
    return out


def corrupt_spans(
    ids: list[int],
    sentinels: list[int],
    generator: torch.Generator,
    density: float = NOISE_DENSITY,
    mean_span: float = MEAN_SPAN,
) -> tuple[list[int], list[int]]:
    """A text's ids -> (input, target) of span corruption; sentinels[k] stands for the k-th span."""
    spans = noise_spans(len(ids), generator, density, mean_span)
    if len(spans) > len(sentinels):
        raise ValueError(
            f"a text of {len(ids)} tokens has {len(spans)} noise spans but there are only "
            f"{len(sentinels)} sentinel tokens: train the tokenizer with more (data.sentinels)"
        )
    inputs, targets, position = [], [], 0
    for k, (start, end) in enumerate(spans):
        inputs += ids[position:start]
        inputs.append(sentinels[k])
        targets.append(sentinels[k])
        targets += ids[start:end]
        position = end
    inputs += ids[position:]
    return inputs, targets


def uncorrupt(inputs: list[int], targets: list[int], sentinels: list[int]) -> list[int]:
    """The text back from a corruption: each sentinel of the input replaced by what follows it in
    the target."""
    index = {s: k for k, s in enumerate(sentinels)}
    filled, current = {}, None
    for token in targets:
        if token in index:
            current = index[token]
            filled[current] = []
        elif current is not None:
            filled[current].append(token)
    out = []
    for token in inputs:
        out += filled.get(index[token], []) if token in index else [token]
    return out
