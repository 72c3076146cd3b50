"""contrastive: a text-image dual encoder (CLIP, Radford et al. 2021) on labelled images, each
image's text its label name (transformer.model.contrastive has the model).

The rules:
- Data: data.images.train, one image set or a list of them (a prepared split or a folder of class
  folders each), every set fitted to model.vision's channels and size
  (data.image_tensors.fit_images: grey -> RGB by repeating the channel, smaller images padded
  with their background colour) and joined. An image's text is its label name, lowercased
  ("T-shirt/top" reads "t-shirt/top"); one name in two sets is one text.
- Tokenizer: data.tokenizer, trained with the encoder's special tokens on the distinct training
  names (data.min_frequency counts names, not images: 1 keeps every character or word), saved in
  the run directory and in every model directory; or, when train.init_parts loads the text tower
  (text_encoder) from a model directory with a tokenizer, that one (a sentence encoder reads the
  tokens it was trained on). A text is [CLS] name [SEP], cut to data.max_len tokens (and to the
  text tower's max_positions).
- Batches: train.batch_tokens // (1 + patches) images, drawn in an order permuted per epoch from
  batch_seed(seed, epoch), whole batches only, so a resumed run sees the batches the
  uninterrupted one did; data.images.random_crop and data.images.horizontal_flip draw from a
  generator seeded per batch (a flip also mirrors "left" and "right" in a picture, not in its name).
- Loss: symmetric InfoNCE over the batch's (B, B) logits, image i against the text of image j:
  cross entropy of each image over the texts plus of each text over the images, halved, summed
  over the batch (units: images). One name can occur several times in a batch (renderings of one
  emoji, Fashion-MNIST's ten classes); every image-text pair with the same name is a positive,
  never a negative (UniCL, Yang et al. 2022): the target of image i is uniform over the texts of
  its name, and of text j uniform over the images of its name. Without repeated names this is
  CLIP's loss exactly. The text tower runs once per distinct name of a batch.
- Validation (data.images.valid): the loss over fixed batches of the validation images (one
  seeded order), and zero-shot accuracy: each validation image given the nearest of the validation
  split's distinct names; best/ by that accuracy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ...config import ConfigError, RunConfig
from ...data.batching import batch_seed, fixed_size_batches, pad_rows, to_device
from ...data.image_tensors import augment, fit_images, to_pixels
from ...data.images import open_images
from ...data.text import DataError
from ...data.tokenizer import ENCODER_SPECIALS, train_tokenizer
from ...evaluation.retrieval import retrieval_scores
from ...model.build import build_model
from ...model.contrastive import DualEncoder
from ...model_dir import (
    has_tokenizer,
    load_config,
    load_model,
    load_tokenizers,
    save_tokenizers,
)
from .. import distributed as D
from .base import StepSums, autocast, validation_sums
from .encoder import EncoderObjective, init_dir

VALID_ORDER_SEED = 0
"""The seed of the validation images' one fixed order (their batches mix names)."""


def contrastive_loss(
    logits: torch.Tensor, columns: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric InfoNCE with every same-name pair a positive (see the module doc).

    logits (B, B): image i against the text of pair j; columns (B,): the name of each pair (equal
    values = the same name) -> (image -> text, text -> image) cross entropies, each summed over
    the batch."""
    same = columns[:, None] == columns[None, :]  # (B, B), symmetric: the positives
    targets = same.float() / same.sum(dim=1, keepdim=True)  # each row uniform over its positives
    logits = logits.float()
    image_to_text = -(targets * logits.log_softmax(dim=1)).sum()
    text_to_image = -(targets * logits.log_softmax(dim=0)).sum()  # column j: text j's images
    return image_to_text, text_to_image


@dataclass
class ContrastiveBatch:
    """Pixels (B, channels, height, width) in [-1, 1]; the batch's distinct texts, [CLS] name
    [SEP] right-padded: ids and mask (K, L); columns (B,): each image's text among the K."""

    pixels: torch.Tensor
    ids: torch.Tensor
    mask: torch.Tensor
    columns: torch.Tensor
    units: int
    tokens: int

    def to(self, device) -> ContrastiveBatch:
        moved = (to_device(t, device) for t in (self.pixels, self.ids, self.mask, self.columns))
        return ContrastiveBatch(*moved, self.units, self.tokens)


def image_names(path: str) -> tuple[torch.Tensor, list[str]]:
    """An image set's images (N, C, H, W) uint8 and each image's name, lowercased."""
    data = open_images(path)
    names = [name.lower() for name in data.names]
    return data.images, [names[i] for i in data.labels.tolist()]


class Contrastive(EncoderObjective):
    """A dual encoder (model.contrastive) on images and their names (see the module doc)."""

    name = "contrastive"
    best_key, higher_is_better = "valid_zero_shot_accuracy", True

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        dist: D.DistInfo,
        say: Callable[[str], None],
        resume: bool,
    ):
        d, t = config.data, config.train
        cfg = load_config(t.init_from) if t.init_from else config.model
        if cfg.contrastive is None or cfg.vision is None:
            raise ConfigError(
                f"train.init_from={t.init_from} is not a dual encoder: it has no model.contrastive"
            )
        self.vision = v = cfg.vision
        sets = (d.images.train,) if isinstance(d.images.train, str) else d.images.train
        if not sets:
            raise ConfigError("data.train_images is an empty list: give at least one image set")
        images, names = [], []
        for path in sets:
            x, n = image_names(path)
            images.append(fit_images(x, v.channels, v.image_size))
            names += n
        self.train_images = torch.cat(images)
        self.names = sorted(set(names))
        if len(self.names) < 2:
            raise DataError(
                f"{', '.join(sets)}: {len(self.names)} name; contrastive training needs at least 2"
            )
        index = {name: i for i, name in enumerate(self.names)}
        self.train_labels = torch.tensor([index[n] for n in names], dtype=torch.long)

        tokenizer = self._tokenizer(config, run_dir, dist, resume)
        super().__init__(config, tokenizer, init_dir(config, run_dir, resume))
        limit, text = d.max_len, cfg.text_tower()
        if text.positional in ("sinusoidal", "learned"):
            limit = min(limit, text.max_positions)
        self.limit = limit - 2  # [CLS] and [SEP]
        self.texts, cut = self._rows(self.names)
        if cut:
            say(f"cut {cut:,} training name(s) to data.max_len={d.max_len} tokens")

        self.valid_images = self.valid_texts = None
        if d.images.valid:
            x, valid_names = image_names(d.images.valid)
            self.valid_images = fit_images(x, v.channels, v.image_size)
            self.valid_names = sorted(set(valid_names))
            valid_index = {name: i for i, name in enumerate(self.valid_names)}
            self.valid_labels = torch.tensor([valid_index[n] for n in valid_names])
            self.valid_texts, _ = self._rows(self.valid_names)
        self.per_batch = max(1, t.batch_tokens // (v.n_patches + 1))
        n_valid = 0 if self.valid_images is None else len(self.valid_images)
        valid = f" ({len(self.valid_names):,} names)" if n_valid else ""
        say(
            f"data: {len(self.train_images):,} training images of {len(self.names):,} names from "
            f"{len(sets)} set(s), {n_valid:,} validation images{valid}, fitted to {v.channels} x "
            f"{v.image_size} x {v.image_size}; {self.per_batch} images per batch"
        )

    def _tokenizer(self, config: RunConfig, run_dir: Path, dist: D.DistInfo, resume: bool):
        """The run's tokenizer: the run directory's on resume, init_from's, the one the text
        tower of train.init_parts was trained with, or trained on the distinct training names
        (every process trains the same one; the first writes it)."""
        d, t = config.data, config.train
        text_part = (t.init_parts or {}).get("text_encoder")
        if resume:
            return load_tokenizers(run_dir)[0]
        if t.init_from:
            tokenizer = load_tokenizers(t.init_from)[0]
        elif text_part and has_tokenizer(text_part["from"]):
            tokenizer = load_tokenizers(text_part["from"])[0]
        else:
            tokenizer = train_tokenizer(
                d.tokenizer, self.names, d.vocab_size, d.min_frequency, ENCODER_SPECIALS
            )
        if dist.is_main:
            save_tokenizers(run_dir, tokenizer)
        return tokenizer

    def _rows(self, names: list[str]) -> tuple[list[list[int]], int]:
        """[CLS] name [SEP] ids of each name, and how many were cut to fit."""
        encoded = self.tokenizer.encode_batch(names)
        cut = sum(len(ids) > self.limit for ids in encoded)
        return [self.tokens.wrap(ids[: self.limit]) for ids in encoded], cut

    # data
    def batches(self, epoch):
        return fixed_size_batches(
            len(self.train_images), self.per_batch, self.config.train.seed, epoch
        )

    def padding_share(self, batches):
        return 0.0

    def attention_shape(self):
        return self.per_batch, self.vision.n_patches + 1

    def units(self, indices, key):
        return len(indices)

    def collate(self, indices, key):
        d = self.config.data
        images = self.train_images[indices]
        if d.images.random_crop or d.images.horizontal_flip:
            generator = torch.Generator().manual_seed(batch_seed(self.config.train.seed, *key))
            images = augment(images, d.images.random_crop, d.images.horizontal_flip, generator)
        return self._batch(images, self.train_labels[indices], self.texts)

    def _batch(
        self, images: torch.Tensor, labels: torch.Tensor, texts: list[list[int]]
    ) -> ContrastiveBatch:
        distinct, columns = torch.unique(labels, return_inverse=True)  # (K,), (B,)
        ids, mask = pad_rows([texts[i] for i in distinct.tolist()], self.tokens.pad)  # (K, L)
        tokens = len(images) * (self.vision.n_patches + 1) + int(mask.sum())
        return ContrastiveBatch(to_pixels(images), ids, mask, columns, len(images), tokens)

    @property
    def has_valid(self):
        return self.valid_images is not None and len(self.valid_images) > 0

    def valid_batches(self):
        g = torch.Generator().manual_seed(VALID_ORDER_SEED)
        order = torch.randperm(len(self.valid_images), generator=g)
        for start in range(0, len(order), self.per_batch):
            chosen = order[start : start + self.per_batch]
            yield self._batch(
                self.valid_images[chosen], self.valid_labels[chosen], self.valid_texts
            )

    # model
    def new_model(self):
        init_from = self.config.train.init_from
        if init_from is not None:
            model = load_model(init_from)
            if not isinstance(model, DualEncoder):
                raise ConfigError(f"train.init_from={init_from} is not a dual encoder")
            return model.train()
        cfg = self.config.model.replace(
            vocab_size=self.tokenizer.vocab_size,
            pad_id=self.tokens.pad,
            bos_id=self.tokens.cls,
            eos_id=self.tokens.sep,
        )
        return build_model(cfg)

    def loss(self, net, model, batch, device):
        with autocast(device, self.config.train.precision):
            logits = net(batch.pixels, batch.ids, batch.mask)  # (B, K): images x distinct texts
        logits = logits[:, batch.columns]  # (B, B): image i against the text of image j
        image_to_text, text_to_image = contrastive_loss(logits, batch.columns)
        loss = (image_to_text + text_to_image) / 2
        return StepSums(loss, loss.detach(), batch.units, batch.tokens)

    @torch.no_grad()
    def validate(self, model, device):
        result = validation_sums(self, model, device, self.valid_batches())
        was_training = model.training
        model.eval()
        images = []
        for start in range(0, len(self.valid_images), self.per_batch):
            pixels = to_pixels(self.valid_images[start : start + self.per_batch]).to(device)
            images.append(model.embed_images(pixels).cpu())
        texts = []
        for start in range(0, len(self.valid_texts), 256):
            ids, mask = pad_rows(self.valid_texts[start : start + 256], self.tokens.pad)
            texts.append(model.embed_texts(ids.to(device), mask.to(device)).cpu())
        model.train(was_training)
        scores, _ = retrieval_scores(
            torch.cat(images), torch.cat(texts), self.valid_labels.tolist(), self.valid_names
        )
        return {
            **result,
            "valid_zero_shot_accuracy": scores.classification.accuracy,
            "valid_text_to_image_r1": scores.text_to_image[1],
        }

    def describe(self, result):
        return (
            f"valid loss {result['valid_loss']:.4f}  zero-shot accuracy "
            f"{result['valid_zero_shot_accuracy']:.2%} over {len(self.valid_names):,} names  "
            f"text->image R@1 {result['valid_text_to_image_r1']:.2%}"
        )
