"""A speech model's cross-attention over the audio: the log-mel spectrogram on top and, below it on
the same time axis, which encoder positions (20 ms each, 40 ms with model.audio.stride = 4: the
strided convolutions divide the 10 ms frames) each output token attended to while it was predicted
(one layer, mean or one head).

`audio_attention(pipeline, samples)` transcribes the first window of the audio (30 s for Whisper)
with the decoding's own attention weights; `plot_audio_attention` draws them. Only the clip's real
part is drawn: the silence a Whisper model pads its window with is cut off.

Legend (model/__init__.py): H heads, T output tokens (rows), F audio frames, L encoder positions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ..data.audio import HOP, SAMPLE_RATE, log_mel
from ..decoding.inputs import PipelineError
from ..decoding.transcribe import speech_options
from .attention import checked_index, select_head, token_pieces
from .common import figure_format, save_figure


@dataclass
class AudioAttention:
    """The spectrogram and one layer's cross-attention of one transcription."""

    features: torch.Tensor
    """(n_mels, F) log-mel frames of the clip's real part."""
    weights: torch.Tensor
    """(T, L) for one head or the mean, (H, T, L) for all; L = ceil(F / stride)."""
    tokens: list[str]
    """The output token of each row."""
    text: str
    """The transcript."""
    layer: int
    n_layers: int
    head: int | str
    n_heads: int

    @property
    def seconds(self) -> float:
        return self.features.shape[1] * HOP / SAMPLE_RATE


def audio_attention(
    pipeline,
    samples: torch.Tensor,
    layer: int = -1,
    head: int | str = "mean",
    beam_size: int | None = 1,
) -> AudioAttention:
    """Transcribe the first window of `samples` (16 kHz) and return its spectrogram and one
    layer's cross-attention (see the module docstring)."""
    model, cfg = pipeline.model, pipeline.model.config
    a = cfg.audio
    if a is None:
        raise PipelineError("this model reads text, not audio: give --text")
    window = a.max_frames * HOP
    clip = samples[:window]
    if len(clip) < 2 * HOP:
        raise PipelineError("the audio is shorter than 20 ms: nothing to transcribe")
    real = log_mel(clip, a.n_mels, pad_to=None)  # (n_mels, F)
    features = log_mel(clip, a.n_mels, pad_to=window) if a.pad_to_max else real
    layer = checked_index(layer, len(model.decoder.layers), "layer", "decoder")
    if head not in ("mean", "all"):
        head = checked_index(head, cfg.n_heads, "head", "model", ", or 'mean' or 'all'")
    s = replace(pipeline.decode, n_best=1, beam_size=beam_size or pipeline.decode.beam_size)
    device = next(model.parameters()).device
    out, att = pipeline.search(
        features[None].to(device), s, return_attention=True, **speech_options(pipeline)
    )
    ids = out[0].tolist()
    positions = cfg.audio.positions_of(real.shape[1])
    weights = att["cross"][0, layer][:, : len(ids), :positions]  # (H, T, L)
    tok = pipeline.target_tokenizer
    return AudioAttention(
        features=real.cpu(),
        weights=select_head(weights.float().cpu(), head),
        tokens=token_pieces(tok, ids),
        text=tok.decode(ids).strip(),
        layer=layer,
        n_layers=len(model.decoder.layers),
        head=head,
        n_heads=cfg.n_heads,
    )


def plot_audio_attention(m: AudioAttention, out: str | os.PathLike, title: str = "") -> Path:
    """The spectrogram over the cross-attention, on one time axis; one attention panel per head for
    head "all". Written atomically in out's format (.png, .svg, .pdf)."""
    if m.weights.numel() == 0:
        raise PipelineError("the model produced no tokens: nothing to draw")
    figure_format(out)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = m.weights[None] if m.weights.dim() == 2 else m.weights  # (H, T, L)
    n, t, _ = panels.shape
    font = max(5.0, min(9.0, 180 / max(t, 1)))
    fig, axes = plt.subplots(
        1 + n,
        1,
        squeeze=False,
        layout="constrained",
        dpi=110,
        figsize=(min(16, 4 + m.seconds * 1.5), 2.2 + n * (0.6 + 0.2 * t)),
        height_ratios=[8] + [max(3, t * 0.5)] * n,
        sharex=True,
    )
    extent_s = m.seconds
    axes[0, 0].imshow(
        m.features.numpy(),
        origin="lower",
        aspect="auto",
        cmap="magma",
        extent=(0, extent_s, 0, m.features.shape[0]),
        interpolation="nearest",
    )
    axes[0, 0].set_ylabel("mel band", fontsize=8)
    vmax = max(float(panels.max()), 1e-9)
    for i in range(n):
        ax = axes[1 + i, 0]
        image = ax.imshow(
            panels[i].numpy(),
            aspect="auto",
            cmap="viridis",
            vmin=0.0,
            vmax=vmax,
            extent=(0, extent_s, t - 0.5, -0.5),
            interpolation="nearest",
        )
        ax.set_yticks(range(t), m.tokens, fontsize=font)
        ax.tick_params(length=0)
        if n > 1:
            ax.set_title(f"head {i}", fontsize=8)
    axes[-1, 0].set_xlabel("seconds", fontsize=8)
    fig.colorbar(image, ax=axes[1:, 0].tolist(), shrink=0.8, label="attention weight")
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, out)
