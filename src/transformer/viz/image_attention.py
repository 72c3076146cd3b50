"""Where an image encoder (ViT) looks: the [CLS] token's attention over the patches, per head of one
layer, and the attention rollout across all layers (Abnar & Zuidema 2020), drawn over the image.

Rollout: each layer's attention averaged over heads, A, is mixed with the identity for the residual
connection, 0.5 A + 0.5 I, its rows renormalised, and the layers multiplied from the first to the
last; the [CLS] row of the product, over the patches, is how much each patch flowed into [CLS].

Legend (model/__init__.py): H heads, L = 1 + P positions ([CLS] and the P patches), grid patches
per side (P = grid * grid).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..model.transformer import EncoderOnly
from .common import figure_format, save_figure


def rollout(weights: list[torch.Tensor]) -> torch.Tensor:
    """Attention rollout: weights, one (H, L, L) per layer (first layer first) -> (L, L)."""
    result = None
    for w in weights:
        a = w.float().mean(dim=0)  # (L, L), rows sum to 1
        a = 0.5 * a + 0.5 * torch.eye(a.size(0))
        a = a / a.sum(dim=-1, keepdim=True)
        result = a if result is None else a @ result
    return result


@dataclass
class ImageAttention:
    heads: torch.Tensor
    """(H, grid, grid): [CLS]'s attention over the patches in the chosen layer, per head."""
    rollout: torch.Tensor
    """(grid, grid): the [CLS] row of the rollout over all layers, over the patches."""
    layer: int
    n_layers: int
    probabilities: list[tuple[str, float]]
    """The model's top labels for the image."""


@torch.no_grad()
def image_attention(
    model: EncoderOnly, pixels: torch.Tensor, layer: int = -1, labels: list[str] | None = None
) -> ImageAttention:
    """pixels (1, channels, size, size) in [-1, 1] -> the maps above, for one layer (negative: from
    the last)."""
    v = model.config.vision
    if v is None:
        raise ValueError("this model reads text, not images: give --text instead of --image")
    n_layers = model.config.n_encoder_layers
    index = layer + n_layers if layer < 0 else layer
    if not 0 <= index < n_layers:
        raise ValueError(
            f"--layer {layer}: the encoder has layers 0-{n_layers - 1} (or -1 for the last)"
        )
    model.eval()
    hidden, weights = model(pixels, need_weights=True)
    weights = [w[0].float().cpu() for w in weights]  # (H, L, L) per layer
    g = v.image_size // v.patch_size
    heads = weights[index][:, 0, 1:].reshape(-1, g, g)
    rolled = rollout(weights)[0, 1:].reshape(g, g)
    probabilities = []
    if model.pooler is not None and model.pooler.classifier is not None:
        probs = model.pooler(hidden).float().softmax(-1)[0]
        names = labels or [str(i) for i in range(len(probs))]
        top = probs.topk(min(3, len(probs)))
        probabilities = [
            (names[i], float(p))
            for p, i in zip(top.values.tolist(), top.indices.tolist(), strict=True)
        ]
    return ImageAttention(heads, rolled, index, n_layers, probabilities)


def plot_image_attention(
    image: torch.Tensor, maps: ImageAttention, out: str | os.PathLike, title: str | None = None
) -> Path:
    """Draw the image, then each head's [CLS] map and the rollout over it (upsampled to the image).
    image: uint8 (channels, size, size). The format follows out's suffix; the file is written
    atomically."""
    figure_format(out)  # before the work
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c, h, w = image.shape
    shown = image[0].numpy() if c == 1 else image.permute(1, 2, 0).numpy()
    cmap = "gray" if c == 1 else None
    panels = (
        [("image", None)]
        + [(f"head {i}", m) for i, m in enumerate(maps.heads)]
        + [("rollout", maps.rollout)]
    )
    ncols = min(len(panels), 5)
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        squeeze=False,
        figsize=(2.1 * ncols, 2.3 * nrows + 0.5),
        dpi=110,
        layout="constrained",
    )
    for ax, (name, m) in zip(axes.flat, panels, strict=False):
        ax.imshow(shown, cmap=cmap)
        if m is not None:
            up = torch.nn.functional.interpolate(m[None, None], size=(h, w), mode="nearest")[0, 0]
            ax.imshow(
                (up / up.max().clamp(min=1e-9)).numpy(), cmap="inferno", alpha=0.55, vmin=0, vmax=1
            )
        ax.set_title(name, fontsize=8)
        ax.axis("off")
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, out)
