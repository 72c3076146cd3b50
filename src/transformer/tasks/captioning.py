"""Image captioning: a ViT encoder under a text decoder, each image's name its caption; run by
`caption`, scored by exact match and chrF (`evaluate --images` of a captioner)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Scored, Task
from .evaluation import Evaluation, EvaluationError
from .figures import CAPTION
from .inputs import patches_and_tokens, per_image
from .reports import open_model

SEARCH = ("beam_size", "length_penalty", "length_penalty_kind")
"""The decoding settings evaluate takes for a captioner."""


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.arch == "encoder-decoder" and model.vision is not None


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import Caption

    return Caption(config, run_dir, dist, say, resume)


def infer(pipeline, images, **settings):
    """`pipeline(images)`: a caption for each image (Pipeline.caption)."""
    return pipeline.caption(images, **settings)


def evaluate_captions(e: Evaluation) -> None:
    """`evaluate --images SPLIT` for a captioner: exact match and chrF of its captions against the
    images' label names (decode.json's search, or --beam-size); --output writes the captions."""
    from ..data.lines import write_text
    from ..evaluation.captions import score_captions
    from ..files import check_output

    given = [
        flag
        for flag, value in (
            ("--text", e.text), ("--src", e.src), ("--ref", e.ref), ("--tsv", e.tsv),
            ("--pairs", e.pairs), ("--squad", e.squad), ("--audio", e.audio),
            ("--detection", e.detection), ("--plot", e.plot),
        )
        if value
    ]  # fmt: skip
    if given:
        raise EvaluationError(
            f"give --images (a captioner's exact match and chrF) alone, without {given[0]}"
        )
    if not Path(e.images).exists():
        raise EvaluationError(
            f"--images {e.images} not found: give a prepared split (.safetensors) or a folder "
            "of class folders"
        )
    if e.output:
        check_output(e.output)
    pipeline = open_model(e, TASK)
    scores, captions, _ = score_captions(pipeline, e.images, **e.settings(SEARCH))
    if e.output:
        write_text(e.output, captions)
    hits = round(scores.exact_match * scores.n)
    print(f"exact match {scores.exact_match:.2%} ({hits:,} of {scores.n:,} images of {e.images})")
    print(scores.chrf_line)


TASK = Task(
    name="captioning",
    summary="image captioning: a text for each image",
    described="an image captioning model",
    objectives=("caption",),
    family="captioning",
    runs=runs,
    prepare=prepare,
    attention=CAPTION,
    batch_size=64,
    inputs=patches_and_tokens,
    cost=per_image,
    infer=infer,
    command="caption",
    evaluate=(
        Scored("--images", "captions", "a captioner's exact match and chrF", run=evaluate_captions),
    ),
)
