"""Object detection as set prediction (DETR): an encoder-decoder over an image's feature map whose
queries each give a class and a box; run by `detect`, scored by COCO's mAP (`evaluate
--detection`)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Route, Scored, Task
from .figures import DETECTION
from .inputs import feature_map, per_detection


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.detection is not None


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import Detection

    return Detection(config, run_dir, say, resume)


def score(pipeline, config: RunConfig, test: tuple[str, ...]) -> dict[str, float]:
    """COCO mAP@[.5:.95], AP50 and AP75 on the validation folder and on the test folder."""
    from ..evaluation.detector import score_detector

    row: dict[str, float] = {}
    valid = config.data.valid_detection
    for split, path in (("valid", valid), ("test", test[0] if test else None)):
        if path:
            scores, _, _ = score_detector(pipeline, path)
            row.update({f"{split}_{k}": round(scores[k], 4) for k in ("map", "ap50", "ap75")})
    return row


def infer(pipeline, images, **settings):
    """`pipeline(images)`: each image's objects (Pipeline.detect)."""
    return pipeline.detect(images, **settings)


TASK = Task(
    name="detection",
    summary="object detection: the objects of an image, with their boxes (DETR)",
    described="an object detector",
    objectives=("detection",),
    family="detection",
    runs=runs,
    prepare=prepare,
    attention=DETECTION,
    batch_size=64,
    tokenizers=False,
    inputs=feature_map,
    cost=per_detection,
    infer=infer,
    command="detect",
    routes=(Route("/v1/detect"),),
    evaluate=(Scored("--detection", "object detection", "a detector's COCO mAP"),),
    score=score,
    test_files=1,
)
