"""Images to sequences (the Vision Transformer, Dosovitskiy et al. 2021): non-overlapping P x P
patches, each flattened and projected to d_model by one linear layer, a learned [CLS] vector in
front, position information added, dropout.

Legend (model/__init__.py): B batch, P patches per image, C d_model; spelled out: channels,
size (an image's height = width), patch (patch_size, a patch's side), grid = size / patch
patches per side (P = grid * grid).

The projection is a linear layer on the flattened patch (channel, row, column order), which is
exactly a stride-patch convolution with a patch x patch kernel (ViT's and Hugging Face's
`Conv2d`): the convolution's weight (C, channels, patch, patch) reshaped to
(C, channels * patch * patch) is this layer's weight.
Positions: "learned" (ViT's: one vector per position, [CLS] included), "sinusoidal2d" (fixed:
half the dimensions encode the patch's row, half its column, each with §3.5's sinusoids; [CLS]
gets zeros) or "none".
"""

from __future__ import annotations

import torch
from torch import nn

from .layers import dropped
from .positional import sinusoidal_table


def sinusoidal_2d(grid: int, d_model: int) -> torch.Tensor:
    """(1 + P, C): zeros for [CLS], then for the patch at (row, column) in row-major order
    the 1-D sinusoids of the row in the first C/2 dimensions and of the column in the last C/2."""
    if d_model % 4:
        raise ValueError(
            f"d_model={d_model} must be divisible by 4 for 2-D sinusoidal positions (sin/cos of "
            "row and column)"
        )
    half = sinusoidal_table(grid, d_model // 2)  # (grid, C/2)
    rows = half.repeat_interleave(
        grid, dim=0
    )  # (P, C/2): row r for patches r*grid .. r*grid + grid - 1
    cols = half.repeat(grid, 1)  # (P, C/2)
    return torch.cat([torch.zeros(1, d_model), torch.cat([rows, cols], dim=1)])


def to_patches(pixels: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, channels, size, size) -> (B, P, channels * patch * patch): the non-overlapping patches in
    row-major order, each flattened channel, row, column (size a multiple of patch)."""
    b, c, h, w = pixels.shape
    g = h // patch
    x = pixels.reshape(b, c, g, patch, g, patch).permute(
        0, 2, 4, 1, 3, 5
    )  # (B, grid, grid, channels, patch, patch)
    return x.reshape(b, g * g, c * patch * patch)


def check_pixels(pixels: torch.Tensor, channels: int, image_size: int) -> tuple[int, int, int, int]:
    """A clear error naming the expected and the given shape instead of a reshape error."""
    expected = f"(B, {channels}, {image_size}, {image_size})"
    if not isinstance(pixels, torch.Tensor) or pixels.dim() != 4:
        shape = tuple(pixels.shape) if isinstance(pixels, torch.Tensor) else type(pixels).__name__
        raise ValueError(f"images must be a {expected} tensor of pixels, got {shape}")
    b, c, h, w = pixels.shape
    if c != channels or h != image_size or w != image_size:
        raise ValueError(
            f"images of shape {tuple(pixels.shape)} do not fit this model: it takes {expected} "
            f"(channels={channels}, image_size={image_size}); resize or convert them"
        )
    if not pixels.is_floating_point():
        raise ValueError(f"pixels are {pixels.dtype}: pass floats (e.g. uint8 / 255)")
    return b, c, h, w


class PatchEmbedding(nn.Module):
    """(B, channels, size, size) pixels -> (B, 1 + P, C): [CLS] and the projected patches, plus
    positions, then dropout."""

    def __init__(
        self,
        image_size: int,
        patch_size: int,
        channels: int,
        d_model: int,
        positions: str,
        dropout: float,
    ):
        super().__init__()
        if image_size % patch_size:
            raise ValueError(
                f"image_size={image_size} is not divisible by patch_size={patch_size}: "
                "the patches must tile the image"
            )
        self.image_size, self.patch_size, self.channels = image_size, patch_size, channels
        self.grid = image_size // patch_size
        self.projection = nn.Linear(channels * patch_size * patch_size, d_model)
        self.cls = nn.Parameter(torch.randn(1, 1, d_model) * 0.02)
        n = 1 + self.grid * self.grid
        self.kind = positions
        if positions == "learned":
            self.positions = nn.Parameter(torch.randn(1, n, d_model) * 0.02)
        elif positions == "sinusoidal2d":
            self.register_buffer(
                "positions", sinusoidal_2d(self.grid, d_model).unsqueeze(0), persistent=False
            )
        else:
            self.positions = None
        self.dropout = nn.Dropout(dropout)

    @property
    def n_patches(self) -> int:
        return self.grid * self.grid

    def patches(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, channels, size, size) -> (B, P, channels * patch * patch): row-major patches, each
        flattened channel, row, column."""
        self.check(pixels)
        return to_patches(pixels, self.patch_size)

    def check(self, pixels: torch.Tensor) -> tuple[int, int, int, int]:
        """A clear error naming the expected and the given shape instead of a reshape error."""
        return check_pixels(pixels, self.channels, self.image_size)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.projection(self.patches(pixels).to(self.projection.weight.dtype))  # (B, P, C)
        x = torch.cat([self.cls.expand(x.size(0), -1, -1).to(x.dtype), x], dim=1)  # (B, 1 + P, C)
        if self.positions is not None:
            x = x + self.positions.to(x.dtype)
        return dropped(self.dropout, x)
