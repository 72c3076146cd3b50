"""Speech to sequences (Whisper, Radford et al. 2022, §2.2): a log-mel spectrogram through two 1-D
convolutions of width 3 with GELU, the second with stride 2, then position vectors added and
dropout. The encoder layers after it are the text encoder's.

Legend (model/__init__.py): B batch, F audio frames (100 a second), L encoder positions
(ceil(F / stride)), C d_model; spelled out: n_mels (the spectrogram's bands).

Stride: Whisper's front end gives a position every 2 frames (20 ms). With stride 4 the first
convolution also has stride 2 (40 ms a position), the 4x subsampling of most CTC and conformer
recognisers: the encoder's layers cost half, its attention a quarter.

Positions: "sinusoidal" is Whisper's fixed table, which differs from §3.5's in two ways: all sines
come first, then all cosines, and the frequencies are 10000^(-i / (C/2 - 1)) for i < C/2 (the
paper's are 10000^(-2i / C)). It is kept in the weights (a buffer), so an imported model carries its
table exactly. "learned": one trained vector per position.
Padding: a batch of clips of different lengths comes with a frame mask (B, F); padded frames are
zeroed before each convolution (as the convolutions' own zero padding past the end of a clip
alone), so a clip's real positions come out as they would unpadded, and the encoder position j
(centred on frame stride x j) is real when that frame is. Whisper itself always reads 30 s (3000
frames), padding the audio with silence, and has no mask (AudioConfig.pad_to_max).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .layers import dropped


def whisper_sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> torch.Tensor:
    """(length, channels): sin(t * w_i) for i < C/2, then cos(t * w_i), with w_i =
    max_timescale^(-i / (C/2 - 1)) (Whisper's `sinusoids`)."""
    if channels % 2 or channels < 4:
        raise ValueError(f"d_model={channels} must be even and at least 4 for Whisper's sinusoids")
    increment = math.log(max_timescale) / (channels // 2 - 1)
    inverse = torch.exp(-increment * torch.arange(channels // 2, dtype=torch.float64))
    times = torch.arange(length, dtype=torch.float64)[:, None] * inverse[None, :]
    return torch.cat([torch.sin(times), torch.cos(times)], dim=1).float()


class AudioFrontEnd(nn.Module):
    """(B, n_mels, F) log-mel frames -> (B, L, C): conv (width 3, stride stride / 2) + GELU, conv
    (width 3, stride 2) + GELU, positions, dropout; with a frame mask (B, F), also the positions'
    mask (B, L)."""

    def __init__(
        self,
        n_mels: int,
        max_frames: int,
        d_model: int,
        positions: str,
        dropout: float,
        stride: int = 2,
    ):
        super().__init__()
        self.n_mels, self.max_frames, self.stride = n_mels, max_frames, stride
        self.conv1 = nn.Conv1d(n_mels, d_model, kernel_size=3, stride=stride // 2, padding=1)
        self.conv2 = nn.Conv1d(d_model, d_model, kernel_size=3, stride=2, padding=1)
        n = max_frames // stride
        self.kind = positions
        if positions == "learned":
            self.positions = nn.Parameter(torch.randn(n, d_model) * 0.02)
        else:
            self.register_buffer("positions", whisper_sinusoids(n, d_model))
        self.dropout = nn.Dropout(dropout)

    def check(self, features: torch.Tensor, mask: torch.Tensor | None) -> None:
        """A clear error naming the expected and the given shape."""
        expected = f"(B, {self.n_mels}, frames <= {self.max_frames})"
        if not isinstance(features, torch.Tensor) or features.dim() != 3:
            shape = (
                tuple(features.shape)
                if isinstance(features, torch.Tensor)
                else type(features).__name__
            )
            raise ValueError(f"audio must be a {expected} tensor of log-mel features, got {shape}")
        b, m, f = features.shape
        if m != self.n_mels or f > self.max_frames or f == 0:
            raise ValueError(
                f"log-mel features of shape {tuple(features.shape)} do not fit this model: it "
                f"takes {expected} (n_mels={self.n_mels}, max_frames={self.max_frames}); "
                "cut long audio into 30 s windows (transformer.data.audio)"
            )
        if not features.is_floating_point():
            raise ValueError(f"log-mel features are {features.dtype}: pass floats")
        if mask is not None and tuple(mask.shape) != (b, f):
            raise ValueError(
                f"the frame mask has shape {tuple(mask.shape)}; the features need ({b}, {f})"
            )

    def forward(
        self, features: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """features (B, n_mels, F), mask (B, F) or None -> (B, L, C) and the mask (B, L) or
        None."""
        self.check(features, mask)
        x = features.to(self.conv1.weight.dtype)
        if mask is not None:
            x = x * mask[:, None, :].to(x.dtype)  # padded frames read as zeros
        x = F.gelu(self.conv1(x))  # (B, C, F / (stride / 2))
        if mask is not None:  # as the convolution's own zero padding past a clip's end
            mask = mask[:, :: self.stride // 2]
            x = x * mask[:, None, :].to(x.dtype)
        x = F.gelu(self.conv2(x)).transpose(1, 2)  # (B, L, C)
        x = x + self.positions[: x.size(1)].to(x.dtype)
        positions_mask = None if mask is None else mask[:, ::2].to(torch.bool)  # (B, L)
        return dropped(self.dropout, x), positions_mask
