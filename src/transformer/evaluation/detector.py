"""A detector run over a folder of images with COCO annotations and scored with COCO's box metrics
(evaluation.detection.coco_map): what `transformer evaluate --detection` prints.

Each image's 100 most probable (query, class) pairs are its scored predictions, as Deformable DETR
and its successors are evaluated (model.detection.ranked_pairs: a query unsure between two classes
answers as both); with per_query, one prediction per query (its most likely class), as DETR's
paper. COCO's ranking keeps up to 100 per image, so nothing is thresholded. Boxes are compared
in the original images' pixels (areas decide small / medium / large). Crowd annotations are left
out when the folder is read (data.coco.load_detection).
"""

from __future__ import annotations

import os

import numpy as np
import torch

from ..data.coco import load_detection
from .detection import coco_map


def relative_to_xywh(boxes: torch.Tensor, width: int, height: int) -> np.ndarray:
    """(n, 4) relative (cx, cy, w, h) -> COCO's (x, y, w, h) in pixels of a width x height image."""
    b = boxes.float()
    scale = torch.tensor([width, height, width, height], dtype=torch.float32)
    xywh = torch.stack([b[:, 0] - b[:, 2] / 2, b[:, 1] - b[:, 3] / 2, b[:, 2], b[:, 3]], -1)
    return (xywh * scale).numpy().astype(np.float64)


def score_detector(
    pipeline, path: str | os.PathLike, per_query: bool = False
) -> tuple[dict, int, int]:
    """COCO's metrics of pipeline's detector on the folder (or annotations file) at path, the number
    of images and of objects."""
    from ..decoding.detect import all_predictions
    from ..model.detection import COCO_DETECTIONS

    d = pipeline.model.config.detection
    data = load_detection(path, d.channels, d.image_size)
    labels = pipeline.labels or [str(i) for i in range(pipeline.model.config.n_classes)]
    if list(data.names) != list(labels):
        raise ValueError(
            f"{path} has the classes {list(data.names)}; the model detects {labels}: evaluate on "
            "data of the model's classes"
        )
    pairs = None if per_query else COCO_DETECTIONS
    scores, classes, boxes = all_predictions(pipeline, data.images, pairs=pairs)
    truth, predictions = [], []
    for i, (width, height) in enumerate(data.sizes):
        truth.append(
            {
                "boxes": relative_to_xywh(data.boxes[i], width, height),
                "labels": data.labels[i].numpy(),
            }
        )
        predictions.append(
            {
                "boxes": relative_to_xywh(boxes[i], width, height),
                "scores": scores[i].numpy().astype(np.float64),
                "labels": classes[i].numpy(),
            }
        )
    n_objects = sum(len(y) for y in data.labels)
    return coco_map(truth, predictions), len(data.sizes), n_objects
