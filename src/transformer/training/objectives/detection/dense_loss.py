"""A dense one-to-many detection loss: CenterNet's ("Objects as Points", Zhou et al. 2019) heatmap
and box losses, one answer per feature-map cell. Co-DETR (Zong et al. 2023, "DETRs with
Collaborative Hybrid Assignments Training") puts such a head on DETR's encoder during training:
every cell near an object is taught about it, where DETR's one-to-one matching teaches a single
query, so the backbone and encoder learn where the objects are and what they are much sooner
(model.detection.dense_aux). benchmarks/detection_baseline.py trains the same head on its own.

Legend (model/__init__.py): B batch (images), M classes, O objects in the batch (the sum of the
images' n_b); grid: the cells along a side of the feature map, row-major.

Boxes are (cx, cy, w, h) relative to the image, as DETR predicts them (set_loss.py).

Rules:
- Cells: an object belongs to the cell holding its centre, (column, row) = floor((cx, cy) * grid),
  clamped to the map.
- Heatmap targets (M, grid, grid) per image: each object puts on its class's map an elliptical
  Gaussian peaked at exactly 1 on its cell, exp(-dx^2 / 2 sx^2 - dy^2 / 2 sy^2) with dx, dy the
  distance in cells and (sx, sy) = the box's (w, h) in cells / 6, at least 0.1 cell (TTFNet's
  elliptical Gaussian, Liu et al. 2020, sigma = alpha (w, h) / 6, with alpha = 1 here against its
  0.54; CenterNet's radius rule gives almost no spread at a 12 x 12 grid); overlapping Gaussians
  of one class take the maximum.
- Focal loss (CornerNet, Law & Deng 2018, eq. 1, as CenterNet uses it; alpha 2, beta 4), with p the
  sigmoid of a cell's logit and y its target:
      -(1 - p)^2 log(p)              where y = 1 (a positive cell)
      -(1 - y)^4 p^2 log(1 - p)      elsewhere
  summed over all cells and classes. CornerNet divides the sum by the number of objects;
  here that division is the trainer's (below).
- Boxes: at each object's own cell only, DETR's box losses on the box that cell predicts:
  5 x L1 (its 4 coordinates summed) + 2 x (1 - GIoU).
- Sums, not means, as set_loss.py: dense_loss returns the focal sum + the box sums and the
  number of objects O, and the trainer divides a step's summed loss by its objects. Divided by O
  it is CenterNet's loss with DETR's box terms (CenterNet divides the focal sum by its positive
  cells: the same unless two objects of one class share a centre cell).
- Departure from Co-DETR: its auxiliary heads are ATSS and Faster R-CNN on a multi-scale adapter
  of the encoder's output, and their positive boxes also become extra decoder queries; here one
  CenterNet head on the single-scale memory, and no extra queries.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ....evaluation.boxes import cxcywh_to_xyxy, generalized_box_iou

Target = tuple[torch.Tensor, torch.Tensor]
"""An image's targets: labels (n_b,) long in [0, M), boxes (n_b, 4) cxcywh in [0, 1]."""

L1_WEIGHT, GIOU_WEIGHT = 5.0, 2.0
"""DETR's box loss weights, used at the objects' cells."""


def dense_targets(
    boxes: Sequence[torch.Tensor], labels: Sequence[torch.Tensor], n_classes: int, grid: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each image's boxes (n_b, 4) cxcywh and labels (n_b,) -> the heatmap target
    (B, M, grid, grid), and for the O objects: image index (O,), centre cell (O, 2) as
    (column, row), box (O, 4).
    On the boxes' device."""
    box = torch.cat([b.reshape(-1, 4) for b in boxes]).float()  # (O, 4)
    device = box.device
    label = torch.cat([y.reshape(-1) for y in labels]).long().to(device)  # (O,)
    image = torch.cat(
        [torch.full((y.numel(),), i, dtype=torch.long, device=device) for i, y in enumerate(labels)]
    )  # (O,)
    cell = (box[:, :2] * grid).long().clamp(0, grid - 1)  # (O, 2)
    sigma = (box[:, 2:] * grid / 6).clamp(min=0.1)  # (O, 2): (w, h) in cells / 6
    r = torch.arange(grid, dtype=torch.float32, device=device)
    dx = (r[None, :] - cell[:, :1]) / sigma[:, :1]  # (O, grid) over columns
    dy = (r[None, :] - cell[:, 1:]) / sigma[:, 1:]  # (O, grid) over rows
    peaks = torch.exp(
        -0.5 * (dy[:, :, None] ** 2 + dx[:, None, :] ** 2)
    )  # (O, grid, grid), 1 at cell
    slot = (image * n_classes + label)[:, None, None].expand(-1, grid, grid)  # (O, grid, grid)
    heat = torch.zeros(len(labels) * n_classes, grid, grid, device=device)  # (B * M, grid, grid)
    heat = heat.scatter_reduce_(0, slot, peaks, "amax")
    return heat.view(len(labels), n_classes, grid, grid), image, cell, box


def focal_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """CenterNet's focal loss (CornerNet eq. 1) summed over every cell, before CornerNet's division
    by the number of objects: logits and target (B, M, grid, grid) -> ()."""
    p = logits.sigmoid()
    positive = target.eq(1).to(logits.dtype)
    loss_pos = -F.logsigmoid(logits) * (1 - p) ** 2 * positive
    loss_neg = -F.logsigmoid(-logits) * p**2 * (1 - target) ** 4 * (1 - positive)
    return loss_pos.sum() + loss_neg.sum()


def dense_loss(
    heat_logits: torch.Tensor, boxes: torch.Tensor, targets: Sequence[Target]
) -> tuple[torch.Tensor, int]:
    """The dense head's summed loss (see the module's rules) and the number of objects O.

    heat_logits (B, M, grid, grid), boxes (B, grid, grid, 4) cxcywh (each cell's box), targets:
    B (labels (n_b,), boxes (n_b, 4) cxcywh) -> (focal sum + 5 x L1 sum + 2 x (1 - GIoU) sum: (),
    O).
    """
    if len(targets) != heat_logits.shape[0]:
        raise ValueError(
            f"{heat_logits.shape[0]} images of predictions but {len(targets)} targets: give one "
            "(labels, boxes) pair per image, empty tensors for an image without objects"
        )
    n_classes, grid = heat_logits.shape[1], heat_logits.shape[2]
    heat, image, cell, box = dense_targets(
        [b for _, b in targets], [y for y, _ in targets], n_classes, grid
    )
    loss = focal_loss(heat_logits, heat.to(heat_logits))
    if len(box):
        at = boxes[image, cell[:, 1], cell[:, 0]]  # (O, 4): the box each object's cell predicts
        box = box.to(at)
        giou = generalized_box_iou(cxcywh_to_xyxy(at), cxcywh_to_xyxy(box)).diagonal()  # (O,)
        loss = loss + L1_WEIGHT * (at - box).abs().sum() + GIOU_WEIGHT * (1 - giou).sum()
    return loss, len(box)
