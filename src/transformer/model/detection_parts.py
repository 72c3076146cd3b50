"""The parts of the detector around its Transformer (transformer.model.detection): the backbones
that turn an image into a feature map, the box head, and Co-DETR's dense head on the encoder's
output.

Legend (model/__init__.py): B batch, P feature-map positions (grid * grid, row-major), C d_model;
spelled out: channels, size (image side), stride (pixels per position along a side), n_classes.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .patches import to_patches


class ConvBackbone(nn.Module):
    """DETR's ResNet role at CPU scale: stages of [3x3 convolution with stride 2, GroupNorm, ReLU,
    3x3 convolution, GroupNorm, ReLU], channels doubling each stage, then a 1x1 convolution to
    d_model (DETR's input projection). (B, channels, size, size) -> (B, P, C)."""

    def __init__(self, channels: int, width: int, stages: int, d_model: int):
        super().__init__()
        layers: list[nn.Module] = []
        c_in = channels
        for i in range(stages):
            c_out = width * 2**i
            for stride in (2, 1):
                layers += [
                    nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False),
                    nn.GroupNorm(min(8, c_out), c_out),
                    nn.ReLU(inplace=True),
                ]
                c_in = c_out
        self.stages = nn.Sequential(*layers)
        self.projection = nn.Conv2d(c_in, d_model, 1)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.projection(self.stages(pixels))  # (B, C, grid, grid)
        return x.flatten(2).transpose(1, 2)  # (B, P, C), row-major


class PatchBackbone(nn.Module):
    """No convolution: ViT's linear projection of each stride x stride patch (model.patches).
    (B, channels, size, size) -> (B, P, C)."""

    def __init__(self, channels: int, stride: int, d_model: int):
        super().__init__()
        self.stride = stride
        self.projection = nn.Linear(channels * stride * stride, d_model)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.projection(to_patches(pixels, self.stride))


class BoxHead(nn.Module):
    """DETR's box head: a 3-layer perceptron (ReLU between) to (cx, cy, w, h), then a sigmoid."""

    def __init__(self, d_model: int):
        super().__init__()
        self.layers = nn.ModuleList(
            [nn.Linear(d_model, d_model), nn.Linear(d_model, d_model), nn.Linear(d_model, 4)]
        )

    def forward(self, hidden: torch.Tensor, anchors: torch.Tensor | None = None) -> torch.Tensor:
        """(..., C) -> (..., 4) in [0, 1]; with anchors (Q, 4) (reference boxes in logits, before
        the sigmoid) the head's output is an offset from each query's anchor."""
        for i, layer in enumerate(self.layers):
            hidden = layer(hidden) if i == len(self.layers) - 1 else torch.relu(layer(hidden))
        if anchors is not None:
            hidden = hidden + anchors.to(hidden.dtype)
        return hidden.sigmoid()


class DenseHead(nn.Module):
    """Co-DETR's auxiliary one-to-many head (Zong et al. 2023), CenterNet's at CPU scale: on the
    encoder's memory seen as a feature map, two [3x3 convolution, GroupNorm, ReLU], then 1x1
    convolutions to n_classes heatmap logits (bias -log(9): p = 0.1 at start, as CenterNet) and to
    4 numbers per cell, through a sigmoid: the centre's offset within the cell and the box's (w, h)
    relative to the image. Training only (training.objectives.detection.dense_loss); inference
    does not use it.
    memory (B, P, C) -> heatmap logits (B, n_classes, grid, grid) and boxes (B, grid, grid, 4) as
    (cx, cy, w, h) in [0, 1], one per cell."""

    def __init__(self, d_model: int, n_classes: int):
        super().__init__()
        layers: list[nn.Module] = []
        for _ in range(2):
            layers += [
                nn.Conv2d(d_model, d_model, 3, padding=1, bias=False),
                nn.GroupNorm(math.gcd(8, d_model), d_model),
                nn.ReLU(inplace=True),
            ]
        self.trunk = nn.Sequential(*layers)
        self.heatmap = nn.Conv2d(d_model, n_classes, 1)
        self.box = nn.Conv2d(d_model, 4, 1)
        nn.init.constant_(self.heatmap.bias, -math.log((1 - 0.1) / 0.1))

    def forward(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, p, c = memory.shape
        grid = math.isqrt(p)
        if grid * grid != p:
            raise ValueError(f"the memory has {p} positions, not a square feature map")
        x = self.trunk(memory.transpose(1, 2).reshape(b, c, grid, grid))  # (B, C, grid, grid)
        raw = self.box(x).sigmoid()  # (B, 4, grid, grid): offset x, offset y, w, h
        cells = torch.arange(grid, dtype=raw.dtype, device=raw.device)
        cx = (cells[None, None, :] + raw[:, 0]) / grid  # (B, grid, grid): column + offset
        cy = (cells[None, :, None] + raw[:, 1]) / grid  # (B, grid, grid): row + offset
        boxes = torch.stack([cx, cy, raw[:, 2], raw[:, 3]], -1)  # (B, grid, grid, 4)
        return self.heatmap(x), boxes
