"""A detector's objects in images: what Pipeline.detect does.

Each image is resized to the model's image_size (data.images.read_image_resized), the model gives
every object query a class, a probability and a box (model.detection.DetectionTransformer.detect),
and the queries whose probability reaches the threshold are the image's objects, most likely
first, their boxes in the original image's pixels. There is no non-maximum suppression: the set
loss taught the queries not to predict one object twice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from ..data.image_tensors import ImageError, to_pixels
from ..data.images import read_image_resized
from ..model.detection import DetectionTransformer
from .inputs import Loaded, PipelineError


@dataclass(frozen=True)
class DetectedObject:
    """One object: its class, the model's probability for it, and its box (x0, y0, x1, y1) in
    pixels of the original image (x to the right, y down, x1 and y1 exclusive)."""

    label: str
    score: float
    box: tuple[float, float, float, float]

    def to_dict(self) -> dict:
        return {"label": self.label, "score": self.score, "box": list(self.box)}


def read_images(
    images, channels: int, image_size: int
) -> tuple[torch.Tensor, list[tuple[int, int]]]:
    """Image files (paths or binary file objects) or uint8 arrays (C, H, W) -> uint8
    (N, channels, image_size, image_size) and each original (width, height)."""
    mode = "L" if channels == 1 else "RGB"
    pixels, sizes = [], []
    for i, image in enumerate(images):
        if isinstance(image, (str, os.PathLike)) or hasattr(image, "read"):
            array, size = read_image_resized(image, mode, image_size, getattr(image, "name", None))
        else:
            array = np.asarray(image)
            if array.dtype != np.uint8 or array.ndim != 3 or array.shape[0] != channels:
                raise ImageError(
                    f"image {i + 1} is a {array.dtype} array of shape {array.shape}: give uint8 "
                    f"({channels}, height, width) pixels 0-255, or an image file"
                )
            size = (array.shape[2], array.shape[1])
            if array.shape[1:] != (image_size, image_size):
                t = torch.from_numpy(np.ascontiguousarray(array)).float()[None]
                t = torch.nn.functional.interpolate(
                    t, size=(image_size, image_size), mode="bilinear"
                )
                array = t[0].round().clamp(0, 255).to(torch.uint8).numpy()
        pixels.append(torch.from_numpy(np.ascontiguousarray(array)))
        sizes.append(size)
    if not pixels:
        return torch.zeros(0, channels, image_size, image_size, dtype=torch.uint8), []
    return torch.stack(pixels), sizes


def to_corners(boxes: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """(n, 4) relative (cx, cy, w, h) -> (n, 4) (x0, y0, x1, y1) in pixels of a width x height
    image, clipped to it."""
    b = boxes.float()
    x0, x1 = (b[:, 0] - b[:, 2] / 2) * width, (b[:, 0] + b[:, 2] / 2) * width
    y0, y1 = (b[:, 1] - b[:, 3] / 2) * height, (b[:, 1] + b[:, 3] / 2) * height
    return torch.stack(
        [x0.clamp(0, width), y0.clamp(0, height), x1.clamp(0, width), y1.clamp(0, height)], -1
    )


@torch.no_grad()
def detect_images(
    pipeline: Loaded, images, threshold: float, batch_size: int
) -> list[list[DetectedObject]]:
    """The objects of each image whose probability is at least threshold (see Pipeline.detect)."""
    model = pipeline.model
    if not isinstance(model, DetectionTransformer):
        raise PipelineError(
            "this model is not a detector: detect needs a model trained with objective = "
            '"detection" ([model.detection])'
        )
    if not 0.0 <= threshold <= 1.0:
        raise PipelineError(f"threshold={threshold!r} is not valid: give a probability in [0, 1]")
    d = model.config.detection
    labels = pipeline.labels or [str(i) for i in range(model.config.n_classes)]
    if len(labels) != model.config.n_classes:
        raise PipelineError(
            f"labels.json names {len(labels)} classes but the model has {model.config.n_classes}"
        )
    pixels, sizes = read_images(images, d.channels, d.image_size)
    device = next(model.parameters()).device
    out: list[list[DetectedObject]] = []
    for start in range(0, len(pixels), batch_size):
        batch = to_pixels(pixels[start : start + batch_size]).to(device)
        scores, classes, boxes = model.detect(batch)
        for s, c, b, (width, height) in zip(
            scores.cpu(), classes.cpu(), boxes.cpu(), sizes[start : start + batch_size], strict=True
        ):
            keep = (s >= threshold).nonzero().flatten()
            keep = keep[s[keep].argsort(descending=True, stable=True)]
            corners = to_corners(b[keep], width, height)
            out.append(
                [
                    DetectedObject(
                        labels[int(c[q])], float(s[q]), tuple(float(v) for v in corners[j])
                    )
                    for j, q in enumerate(keep.tolist())
                ]
            )
    return out


@torch.no_grad()
def all_predictions(
    pipeline: Loaded, pixels: torch.Tensor, batch_size: int | None = None, pairs: int | None = None
):
    """Every query's (scores (N, Q), class indices (N, Q), relative boxes (N, Q, 4)) for uint8
    (N, channels, size, size) images, for COCO evaluation (which ranks all of them); with pairs = k
    the k most probable (query, class) pairs of each image instead, (N, k) (ranked_pairs)."""
    model = pipeline.model
    if not isinstance(model, DetectionTransformer):
        raise PipelineError(
            "this model is not a detector: evaluate --detection needs a model trained with "
            'objective = "detection"'
        )
    device = next(model.parameters()).device
    batch_size = pipeline.batch_size(batch_size)
    parts = [
        model.detect(to_pixels(pixels[i : i + batch_size]).to(device), pairs)
        for i in range(0, len(pixels), batch_size)
    ]
    if not parts:
        q = model.config.detection.n_queries
        if pairs is not None:
            q = min(pairs, q * model.config.n_classes)
        return torch.zeros(0, q), torch.zeros(0, q, dtype=torch.long), torch.zeros(0, q, 4)
    scores, classes, boxes = zip(*parts, strict=True)
    return (
        torch.cat(scores).float().cpu(),
        torch.cat(classes).cpu(),
        torch.cat(boxes).float().cpu(),
    )
