"""Where a detector's object queries look: each detected object's query, its cross-attention over
the feature map in one decoder layer (the mean of the heads), drawn over the image with the
object's box: the DETR paper's Figure 6 (Carion et al. 2020), where the decoder attends to an
object's extremities, its legs and head.

The rules:
- The objects are the queries whose most likely object class reaches the threshold, as
  Pipeline.detect keeps them (model.detection.DetectionTransformer.detect), most likely first.
- A query's map is its row of the chosen layer's cross-attention weights (B, H, Q, P) averaged over
  the H heads: P = grid * grid positions, row-major, reshaped to (grid, grid). Each map sums to 1.
- The picture upsamples each map bilinearly to the image and scales it to its own maximum (the
  heatmap shows where, not how much), over the image in grey.

Legend (model/__init__.py): H heads, Q object queries, P feature-map positions (grid * grid).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..decoding.detect import to_corners
from ..model.detection import DetectionTransformer, class_probabilities
from .boxes import class_colour
from .common import figure_format, save_figure

MAX_PANELS = 8
"""Objects drawn at most, the most likely first (beside the panel of the whole image)."""


@dataclass
class QueryAttention:
    """One detected object and where its query looked."""

    query: int
    """The object query's index (0 to Q - 1)."""
    label: str
    score: float
    """The probability of its most likely object class."""
    box: tuple[float, float, float, float]
    """(cx, cy, w, h) relative to the image side."""
    attention: torch.Tensor
    """(grid, grid): its cross-attention over the feature map, the mean of the heads."""


@dataclass
class DetectionAttention:
    objects: list[QueryAttention]
    """The queries at or above the threshold, most likely first."""
    layer: int
    n_layers: int
    n_heads: int
    threshold: float
    best: float
    """The highest score of any query (what the threshold would have to be for one object)."""


@torch.no_grad()
def detection_attention(
    model: DetectionTransformer,
    pixels: torch.Tensor,
    labels: list[str] | None = None,
    threshold: float = 0.5,
    layer: int = -1,
) -> DetectionAttention:
    """pixels (1, channels, size, size) in [-1, 1] -> the objects and their queries' maps in one
    decoder layer (negative: from the last)."""
    if not isinstance(model, DetectionTransformer):
        raise ValueError(
            "this model is not a detector: detection attention needs a model trained with "
            'objective = "detection"'
        )
    if pixels.dim() != 4 or pixels.shape[0] != 1:
        raise ValueError(f"pixels of shape {tuple(pixels.shape)}: give one image, (1, C, H, W)")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold {threshold!r}: give a probability in [0, 1]")
    n_layers = len(model.decoder_layers)
    index = layer + n_layers if layer < 0 else layer
    if not 0 <= index < n_layers:
        raise ValueError(
            f"--layer {layer}: the decoder has layers 0-{n_layers - 1} (or -1 for the last)"
        )
    names = labels or [str(i) for i in range(model.config.n_classes)]
    if len(names) != model.config.n_classes:
        raise ValueError(
            f"{len(names)} labels for a model with {model.config.n_classes} classes: give one "
            "name per class"
        )
    model.eval()
    logits, boxes, weights = model.attention(pixels)
    scores, classes = class_probabilities(logits[0], model.config.detection.class_loss).max(-1)
    grid = model.config.detection.grid
    maps = weights[index][0].float().mean(0).cpu().reshape(-1, grid, grid)  # (Q, grid, grid)
    keep = (scores >= threshold).nonzero().flatten().cpu()
    keep = keep[scores.cpu()[keep].argsort(descending=True, stable=True)]
    objects = [
        QueryAttention(
            q,
            names[int(classes[q])],
            float(scores[q]),
            tuple(float(v) for v in boxes[0, q].float().cpu()),
            maps[q],
        )
        for q in keep.tolist()
    ]
    n_heads = weights[index].shape[1]
    return DetectionAttention(
        objects, index, n_layers, n_heads, threshold, float(scores.max()) if len(scores) else 0.0
    )


def plot_detection_attention(
    result: DetectionAttention,
    image: torch.Tensor,
    out: str | os.PathLike,
    title: str | None = None,
    labels: list[str] | None = None,
) -> Path:
    """Draw the image with every object's box, then one panel per object (at most MAX_PANELS, the
    most likely first): its query's map over the image in grey, its box, "label score" above.
    image: uint8 (channels, size, size), the pixels the model read. labels (the model's class
    names) keep each class's colour as draw_boxes gives it. The format follows out's suffix; the
    file is written atomically."""
    figure_format(out)  # before the work
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    c, h, w = image.shape
    pixels = image.float()
    grey = (
        pixels[0]
        if c == 1
        else (pixels * torch.tensor([0.299, 0.587, 0.114])[:, None, None]).sum(0)
    )
    shown = grey.numpy() if c == 1 else image.permute(1, 2, 0).numpy()
    objects = result.objects[:MAX_PANELS]
    ncols = min(len(objects) + 1, 5)
    nrows = -(-(len(objects) + 1) // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        squeeze=False,
        figsize=(2.4 * ncols, 2.5 * nrows + 0.5),
        dpi=110,
        layout="constrained",
    )
    axes = list(axes.flat)

    def box(ax, o: QueryAttention) -> None:
        x0, y0, x1, y1 = to_corners(torch.tensor([o.box]), w, h)[0].tolist()
        colour = tuple(v / 255 for v in class_colour(o.label, labels))
        ax.add_patch(
            Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, lw=1.6, ec=colour)
        )

    first = axes[0]
    first.imshow(shown, cmap="gray" if c == 1 else None, vmin=0, vmax=255)
    for o in result.objects:
        box(first, o)
    if objects:
        first.set_title(f"{len(result.objects)} object(s) ≥ {result.threshold:g}", fontsize=8)
    else:
        first.set_title(
            f"no object scored ≥ {result.threshold:g} (best {result.best:.2f})", fontsize=8
        )
    for ax, o in zip(axes[1:], objects, strict=False):
        up = torch.nn.functional.interpolate(
            o.attention[None, None], size=(h, w), mode="bilinear", align_corners=False
        )[0, 0]
        ax.imshow(grey.numpy(), cmap="gray", vmin=0, vmax=255)
        ax.imshow(
            (up / up.max().clamp(min=1e-9)).numpy(), cmap="inferno", alpha=0.6, vmin=0, vmax=1
        )
        box(ax, o)
        ax.set_title(f"{o.label} {o.score:.2f}", fontsize=8)
    for ax in axes:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, out)
