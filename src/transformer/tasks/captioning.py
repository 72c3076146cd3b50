"""Image captioning: a ViT encoder under a text decoder, each image's name its caption; run by
`caption`, scored by exact match and chrF (`evaluate --images` of a captioner)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Scored, Task
from .figures import CAPTION
from .inputs import patches_and_tokens, per_image


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.arch == "encoder-decoder" and model.vision is not None


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import Caption

    return Caption(config, run_dir, dist, say, resume)


def infer(pipeline, images, **settings):
    """`pipeline(images)`: a caption for each image (Pipeline.caption)."""
    return pipeline.caption(images, **settings)


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
    evaluate=(Scored("--images", "captions", "a captioner's exact match and chrF"),),
)
