"""`evaluate --detection`: a detector's COCO mAP (imported by cli/evaluation.py)."""

from __future__ import annotations

import argparse

from .loading import (
    detector,
)


def evaluate_detection(args: argparse.Namespace) -> None:
    """`evaluate --detection DIR`: COCO's mAP@[.5:.95], AP50 and AP75 (and by object size) of a
    detector on a folder of images with COCO annotations."""
    from ..evaluation.detector import score_detector
    from ..model.detection import COCO_DETECTIONS

    pipeline = detector(args, "evaluate")
    scores, n_images, n_objects = score_detector(pipeline, args.detection, args.per_query)
    d, n_classes = pipeline.model.config.detection, pipeline.model.config.n_classes
    ranked = (
        f"each of the {d.n_queries} queries' most likely class"
        if args.per_query
        else f"the {min(COCO_DETECTIONS, d.n_queries * n_classes)} most likely (query, class) pairs"
    )
    print(
        f"{args.detection}: {n_images:,} {'image' if n_images == 1 else 'images'}, "
        f"{n_objects:,} objects; COCO box metrics over {ranked} per image"
    )
    names = {
        "map": "mAP@[.5:.95]",
        "ap50": "AP50",
        "ap75": "AP75",
        "map_small": "mAP small",
        "map_medium": "mAP medium",
        "map_large": "mAP large",
        "mar_100": "AR@100",
    }
    for key, name in names.items():
        value = scores.get(key)
        shown = "n/a (no objects of this size)" if value is None or value < 0 else f"{value:.4f}"
        print(f"{name:>14} = {shown}")
