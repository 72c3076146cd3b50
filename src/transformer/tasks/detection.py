"""Object detection as set prediction (DETR): an encoder-decoder over an image's feature map whose
queries each give a class and a box; run by `detect`, scored by COCO's mAP (`evaluate
--detection`)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Route, Scored, Task
from .evaluation import Evaluation
from .figures import DETECTION
from .inputs import feature_map, per_detection
from .reports import open_model

BOX_METRICS = {
    "map": "mAP@[.5:.95]",
    "ap50": "AP50",
    "ap75": "AP75",
    "map_small": "mAP small",
    "map_medium": "mAP medium",
    "map_large": "mAP large",
    "mar_100": "AR@100",
}
"""The COCO box metrics `evaluate --detection` prints, by their key in score_detector's scores."""


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.detection is not None


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import Detection

    return Detection(config, run_dir, say, resume)


def score(pipeline, config: RunConfig, test: tuple[str, ...]) -> dict[str, float]:
    """COCO mAP@[.5:.95], AP50 and AP75 on the validation folder and on the test folder."""
    from ..evaluation.detector import score_detector

    row: dict[str, float] = {}
    valid = config.data.detection.valid
    for split, path in (("valid", valid), ("test", test[0] if test else None)):
        if path:
            scores, _, _ = score_detector(pipeline, path)
            row.update({f"{split}_{k}": round(scores[k], 4) for k in ("map", "ap50", "ap75")})
    return row


def infer(pipeline, images, **settings):
    """`pipeline(images)`: each image's objects (Pipeline.detect)."""
    return pipeline.detect(images, **settings)


def evaluate_detector(e: Evaluation) -> None:
    """`evaluate --detection DIR`: COCO's mAP@[.5:.95], AP50 and AP75 (and by object size) of a
    detector on a folder of images with COCO annotations."""
    from ..evaluation.detector import score_detector
    from ..model.detection import COCO_DETECTIONS

    pipeline = open_model(e, TASK)
    scores, n_images, n_objects = score_detector(pipeline, e.detection, e.per_query)
    d, n_classes = pipeline.model.config.detection, pipeline.model.config.n_classes
    ranked = (
        f"each of the {d.n_queries} queries' most likely class"
        if e.per_query
        else f"the {min(COCO_DETECTIONS, d.n_queries * n_classes)} most likely (query, class) pairs"
    )
    print(
        f"{e.detection}: {n_images:,} {'image' if n_images == 1 else 'images'}, "
        f"{n_objects:,} objects; COCO box metrics over {ranked} per image"
    )
    for key, name in BOX_METRICS.items():
        value = scores.get(key)
        shown = "n/a (no objects of this size)" if value is None or value < 0 else f"{value:.4f}"
        print(f"{name:>14} = {shown}")


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
    evaluate=(
        Scored("--detection", "object detection", "a detector's COCO mAP", run=evaluate_detector),
    ),
    score=score,
    test_files=1,
)
