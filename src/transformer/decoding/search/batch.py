"""One batch decoded under a DecodeConfig that is validated already (Pipeline's settings): greedy
when beam_size is 1, else beam search, on the lanes (one_row.py, beam_lane.py) stepped to the end.
The keyword shells (greedy_search, beam_search) build their DecodeConfig and land in the same
lanes; this entry is for a caller that holds one, so that nothing validates it again.

Legend (model/__init__.py): B sentences, T output tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..config import DecodeConfig
from .beam import collect_hypotheses, run_beam
from .greedy import pack_outputs
from .one_row import run_one_row
from .step import SourceInput


def search(
    model: torch.nn.Module,
    sources: SourceInput,
    settings: DecodeConfig,
    return_attention: bool = False,
    src_mask: torch.Tensor | None = None,
    prefix: Sequence[int] | None = None,
    suppress_tokens: Sequence[int] = (),
    begin_suppress_tokens: Sequence[int] = (),
):
    """Ids (B, T), or (B, n_best, T) for beam search with n_best > 1, as greedy_search /
    beam_search return them under the same settings (with return_attention, also the attention
    weights). A speech model's sources are log-mel features with their frame mask (src_mask);
    prefix, suppress_tokens and begin_suppress_tokens as greedy_search's."""
    stepper = dict(prefix=prefix, suppress=suppress_tokens, begin_suppress=begin_suppress_tokens)
    if settings.beam_size == 1:
        ids, scores, attention = run_one_row(
            model, sources, settings, src_mask, return_attention=return_attention, **stepper
        )
        return pack_outputs(ids, scores, attention, False, return_attention)
    seqs, batch = run_beam(model, sources, settings, src_mask, return_attention, **stepper)
    hypotheses = [seq.results for seq in seqs]
    return collect_hypotheses(batch, hypotheses, settings.n_best, False, return_attention)
