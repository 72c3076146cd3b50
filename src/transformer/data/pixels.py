"""Images as token sequences, for a decoder-only model over pixels (Image GPT, Chen et al. 2020).

The rules, first:
- Quantisation: each channel value v (0-255) becomes the level floor(v * levels / 256). One
  channel: a token is a grey level (levels tokens). Three channels: a token is a colour of the
  fixed palette of levels^3 colours, index (r * levels + g) * levels + b (levels = 8 is the 9-bit
  palette, 512 colours). Back to pixels, a level is its bin's centre: (level + 0.5) * 256 / levels.
- Order: raster order, row by row, left to right; one token a pixel (H * W tokens an image).
- Ids: 0 <pad>, 1 <unk> (a character the names never had), 2 <s> (the unconditional start, and
  the end of a name), 3 </s> (unused: an image has a fixed length); then the pixel tokens from
  PIXEL_OFFSET; then one token per class label; then one per character of the names.
- A sequence is a condition, then the pixels. Condition: a label token (class-conditional), a
  name's characters then <s> (text-conditional), or <s> alone (unconditional). The model is
  trained to predict the pixels only; the condition's own tokens are never targets.
- Bits per dimension (the likelihood literature's unit): the summed negative log-likelihood of an
  image's pixel tokens in bits, over its H * W * channels values. A model over L levels is also a
  model of the 8-bit image, spreading each level's probability evenly over the 256 / L values of
  its bin; its 8-bit bits/dim is then bits/dim + log2(256 / L): an upper bound comparable with
  published 8-bit results.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import torch

from ..files import atomic_write_text

PAD, UNK, START, END = 0, 1, 2, 3
PIXEL_OFFSET = 4


class PixelTokenError(ValueError):
    """A bad image, label or name for a pixel model: one line saying what to do."""


@dataclass(frozen=True)
class ImageTokens:
    """The token layout of an image generator (see the module doc); saved as pixels.json in its
    model directory."""

    image_size: int
    channels: int
    levels: int
    labels: tuple[str, ...] = ()
    """Class names, one token each (condition "label")."""
    chars: str = ""
    """The characters of the names, one token each (condition "name")."""

    def __post_init__(self) -> None:
        if self.channels not in (1, 3):
            raise PixelTokenError(f"channels={self.channels}: images are grey (1) or RGB (3)")
        if not 2 <= self.levels <= 256:
            raise PixelTokenError(f"levels={self.levels} must be between 2 and 256")

    # the layout
    @property
    def n_colours(self) -> int:
        return self.levels**self.channels

    @property
    def n_pixels(self) -> int:
        return self.image_size * self.image_size

    @property
    def label_offset(self) -> int:
        return PIXEL_OFFSET + self.n_colours

    @property
    def char_offset(self) -> int:
        return self.label_offset + len(self.labels)

    @property
    def vocab_size(self) -> int:
        return self.char_offset + len(self.chars)

    def non_pixel_ids(self) -> list[int]:
        """Every id that is not a pixel: what sampling suppresses."""
        return list(range(PIXEL_OFFSET)) + list(range(self.label_offset, self.vocab_size))

    # pixels <-> tokens
    def quantise(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (N, channels, H, W) -> pixel tokens (N, H * W), ids from PIXEL_OFFSET."""
        self.check(images)
        q = images.long() * self.levels // 256  # (N, channels, H, W): each channel's level
        colour = q[:, 0]
        for c in range(1, self.channels):
            colour = colour * self.levels + q[:, c]
        return colour.reshape(len(images), -1) + PIXEL_OFFSET  # (N, H * W)

    def pixels(self, tokens: torch.Tensor) -> torch.Tensor:
        """Pixel tokens (N, H * W) -> uint8 images (N, channels, H, W), each level at its bin's
        centre."""
        colour = (tokens.long() - PIXEL_OFFSET).clamp(0, self.n_colours - 1)
        levels = []
        for _ in range(self.channels):  # the last channel is the lowest digit
            levels.append(colour % self.levels)
            colour = colour // self.levels
        q = torch.stack(levels[::-1], dim=1)  # (N, channels, H * W)
        values = ((q.float() + 0.5) * 256 / self.levels).floor().clamp(0, 255).to(torch.uint8)
        return values.reshape(len(tokens), self.channels, self.image_size, self.image_size)

    def check(self, images: torch.Tensor) -> None:
        want = (self.channels, self.image_size, self.image_size)
        if images.dtype != torch.uint8 or images.dim() != 4 or tuple(images.shape[1:]) != want:
            raise PixelTokenError(
                f"images of {images.dtype} {tuple(images.shape)} do not fit this model: it takes "
                f"uint8 (N, {', '.join(map(str, want))})"
            )

    # conditions
    def label_token(self, label: str | int) -> int:
        if not self.labels:
            raise PixelTokenError("this model is not class-conditional: leave out the label")
        if isinstance(label, str):
            if label not in self.labels:
                raise PixelTokenError(
                    f"unknown label {label!r}: this model knows {', '.join(self.labels)}"
                )
            label = self.labels.index(label)
        if not 0 <= label < len(self.labels):
            raise PixelTokenError(f"label {label} is outside 0..{len(self.labels) - 1}")
        return self.label_offset + label

    def name_tokens(self, name: str) -> list[int]:
        """A name's characters (lowercased; unknown ones as <unk>), then <s>."""
        if not self.chars:
            raise PixelTokenError("this model is not conditioned on names: leave out the text")
        index = {c: self.char_offset + i for i, c in enumerate(self.chars)}
        return [index.get(c, UNK) for c in name.lower()] + [START]

    def prefix(self, label: str | int | None = None, name: str | None = None) -> list[int]:
        """The condition's tokens: a label, a name, or <s> alone (unconditional)."""
        if label is not None and name is not None:
            raise PixelTokenError("give a label or a name, not both")
        if label is not None:
            return [self.label_token(label)]
        if name is not None:
            return self.name_tokens(name)
        return [START]

    # bits per dimension
    def bits_per_dim(self, nll_nats: float, images: int) -> float:
        """Summed NLL (nats) of `images` whole images -> bits per dimension."""
        return nll_nats / math.log(2) / (images * self.n_pixels * self.channels)

    def bits_per_dim_8bit(self, bits_per_dim: float) -> float:
        """The 8-bit bits/dim of the same model, each level spread evenly over its bin."""
        return bits_per_dim + math.log2(256 / self.levels)

    # files
    def to_dict(self) -> dict:
        return {
            "image_size": self.image_size,
            "channels": self.channels,
            "levels": self.levels,
            "labels": list(self.labels),
            "chars": self.chars,
        }

    @classmethod
    def from_dict(cls, values: dict) -> ImageTokens:
        try:
            return cls(
                int(values["image_size"]),
                int(values["channels"]),
                int(values["levels"]),
                tuple(values.get("labels", ())),
                str(values.get("chars", "")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise PixelTokenError(f"not an image token layout ({e})") from None

    def save(self, file: str | os.PathLike) -> None:
        atomic_write_text(file, json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n")


def names_alphabet(names: list[str]) -> str:
    """The sorted characters of lowercased names: the "name" condition's vocabulary."""
    return "".join(sorted({c for name in names for c in name.lower()}))


def sequences(
    tokens: ImageTokens,
    images: torch.Tensor,
    prefixes: list[list[int]],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoder inputs and targets (N, L - 1) of condition + pixels, right-padded to the longest
    condition: inputs = the sequence less its last token, targets = the next token where it is a
    pixel, <pad> (ignored) elsewhere."""
    pixels = tokens.quantise(images)  # (N, H * W)
    width = max(len(p) for p in prefixes) + tokens.n_pixels
    seq = torch.full((len(images), width), PAD, dtype=torch.long)
    target = torch.full_like(seq, PAD)
    for row, prefix in enumerate(prefixes):
        n = len(prefix)
        seq[row, :n] = torch.tensor(prefix, dtype=torch.long)
        seq[row, n : n + tokens.n_pixels] = pixels[row]
        target[row, n - 1 : n - 1 + tokens.n_pixels] = pixels[row]
    return seq[:, :-1], target[:, :-1]


def check_levels(levels: int, channels: int) -> None:
    """A palette of levels^channels colours must stay a vocabulary, not a table of millions."""
    if levels**channels > 4096:
        raise PixelTokenError(
            f"data.pixel_levels={levels} with {channels} channels is {levels**channels:,} colours:"
            " use at most 16 levels for RGB (4,096 colours; 8 = the 9-bit palette)"
        )
