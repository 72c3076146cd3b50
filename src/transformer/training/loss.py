"""Label-smoothed cross entropy (§5.4: label smoothing of value eps_ls = 0.1).

The true class gets probability 1 - eps; eps is spread evenly over the vocabulary minus the
padding token and the true class (V - 2 entries). Positions whose target is padding add
nothing. Sums are returned, not means, so the caller can normalise by the token count of the
whole (accumulated, all-rank) batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class LossSums:
    """Summed over real target tokens: the smoothed loss (to optimise), the NLL (to report), and the count."""

    loss: torch.Tensor  # () smoothed cross entropy, summed
    nll: torch.Tensor  # () negative log-likelihood of the targets, summed
    n_tokens: int


def label_smoothed_cross_entropy(logits: torch.Tensor, target: torch.Tensor, epsilon: float,
                                 pad_id: int) -> LossSums:
    """logits (B, T, V) or (N, V), target (B, T) or (N,) -> summed losses over non-padding targets.

    Computed in float32 whatever the logits' dtype (autocast-safe).
    """
    vocab = logits.size(-1)
    logp = F.log_softmax(logits.reshape(-1, vocab).float(), dim=-1)  # (N, V)
    target = target.reshape(-1)  # (N,)
    keep = target != pad_id  # (N,)
    nll = -logp.gather(1, target.unsqueeze(1)).squeeze(1)  # (N,)
    if epsilon > 0:
        if vocab <= 2:
            raise ValueError(f"label smoothing needs a vocabulary of more than 2 tokens, got {vocab}")
        # Sum over the V - 2 classes that are neither the target nor padding.
        others = -(logp.sum(dim=1) - logp[:, pad_id]) - nll  # (N,)
        smooth = (1.0 - epsilon) * nll + epsilon / (vocab - 2) * others
    else:
        smooth = nll
    zero = torch.zeros((), dtype=smooth.dtype, device=smooth.device)
    return LossSums(torch.where(keep, smooth, zero).sum(), torch.where(keep, nll, zero).sum(),
                    int(keep.sum().item()))
