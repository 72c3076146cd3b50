"""Denoising queries for DETR training (DN-DETR, Li et al. 2022; DINO, Zhang et al. 2023): beside
the Q matching queries, G groups of queries each start from a noised copy of every object of the
image (its box shifted and scaled, its label sometimes changed) and learn to give back the object
itself. No matching is needed for them: query k of a group answers for object k. The task is
easier than finding objects, so the decoder learns to refine boxes and read classes from the first
steps, where the Hungarian matching of the others still changes from step to step.

Legend (model/__init__.py): B batch, Q matching queries, G groups, N the most objects of an image
in the batch (a group's size: an image with fewer has padding queries), D = G * N denoising
queries, T = Q + D all queries, M object classes.

Rules (model.detection.denoise_groups > 0; training only: inference has no targets to noise):
- Noise (DN-DETR's): each box's centre moves by up to box_noise / 2 of its width (x) and height
  (y), uniformly; its width and height are scaled by a factor in [1 - box_noise, 1 + box_noise];
  the box is clamped to the image. Each label is replaced, with probability label_noise, by a class
  drawn uniformly.
- A denoising query starts from its label's learned embedding (the decoder's content) with the
  noised box as its reference box: its position is the sinusoid of the box's centre and its box
  is predicted relative to the noised box, in logits (as anchor queries; model.detection).
- Attention among the queries (denoise_mask, True = may attend): the matching queries see only
  each other, so their outputs are those of a model without denoising queries; a denoising query
  sees the matching queries and the real queries of its own group (and itself), never another
  group, which holds the same objects' answers; padding queries are seen by no one but
  themselves.
- Queries are ordered matching first, then group 0's N, group 1's N, and so on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class DenoiseQueries:
    """A batch's denoising queries (module doc), G groups of N each: D = G * N per image."""

    labels: torch.Tensor
    """(B, D) long: the noised labels the queries start from."""
    boxes: torch.Tensor
    """(B, D, 4) float: the noised boxes (cx, cy, w, h) in [0, 1], the queries' reference boxes."""
    target_labels: torch.Tensor
    """(B, D) long: the labels to give back (padding: 0)."""
    target_boxes: torch.Tensor
    """(B, D, 4) float: the boxes to give back (padding: a placeholder box)."""
    real: torch.Tensor
    """(B, D) bool: True for a query of an object, False for padding."""
    groups: int
    """G."""

    @property
    def group_size(self) -> int:
        """N: the most objects of an image in the batch."""
        return self.labels.shape[1] // self.groups

    def to(self, device) -> DenoiseQueries:
        moved = [
            t.to(device)
            for t in (self.labels, self.boxes, self.target_labels, self.target_boxes, self.real)
        ]
        return DenoiseQueries(*moved, self.groups)


def denoise_queries(
    targets: Sequence[tuple[torch.Tensor, torch.Tensor]],
    groups: int,
    n_classes: int,
    box_noise: float,
    label_noise: float,
    generator: torch.Generator,
) -> DenoiseQueries | None:
    """The denoising queries of a batch: targets are B (labels (n_b,), boxes (n_b, 4) cxcywh in
    [0, 1]); the noise is drawn from `generator` (CPU). None when no image has an object."""
    per = max((len(labels) for labels, _ in targets), default=0)
    if per == 0 or groups == 0:
        return None
    batch = len(targets)
    labels = torch.zeros(batch, per, dtype=torch.long)
    boxes = torch.full((batch, per, 4), 0.5)
    real = torch.zeros(batch, per, dtype=torch.bool)
    for b, (y, box) in enumerate(targets):
        labels[b, : len(y)] = y.reshape(-1).long().cpu()
        boxes[b, : len(y)] = box.reshape(-1, 4).float().cpu()
        real[b, : len(y)] = True
    # group-major: group 0's N queries, then group 1's, ...
    labels, boxes, real = (
        labels.repeat(1, groups),
        boxes.repeat(1, groups, 1),
        real.repeat(1, groups),
    )
    flip = torch.rand(labels.shape, generator=generator) < label_noise
    drawn = torch.randint(0, n_classes, labels.shape, generator=generator)
    noised_labels = torch.where(flip, drawn, labels)
    u = torch.rand(boxes.shape, generator=generator) * 2 - 1  # (B, D, 4) in [-1, 1)
    w, h = boxes[..., 2], boxes[..., 3]
    noised = torch.stack(
        [
            boxes[..., 0] + u[..., 0] * box_noise * w / 2,
            boxes[..., 1] + u[..., 1] * box_noise * h / 2,
            w * (1 + u[..., 2] * box_noise),
            h * (1 + u[..., 3] * box_noise),
        ],
        -1,
    ).clamp(0.0, 1.0)
    return DenoiseQueries(noised_labels, noised, labels, boxes, real, groups)


def denoise_mask(n_match: int, denoise: DenoiseQueries) -> torch.Tensor:
    """The queries' self-attention mask (B, 1, T, T), True = may attend (module rules), on the
    device of denoise's tensors."""
    real = denoise.real  # (B, D)
    device, per = real.device, denoise.group_size
    total = n_match + real.shape[1]
    index = torch.arange(total, device=device)
    group = torch.where(index < n_match, -1, (index - n_match).div(per, rounding_mode="floor"))
    same = group[:, None] == group[None, :]  # (T, T): matching with matching, a group with itself
    sees_matching = (group[:, None] >= 0) & (index[None, :] < n_match)  # (T, T)
    visible = torch.cat([real.new_ones(real.shape[0], n_match), real], 1)  # (B, T) keys seen
    mask = (same | sees_matching)[None] & visible[:, None, :]  # (B, T, T)
    mask = mask | torch.eye(total, dtype=torch.bool, device=device)[None]
    return mask[:, None]
