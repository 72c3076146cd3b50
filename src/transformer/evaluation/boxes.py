"""Bounding boxes as tensors: format conversions, area, IoU and generalized IoU.

Formats (the last dimension holds the 4 numbers):
    cxcywh  (centre x, centre y, width, height): what DETR predicts, normalised to [0, 1]
    xyxy    (left, top, right, bottom): what the overlaps below take
A box with right < left or bottom < top is invalid; one with zero width or height is degenerate
(a line or a point) and is allowed.

Legend: N, M numbers of boxes in the two sets compared.

Denominators: IoU divides by the union area U and GIoU also by the enclosing box's area C. Both
are clamped below at EPS, which changes nothing unless U (or C) < EPS, i.e. only for
(nearly) zero-area boxes. There the numerator is no larger than the denominator, so a pair of
points or lines gets IoU 0 (and GIoU -(C - U) / C, or 0 when C is zero too) and finite gradients
instead of 0 / 0. Compute in float32 or float64 (EPS underflows in float16).
"""

from __future__ import annotations

import torch

EPS = 1e-7
"""Smallest denominator (area, in the boxes' units squared) of IoU and GIoU."""


def cxcywh_to_xyxy(boxes: torch.Tensor) -> torch.Tensor:
    """(..., 4) centre x, centre y, width, height -> (..., 4) left, top, right, bottom."""
    cx, cy, w, h = boxes.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)


def xyxy_to_cxcywh(boxes: torch.Tensor) -> torch.Tensor:
    """(..., 4) left, top, right, bottom -> (..., 4) centre x, centre y, width, height."""
    x0, y0, x1, y1 = boxes.unbind(-1)
    return torch.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], dim=-1)


def box_area(boxes: torch.Tensor) -> torch.Tensor:
    """(..., 4) xyxy -> (...) width * height."""
    return (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])


def box_iou(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Intersection over union of every pair: a (N, 4) xyxy, b (M, 4) xyxy -> (iou (N, M),
    union (N, M)); the union is returned too because GIoU needs it."""
    area_a, area_b = box_area(a), box_area(b)  # (N,), (M,)
    top_left = torch.maximum(a[:, None, :2], b[None, :, :2])  # (N, M, 2)
    bottom_right = torch.minimum(a[:, None, 2:], b[None, :, 2:])  # (N, M, 2)
    wh = (bottom_right - top_left).clamp(min=0)  # (N, M, 2): 0 where they do not overlap
    inter = wh[..., 0] * wh[..., 1]  # (N, M)
    union = area_a[:, None] + area_b[None, :] - inter  # (N, M)
    return inter / union.clamp(min=EPS), union


def generalized_box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Generalized IoU of every pair (Rezatofighi et al. 2019, Algorithm 1): IoU - (C - U) / C,
    with U the union and C the area of the smallest box enclosing both; in [-1, 1], and < 0 only
    when the boxes are apart. a (N, 4) xyxy, b (M, 4) xyxy -> (N, M)."""
    iou, union = box_iou(a, b)  # (N, M), (N, M)
    top_left = torch.minimum(a[:, None, :2], b[None, :, :2])  # (N, M, 2)
    bottom_right = torch.maximum(a[:, None, 2:], b[None, :, 2:])  # (N, M, 2)
    wh = (bottom_right - top_left).clamp(min=0)  # (N, M, 2)
    enclosing = wh[..., 0] * wh[..., 1]  # (N, M)
    return iou - (enclosing - union) / enclosing.clamp(min=EPS)
