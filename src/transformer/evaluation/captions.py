"""Image captions scored against their references (an image's label name, as the caption objective
trains it): exact match (the whole caption equal to the name, surrounding whitespace aside) and
corpus chrF (sacreBLEU's, evaluation/metrics.py), which gives credit for a caption that is close
("red apple" for "green apple").

`greedy_captions` is what training's validation decodes with; `score_captions` drives a Pipeline
over a labelled image split (what `transformer evaluate --images` does for a captioner).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

from ..decoding.greedy import greedy_search
from .metrics import chrf


@dataclass(frozen=True)
class CaptionScores:
    """Exact match (0-1) and corpus chrF (0-100) of n captions."""

    exact_match: float
    chrf: float
    n: int
    chrf_line: str
    """sacreBLEU's chrF line with its signature."""


def caption_scores(hypotheses: Sequence[str], references: Sequence[str]) -> CaptionScores:
    """Exact match and chrF of captions against their references (one each, in order)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} captions for {len(references)} references")
    if not references:
        raise ValueError("no captions to score: give at least one image")
    exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references, strict=True))
    score = chrf(list(hypotheses), list(references))
    return CaptionScores(exact / len(references), score.score, len(references), str(score))


@torch.no_grad()
def greedy_captions(
    model: torch.nn.Module,
    batches: Iterable[torch.Tensor],
    decode: Callable[[list[int]], str],
    max_len: int,
) -> list[str]:
    """Greedy captions of batches of pixels (B, channels, size, size) in [-1, 1], in order, at
    most max_len tokens each (</s> included); decode turns output ids into text."""
    captions: list[str] = []
    for pixels in batches:
        ids = greedy_search(model, pixels, max_len_a=0, max_len_b=max_len)  # (B, T)
        captions += [decode(row).strip() for row in ids.tolist()]
    return captions


def score_captions(
    pipeline, path: str | os.PathLike, batch_size: int | None = None, **decode
) -> tuple[CaptionScores, list[str], list[str]]:
    """A captioner's scores on a labelled image split (a prepared .safetensors split or a folder of
    class folders, at the model's channels and size), its captions and the references, in the
    split's order. decode overrides the model's decoding defaults (beam_size, ...)."""
    from ..data.images import load_images

    v = pipeline.model.config.vision
    data = load_images(path, v.channels, v.image_size)
    references = [data.names[i] for i in data.labels.tolist()]
    captions = pipeline.caption(data.images, batch_size=batch_size, **decode)
    return caption_scores(captions, references), captions, references
