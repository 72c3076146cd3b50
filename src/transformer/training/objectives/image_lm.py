"""image_lm: images generated pixel by pixel by a decoder-only model (Image GPT, Chen et al. 2020).

Each image is a condition (a class token, a name, or the unconditional <s>) then its pixels as
tokens in raster order (transformer.data.pixels has the layout). The loss is next-token cross
entropy over the pixel tokens only, summed over them; units = pixels. With
data.images.drop_condition, that share of the training images (drawn per batch from its own seed)
trades its condition for <s>, so one model samples and scores both ways. Horizontal flips
(data.images.horizontal_flip) mirror images before they become tokens.

Validation: loss, NLL per pixel token and bits per dimension (conditioned as trained, no
dropping); best/ by validation loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import torch

from ...config import ConfigError, RunConfig
from ...data.batching import Batch, batch_seed, fixed_size_batches
from ...data.image_tensors import augment
from ...data.images import ImageSet, open_images
from ...data.pixels import START, ImageTokens, check_levels, names_alphabet, sequences
from ...data.text import DataError
from ...model.build import build_model
from ...model_dir import load_model
from ...model_records import load_pixels
from .base import Objective, validation_sums
from .seq2seq import Seq2Seq


class ImageLM(Objective):
    """A decoder over image tokens (see the module doc)."""

    name = "image_lm"

    def __init__(self, config: RunConfig, run_dir: Path, say: Callable[[str], None]):
        super().__init__(config)
        d, t = config.data, config.train
        train = open_images(d.images.train)
        self.train_images, self.train_names = train.images, [train.names[i] for i in train.labels]
        _, channels, size, width = train.images.shape
        check_levels(d.images.pixel_levels, channels)
        if t.init_from:
            self.tokens = load_pixels(t.init_from)
            if self.tokens is None:
                raise ConfigError(f"train.init_from={t.init_from} is not an image generator")
        else:
            self.tokens = ImageTokens(
                size,
                channels,
                d.images.pixel_levels,
                tuple(train.names) if d.images.condition == "label" else (),
                names_alphabet(train.names) if d.images.condition == "name" else "",
            )
        self.condition = d.images.condition
        self.valid = open_images(d.images.valid) if d.images.valid else None
        for images, path in ((train, d.images.train), (self.valid, d.images.valid)):
            if images is not None:
                self._check(images, path)
        self.length = max(len(self._prefix(n)) for n in set(self.train_names)) + size * size - 1
        if self.length > config.model.max_positions and not t.init_from:
            raise ConfigError(
                f"model.max_positions={config.model.max_positions} is shorter than a training "
                f"sequence ({self.length} tokens: the condition and {size} x {size} pixels): "
                f"raise it to {self.length}"
            )
        self.per_batch = max(1, t.batch_tokens // self.length)
        n_valid = 0 if self.valid is None else len(self.valid.images)
        say(
            f"data: {len(self.train_images):,} training and {n_valid:,} validation images of "
            f"{channels} x {size} x {size}, {self.tokens.n_colours} colours "
            f"({d.images.pixel_levels} levels a channel), condition {self.condition!r}"
            + (f" ({len(train.names)} labels)" if self.condition != "none" else "")
            + f", {self.per_batch} images ({self.length} positions each) a batch"
        )

    def _check(self, images: ImageSet, path: str) -> None:
        want = (self.tokens.channels, self.tokens.image_size, self.tokens.image_size)
        if tuple(images.images.shape[1:]) != want:
            raise DataError(
                f"{path} holds images of shape {tuple(images.images.shape[1:])}; the model "
                f"generates {want}"
            )
        if self.condition == "label":
            unknown = sorted(set(images.names) - set(self.tokens.labels))
            if unknown:
                raise DataError(
                    f"{path}: label {unknown[0]!r} is not one of the training labels "
                    f"({', '.join(self.tokens.labels[:5])}...)"
                )

    def _prefix(self, name: str | None) -> list[int]:
        match self.condition:
            case "label" if name is not None:
                return self.tokens.prefix(label=name)
            case "name" if name is not None:
                return self.tokens.prefix(name=name)
            case _:
                return [START]

    # data
    def batches(self, epoch):
        return fixed_size_batches(
            len(self.train_images), self.per_batch, self.config.train.seed, epoch
        )

    def padding_share(self, batches):
        return 0.0

    def attention_shape(self):
        return self.per_batch, self.length

    def units(self, indices, key):
        return len(indices) * self.tokens.n_pixels

    def collate(self, indices, key):
        d = self.config.data
        images = self.train_images[indices]
        g = torch.Generator().manual_seed(batch_seed(self.config.train.seed, *key))
        if d.images.horizontal_flip:
            images = augment(images, 0, True, g)
        names: list[str | None] = [self.train_names[i] for i in indices]
        if d.images.drop_condition and self.condition != "none":
            dropped = torch.rand(len(names), generator=g) < d.images.drop_condition
            names = [None if drop else n for n, drop in zip(names, dropped.tolist(), strict=True)]
        return self._batch(images, names)

    def _batch(self, images: torch.Tensor, names: list[str | None]) -> Batch:
        inputs, targets = sequences(self.tokens, images, [self._prefix(n) for n in names])
        return Batch(None, None, inputs, targets, len(images) * self.tokens.n_pixels)

    @property
    def has_valid(self):
        return self.valid is not None and len(self.valid.images) > 0

    def valid_batches(self) -> list[Batch]:
        images, names = self.valid.images, [self.valid.names[i] for i in self.valid.labels]
        return [
            self._batch(images[i : i + self.per_batch], names[i : i + self.per_batch])
            for i in range(0, len(images), self.per_batch)
        ]

    # model
    def new_model(self):
        if self.config.train.init_from:
            return load_model(self.config.train.init_from)
        return build_model(
            self.config.model.replace(
                vocab_size=self.tokens.vocab_size, pad_id=0, bos_id=START, eos_id=3
            )
        )

    loss = Seq2Seq.loss  # teacher forcing over the pixel targets; the condition's are padding

    def validate(self, model, device):
        result = validation_sums(self, model, device, self.valid_batches())
        result["valid_bits_per_dim"] = result["valid_nll"] / math.log(2) / self.tokens.channels
        return result

    def describe(self, result):
        return (
            f"valid loss {result['valid_loss']:.4f}  nll {result['valid_nll']:.4f}  "
            f"bits/dim {result['valid_bits_per_dim']:.4f}"
        )

    def save_files(self):
        return {"decode": self.config.decode, "pixels": self.tokens}
