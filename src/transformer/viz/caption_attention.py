"""Where an image captioner looks while it writes: for each token of the caption, the decoder's
cross-attention (the query that predicted that token) over the patch grid, drawn over the image — a
row of small panels, one per token, after the image itself.

One decoder layer (default the last: its cross-attention feeds the output layer directly), the mean
over its heads (or one head). The weight on [CLS] is not on the grid: each panel's title gives it,
since a decoder can park attention there. Each panel is scaled to its own maximum, so a token that
looks at one patch and a token that looks everywhere both show where they look.

Legend (model/__init__.py): H heads, T caption tokens, P patches, grid patches per side
(P = grid * grid).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ..data.image_tensors import to_pixels
from ..decoding.caption import is_captioner
from ..decoding.inputs import PipelineError
from .attention import checked_index, select_head, token_pieces
from .common import figure_format, save_figure

PANELS_PER_ROW = 8


@dataclass
class CaptionAttention:
    """One caption and one decoder layer's cross-attention over the image while writing it."""

    image: torch.Tensor
    """uint8 (channels, size, size): the image as the model read it."""
    maps: torch.Tensor
    """(T, grid, grid): each caption token's attention over the patches."""
    cls: torch.Tensor
    """(T,): each token's attention on [CLS]."""
    tokens: list[str]
    """The caption's tokens, one per map."""
    text: str
    """The caption."""
    layer: int
    n_layers: int
    head: int | str
    n_heads: int


@torch.no_grad()
def caption_attention(
    pipeline,
    image: torch.Tensor,
    layer: int = -1,
    head: int | str = "mean",
    beam_size: int | None = None,
) -> CaptionAttention:
    """Caption one image (uint8 (channels, size, size) at the model's shape) with the decoding's own
    attention weights; layer counts from 0 (negative: from the last), head is a number or "mean".
    beam_size None: the model's decode.json."""
    model = pipeline.model
    if not is_captioner(model):
        raise PipelineError("this model does not caption images: give it --text or --image")
    cfg, v = model.config, model.config.vision
    n_layers = len(model.decoder.layers)
    layer = checked_index(layer, n_layers, "layer", "decoder")
    if head == "all":
        raise PipelineError(
            "--head all draws a panel per head, and a caption draws one per token: give a head "
            "number or mean"
        )
    if head != "mean":
        head = checked_index(head, cfg.n_heads, "head", "model", ", or 'mean'")
    s = replace(pipeline.decode, n_best=1, beam_size=beam_size or pipeline.decode.beam_size)
    device = next(model.parameters()).device
    ids, attention = pipeline.search(to_pixels(image[None]).to(device), s, return_attention=True)
    ids = ids[0].tolist()
    ids = ids[: next((i for i, t in enumerate(ids) if t == cfg.pad_id), len(ids))]
    weights = attention["cross"][0, layer][:, : len(ids)].float().cpu()  # (H, T, 1 + P)
    chosen = select_head(weights, head)  # (T, 1 + P)
    grid = v.image_size // v.patch_size
    tokenizer = pipeline.target_tokenizer
    return CaptionAttention(
        image=image.cpu(),
        maps=chosen[:, 1:].reshape(-1, grid, grid),
        cls=chosen[:, 0],
        tokens=token_pieces(tokenizer, ids),
        text=tokenizer.decode(ids).strip(),
        layer=layer,
        n_layers=n_layers,
        head=head,
        n_heads=cfg.n_heads,
    )


def plot_caption_attention(m: CaptionAttention, out: str | os.PathLike, title: str = "") -> Path:
    """The image, then one panel per caption token with its attention over the image (upsampled to
    the image, each panel scaled to its maximum), PANELS_PER_ROW to a row. Written atomically in
    out's format (.png, .svg, .pdf)."""
    if not m.tokens:
        raise PipelineError("the model wrote an empty caption: nothing to draw")
    figure_format(out)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c, h, w = m.image.shape
    shown = m.image[0].numpy() if c == 1 else m.image.permute(1, 2, 0).numpy()
    cmap = "gray" if c == 1 else None
    n = 1 + len(m.tokens)
    ncols = min(n, PANELS_PER_ROW)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, squeeze=False, figsize=(1.5 * ncols, 1.75 * nrows + 0.5), dpi=110,
        layout="constrained",
    )  # fmt: skip
    axes[0, 0].imshow(shown, cmap=cmap)
    axes[0, 0].set_title("image", fontsize=8)
    for k, (token, grid, cls) in enumerate(zip(m.tokens, m.maps, m.cls.tolist(), strict=True)):
        ax = axes.flat[1 + k]
        ax.imshow(shown, cmap=cmap)
        up = torch.nn.functional.interpolate(grid[None, None], size=(h, w), mode="nearest")[0, 0]
        ax.imshow(
            (up / up.max().clamp(min=1e-9)).numpy(), cmap="inferno", alpha=0.6, vmin=0, vmax=1
        )
        ax.set_title(f"{token!s}  [CLS] {cls:.0%}", fontsize=7)
    for ax in axes.flat:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, out)
