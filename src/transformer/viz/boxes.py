"""A detector's objects drawn on their image: each box outlined in its class's colour, with a tab
"label 0.93" above it (what `transformer detect --out` writes).

The rules:
- The picture is the image in RGB, scaled up by a whole factor (nearest neighbour: pixels stay
  sharp) until its long side is at least MIN_SIDE pixels, so that a 32 x 32 image and its labels can
  be read; an image already that large keeps its size. Boxes are scaled with it.
- A class keeps its colour from PALETTE: the colour of its index in `labels` (the model's class
  names) when they are given, else one picked from its name (the same name, the same colour, in
  every picture).
- A tab sits on the box's top edge, outside it; when that would leave the image (a box at the top),
  inside it. It never runs past the right edge.
- The objects are drawn from the last to the first, so that the first (Pipeline.detect's most
  likely) is on top where boxes overlap.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np

MIN_SIDE = 384
"""The long side of the picture at least, in pixels (small images are scaled up to it)."""

PALETTE = (
    (230, 25, 75),
    (60, 180, 75),
    (0, 130, 200),
    (245, 130, 48),
    (145, 30, 180),
    (70, 240, 240),
    (240, 50, 230),
    (210, 245, 60),
    (0, 128, 128),
    (170, 110, 40),
    (128, 0, 0),
    (0, 0, 128),
    (128, 128, 0),
    (255, 225, 25),
    (250, 190, 212),
    (170, 255, 195),
)
"""Distinct colours, one per class (Sasha Trubetskoy's list of 20, the pale and grey ones left
out): class i gets PALETTE[i % 16]."""


def class_colour(label: str, labels: list[str] | None = None) -> tuple[int, int, int]:
    """The (r, g, b) of a class: its index in labels, or (not there) a hash of its name."""
    if labels is not None and label in labels:
        return PALETTE[labels.index(label) % len(PALETTE)]
    return PALETTE[zlib.crc32(label.encode("utf-8")) % len(PALETTE)]


def as_rgb(image):
    """A PIL image, or uint8 pixels (C, H, W) with C = 1 or 3 (numpy or torch), as an RGB PIL
    image."""
    from PIL import Image

    if isinstance(image, Image.Image):
        return image.convert("RGB")
    array = np.asarray(image.cpu() if hasattr(image, "cpu") else image)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[0] not in (1, 3):
        raise ValueError(
            f"an image of dtype {array.dtype} and shape {array.shape}: give a PIL image or uint8 "
            "(C, H, W) pixels with C = 1 or 3"
        )
    if array.shape[0] == 1:
        return Image.fromarray(np.ascontiguousarray(array[0]), "L").convert("RGB")
    return Image.fromarray(np.ascontiguousarray(array.transpose(1, 2, 0)), "RGB")


def draw_boxes(
    image, objects, out: str | os.PathLike | None = None, labels: list[str] | None = None
):
    """The image (PIL, or uint8 (C, H, W)) with each object's box and "label score" tab drawn;
    objects: decoding.detect.DetectedObject (box x0, y0, x1, y1 in the image's pixels). With out,
    also written there as PNG (atomically). Returns the PIL image drawn."""
    from PIL import Image, ImageDraw

    if out is not None and Path(out).suffix.lower() != ".png":
        raise ValueError(f"{out}: the boxes are drawn as PNG; give a .png file name")
    picture = as_rgb(image)
    width, height = picture.size
    scale = max(1, -(-MIN_SIDE // max(width, height)))  # a whole factor: ceil(MIN_SIDE / long side)
    if scale > 1:
        picture = picture.resize((width * scale, height * scale), Image.Resampling.NEAREST)
    long_side = max(picture.size)
    line = max(2, round(long_side / 192))
    font = default_font(max(12, long_side // 36))
    draw = ImageDraw.Draw(picture)
    for o in reversed(objects):  # the first (the most likely) drawn last, on top
        colour = class_colour(o.label, labels)
        x0, y0, x1, y1 = (v * scale for v in o.box)
        draw.rectangle((x0, y0, max(x0, x1 - 1), max(y0, y1 - 1)), outline=colour, width=line)
        _tab(draw, f"{o.label} {o.score:.2f}", x0, y0, colour, font, picture.size, line)
    if out is not None:
        from ..files import atomic_write

        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, lambda tmp: picture.save(tmp, format="PNG"))
    return picture


def _tab(draw, text: str, x0: float, y0: float, colour, font, size, line: int) -> None:
    """A filled tab with the text, on the box's top edge: above it, or inside when the top of the
    image is in the way; moved left when the right edge is."""
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    pad = max(2, line)
    w, h = right - left + 2 * pad, bottom - top + 2 * pad
    x = min(max(0.0, x0), max(0.0, size[0] - w))
    y = y0 - h if y0 - h >= 0 else max(0.0, y0)
    draw.rectangle((x, y, x + w - 1, y + h - 1), fill=colour)
    ink = (
        (0, 0, 0)
        if sum(c * k for c, k in zip(colour, (299, 587, 114), strict=True)) > 140_000
        else (255, 255, 255)
    )
    draw.text((x + pad - left, y + pad - top), text, fill=ink, font=font)


def default_font(size: int):
    """Pillow's own font (nothing downloaded) at this size; Pillow before 10.1 has one size only."""
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:
        return ImageFont.load_default()
