"""Text-image dual encoders (CLIP): an image tower and a text tower trained so that matching pairs
embed close; run by `embed`, scored by zero-shot accuracy and retrieval recall (`evaluate
--images` of a dual encoder)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Scored, Task
from .figures import IMAGE
from .inputs import patches, per_image_and_token


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.contrastive is not None


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import Contrastive

    return Contrastive(config, run_dir, dist, say, resume)


def infer(pipeline, texts, **settings):
    """`pipeline(texts)`: the unit embeddings of texts (Pipeline.embed_texts; images:
    Pipeline.embed_images)."""
    return pipeline.embed_texts(texts, **settings)


TASK = Task(
    name="contrastive",
    summary="text-image dual encoders: images and texts in one embedding space (CLIP)",
    described="a text-image dual encoder",
    objectives=("contrastive",),
    family="encoder",
    runs=runs,
    prepare=prepare,
    attention=IMAGE,
    batch_size=256,
    inputs=patches,
    cost=per_image_and_token,
    infer=infer,
    command="embed",
    evaluate=(Scored("--images", "zero-shot", "a dual encoder's zero-shot and retrieval scores"),),
)
