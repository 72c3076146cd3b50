"""Length penalties for beam search, as pure functions.

Two different formulas go by the name "length penalty"; the config and output always say which:
- "wu":    lp(Y) = ((5 + |Y|) / 6)^alpha  (Wu et al. 2016, §7; the Transformer paper's alpha = 0.6,
§6.1)
- "power": lp(Y) = |Y|^alpha              (fairseq, Hugging Face `length_penalty`)
A finished hypothesis scores log P(Y | X) / lp(Y); |Y| counts the `</s>` token when there is one.
"""

from __future__ import annotations

import torch

from ..config import LENGTH_PENALTY_KINDS  # decode.length_penalty_kind's choice list


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
    """The score beam search ranks finished hypotheses by: log P(Y | X) / lp(|Y|)."""
    return log_prob / length_penalty(length, alpha, kind)


def best_attainable(
    log_prob: torch.Tensor, length: int, max_length: int, alpha: float, kind: str = "wu"
) -> torch.Tensor:
    """An upper bound on the final score of a live hypothesis with `length` tokens and log P =
    log_prob.

    Log-probabilities only fall as tokens are added, so with log_prob <= 0 the best a live
    hypothesis can do is keep log_prob and finish at the length in [length + 1, max_length]
    with the largest penalty divisor; lp is monotonic, so that is one of the two ends.
    """
    lo = length_penalty(min(length + 1, max_length), alpha, kind)
    hi = length_penalty(max_length, alpha, kind)
    return log_prob / max(lo, hi)
