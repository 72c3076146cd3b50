"""Image generation (Image GPT): a decoder over pixel tokens, conditioned on a label, a name or
nothing; run by `generate --image`, scored by bits per dimension (`evaluate --images` of a model
with pixels.json)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Scored, Task


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.arch == "decoder" and pixels


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import ImageLM

    return ImageLM(config, run_dir, say)


def infer(pipeline, count, **settings):
    """`pipeline(count)`: images sampled pixel by pixel (Pipeline.generate_images)."""
    return pipeline.generate_images(count, **settings)


TASK = Task(
    name="image-generation",
    summary="image generation: images sampled pixel by pixel (Image GPT)",
    described="an image generator",
    objectives=("image_lm",),
    family="image-generation",
    runs=runs,
    prepare=prepare,
    infer=infer,
    command="generate_images",
    tokenizers=False,
    evaluate=(Scored("--images", "bits per dimension", "an image generator's bits per dimension"),),
)
