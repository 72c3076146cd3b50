"""Length penalties for beam search, as pure functions.

Two different formulas go by the name "length penalty"; the config and output always say which:
- "wu":    lp(Y) = ((5 + |Y|) / 6)^alpha  (Wu et al. 2016, §7; the Transformer paper's alpha = 0.6,
§6.1)
- "power": lp(Y) = |Y|^alpha              (fairseq, Hugging Face `length_penalty`)
A finished hypothesis scores log P(Y | X) / lp(Y); log P includes `</s>`'s probability, and |Y|
counts the `</s>` token when there is one (fairseq, Hugging Face) or, with decode.length_counts_eos
false, only the output tokens (CTranslate2's Whisper.generate: `include_eos_in_hypotheses = false`,
then its finalize_hypothesis_score divides by the hypothesis's size). An empty hypothesis then has
|Y| = 0: under "power" with alpha != 0 it ranks last (-inf), rather than dividing by zero.
"""

from __future__ import annotations

import torch

from ...config import LENGTH_PENALTY_KINDS  # decode.length_penalty_kind's choice list


def length_penalty(
    length: torch.Tensor | int | float, alpha: float, kind: str = "wu"
) -> torch.Tensor | float:
    """lp(|Y|) for a length (or a tensor of lengths) under `kind` ("wu" or "power")."""
    match kind:
        case "wu":
            return ((5.0 + length) / 6.0) ** alpha
        case "power":
            return length**alpha if not isinstance(length, int) else float(length) ** alpha
        case _:
            raise ValueError(
                f"length_penalty_kind={kind!r} is not valid: choose "
                f"{' or '.join(map(repr, LENGTH_PENALTY_KINDS))}"
            )


def penalized_score(
    log_prob: torch.Tensor | float, length: torch.Tensor | int, alpha: float, kind: str = "wu"
):
    """The score beam search ranks finished hypotheses by: log P(Y | X) / lp(|Y|); -inf for an
    empty hypothesis (|Y| = 0) whose lp is 0 or undefined (power, alpha != 0)."""
    if kind == "power" and alpha != 0 and isinstance(length, int) and length == 0:
        return -float("inf")
    return log_prob / length_penalty(length, alpha, kind)


def best_attainable(
    log_prob: torch.Tensor,
    length: int,
    max_length: int,
    alpha: float,
    kind: str = "wu",
    counts_eos: bool = True,
) -> torch.Tensor:
    """An upper bound on the final score of a live hypothesis with `length` tokens (length >= 1)
    and log P = log_prob.

    Log-probabilities only fall as tokens are added, so with log_prob <= 0 the best a live
    hypothesis can do is keep log_prob and finish at the length in [length + 1, max_length]
    ([length, max_length] when |Y| does not count </s>) with the largest penalty divisor; lp is
    monotonic, so that is one of the two ends.
    """
    shortest = length + 1 if counts_eos else length
    lo = length_penalty(min(shortest, max_length), alpha, kind)
    hi = length_penalty(max_length, alpha, kind)
    return log_prob / max(lo, hi)
