"""Sample grids: images in rows, each row optionally named at its left (what `transformer generate
--image --out` and the guides show).

The rules: images are uint8 (N, channels, H, W), grey or RGB; each is scaled up by a whole factor
(nearest neighbour: the pixels stay sharp) to at least MIN_CELL pixels a side, with a GAP-pixel
white margin between cells. Row names, when given, sit in a white column at the left, one per row.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

MIN_CELL = 56
"""The side of a cell at least, in pixels."""
GAP = 2


def image_grid(
    images: torch.Tensor,
    per_row: int,
    row_names: list[str] | None = None,
    out: str | os.PathLike | None = None,
):
    """A PIL image of the images in rows of per_row (row_names: one name per row, or None); written
    as PNG to `out` (atomically) when given."""
    from PIL import Image, ImageDraw

    from .boxes import default_font

    n, channels, h, w = images.shape
    if per_row < 1:
        raise ValueError(f"per_row={per_row}: a row holds at least one image")
    rows = (n + per_row - 1) // per_row
    if row_names is not None and len(row_names) != rows:
        raise ValueError(f"{len(row_names)} row names for {rows} rows")
    scale = max(1, -(-MIN_CELL // max(h, w)))  # ceil
    cell_h, cell_w = h * scale + GAP, w * scale + GAP
    font = default_font(14)
    left = 0
    if row_names:
        probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
        left = max(probe.textbbox((0, 0), name, font=font)[2] for name in row_names) + 8
    picture = Image.new("RGB", (left + per_row * cell_w + GAP, rows * cell_h + GAP), "white")
    array = images.numpy() if isinstance(images, torch.Tensor) else np.asarray(images)
    for i in range(n):
        pixels = array[i].transpose(1, 2, 0)  # (H, W, channels)
        pixels = np.repeat(pixels, 3, axis=2) if channels == 1 else pixels
        tile = Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8), "RGB")
        tile = tile.resize((w * scale, h * scale), Image.Resampling.NEAREST)
        r, c = divmod(i, per_row)
        picture.paste(tile, (left + GAP + c * cell_w, GAP + r * cell_h))
    if row_names:
        draw = ImageDraw.Draw(picture)
        for r, name in enumerate(row_names):
            top = draw.textbbox((0, 0), name, font=font)[3]
            draw.text((4, GAP + r * cell_h + (cell_h - top) / 2), name, fill="black", font=font)
    if out is not None:
        from ..files import atomic_write

        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, lambda tmp: picture.save(tmp, format="PNG"))
    return picture
