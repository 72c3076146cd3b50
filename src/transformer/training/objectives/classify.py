"""Classification: a label per text ([CLS] text [SEP] -> pooled -> classes; data.text.train_tsv) or
per image (patches -> pooled -> classes; data.images.train), cross entropy per example.

Validation accuracy and macro-F1 (and loss, perplexity per example); best/ by accuracy.
Image batches hold train.batch_tokens // (1 + patches) images (the positions the encoder sees),
in an order shuffled per epoch; augmentation (data.images.random_crop, data.images.horizontal_flip)
draws from a generator seeded per batch, so a resumed run sees the same images.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ...config import ConfigError, RunConfig
from ...data.batching import batch_indices, batch_seed, fixed_size_batches, pad_rows, to_device
from ...data.image_tensors import augment, to_pixels
from ...data.images import load_images
from ...data.text import DataError, iter_labelled
from ...evaluation.metrics import classification_scores
from ...model.build import build_model
from ...model_dir import load_config, load_model
from ...model_records import load_labels
from .. import distributed as D
from ..checkpoint import step_dirs
from .base import Objective, StepSums, autocast, validation_sums
from .encoder import (
    EncoderBatch,
    EncoderObjective,
    TextRows,
    encoder_model,
    init_dir,
    pretrained_under,
    run_tokenizer,
)


class Labelled:
    """What text and image classifiers share: the loss on class logits, validation accuracy and
    macro-F1, best/ by accuracy."""

    name = "classify"
    best_key, higher_is_better = "valid_accuracy", True

    def heads(self) -> dict:
        """A new classifier over self.labels, pooled as [model] says."""
        m = self.config.model
        return dict(n_classes=len(self.labels), pooling=m.pooling, pooler=m.pooler, mlm_head=False)

    def class_loss(
        self, logits: torch.Tensor, labels: torch.Tensor, units: int, tokens: int
    ) -> StepSums:
        logits = logits.float()
        nll = F.cross_entropy(logits, labels, reduction="sum")
        eps = self.config.train.label_smoothing
        loss = F.cross_entropy(logits, labels, reduction="sum", label_smoothing=eps) if eps else nll
        return StepSums(loss, nll, units, tokens, logits.detach())

    def validate(self, model, device):
        predicted, gold = [], []

        def collect(batch, out: StepSums) -> None:
            predicted.extend(out.logits.argmax(-1).tolist())
            gold.extend(batch.labels.tolist())

        result = validation_sums(self, model, device, self.valid_batches(), collect)
        scores = classification_scores(predicted, gold, self.labels)
        return {**result, "valid_accuracy": scores.accuracy, "valid_macro_f1": scores.macro_f1}

    def describe(self, result):
        return (
            f"valid loss {result['valid_loss']:.4f}  accuracy {result['valid_accuracy']:.2%}  "
            f"macro-F1 {result['valid_macro_f1']:.4f}"
        )


class Classify(Labelled, TextRows, EncoderObjective):
    """A label per text (data.text.train_tsv: label<TAB>text), through the pooled encoder and a
    classifier."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        dist: D.DistInfo,
        say: Callable[[str], None],
        resume: bool,
    ):
        d = config.data
        tok = run_tokenizer(config, run_dir, dist, say, resume)
        super().__init__(config, tok, init_dir(config, run_dir, resume))
        if resume:
            labels = load_labels(step_dirs(run_dir)[-1])
        else:
            labels = sorted({label for _, label, _ in iter_labelled(d.text.train_tsv)})
        if len(labels) < 2:
            raise DataError(
                f"{d.text.train_tsv} has {len(labels)} label ({', '.join(labels)}): "
                "a classifier needs at least 2"
            )
        self.labels = labels
        self.train_ids, self.train_labels, dropped = self._read(d.text.train_tsv)
        if not self.train_ids:
            raise DataError(
                f"no text of {d.text.train_tsv} is at most data.max_len={d.max_len} tokens with "
                "[CLS] and [SEP]: raise data.max_len"
            )
        if dropped:
            say(
                f"dropped {dropped:,} training text(s) longer than data.max_len={d.max_len} tokens "
                "with [CLS] and [SEP]"
            )
        self.valid_ids, self.valid_labels = [], []
        if d.text.valid_tsv:
            self.valid_ids, self.valid_labels, dropped = self._read(d.text.valid_tsv)
            if dropped:
                say(
                    f"dropped {dropped:,} validation text(s) longer than "
                    f"data.max_len={d.max_len} tokens"
                )
        self.sizes = np.fromiter(map(len, self.train_ids), np.int64, len(self.train_ids))
        counts = np.bincount(self.train_labels, minlength=len(labels))
        counted = ", ".join(f"{name} {n:,}" for name, n in zip(labels, counts, strict=True))
        say(
            f"data: {len(self.train_ids):,} training and {len(self.valid_ids):,} validation texts; "
            f"{len(labels)} labels (training counts: {counted})"
        )

    def _read(self, path: str) -> tuple[list[list[int]], np.ndarray, int]:
        """[CLS] text [SEP] ids and label indices of a labelled file, and how many texts were too
        long."""
        index = {label: i for i, label in enumerate(self.labels)}
        texts, labels = [], []
        for line, label, text in iter_labelled(path):
            if label not in index:
                raise DataError(
                    f"{path} line {line + 1}: label {label!r} does not occur in the training "
                    f"data ({self.config.data.text.train_tsv}): a classifier can only predict "
                    "the labels it was trained on"
                )
            texts.append(text)
            labels.append(index[label])
        rows, kept, dropped = [], [], 0
        limit = self.config.data.max_len - 2
        for start in range(0, len(texts), 10_000):
            for i, ids in enumerate(
                self.tokenizer.encode_batch(texts[start : start + 10_000]), start
            ):
                if len(ids) > limit:
                    dropped += 1
                else:
                    rows.append(self.tokens.wrap(ids))
                    kept.append(labels[i])
        return rows, np.asarray(kept, dtype=np.int64), dropped

    def collate(self, indices, key=None, rows=None, labels=None):
        rows = self.train_ids if rows is None else rows
        labels = self.train_labels if labels is None else labels
        ids, mask = pad_rows([rows[i] for i in indices], self.tokens.pad)  # (B, L) each
        return EncoderBatch(
            ids, mask, torch.as_tensor(labels[indices]), len(indices), int(mask.sum())
        )

    @property
    def has_valid(self):
        return bool(self.valid_ids)

    def new_model(self):
        return encoder_model(self.config, self.tokenizer, self.tokens, self.heads())

    def loss(self, net, model, batch, device):
        with autocast(device, self.config.train.precision):
            hidden = net(batch.ids, attention_mask=batch.mask)  # (B, L, C)
            logits = model.pooler(hidden, batch.mask)  # (B, n_classes)
        return self.class_loss(logits, batch.labels, batch.units, batch.tokens)

    def valid_batches(self):
        sizes = [len(r) for r in self.valid_ids]
        for indices in batch_indices(sizes, self.config.train.batch_tokens, 0, 0, shuffle=False):
            yield self.collate(indices, rows=self.valid_ids, labels=self.valid_labels)

    def save_files(self):
        return {**super().save_files(), "labels": self.labels}


@dataclass
class ImageBatch:
    """Pixels (B, channels, height, width) scaled to [-1, 1] (data.image_tensors.to_pixels) and
    class labels (B,)."""

    pixels: torch.Tensor
    labels: torch.Tensor
    units: int
    tokens: int

    def to(self, device) -> ImageBatch:
        pixels, labels = to_device(self.pixels, device), to_device(self.labels, device)
        return ImageBatch(pixels, labels, self.units, self.tokens)


class ImageClassify(Labelled, Objective):
    """A label per image (data.images.train), through the image encoder (model.vision) and a
    classifier."""

    def __init__(self, config: RunConfig, run_dir: Path, say: Callable[[str], None], resume: bool):
        super().__init__(config)
        d = config.data
        init_from = config.train.init_from
        vision = config.model.vision if not init_from else load_config(init_from).vision
        if vision is None:
            raise ConfigError(
                f"train.init_from={init_from} is not an image encoder: it has no model.vision"
            )
        self.vision = vision
        train = load_images(d.images.train, vision.channels, vision.image_size)
        self.labels = load_labels(step_dirs(run_dir)[-1]) if resume else train.names
        if len(self.labels) < 2:
            raise DataError(
                f"{d.images.train} has {len(self.labels)} label: a classifier needs at least 2"
            )
        self.train_images, self.train_labels = train.images, train.labels
        self.valid_images = self.valid_labels = None
        if d.images.valid:
            self.valid_images, self.valid_labels = self._read_valid(vision)
        self.per_batch = max(1, config.train.batch_tokens // (vision.n_patches + 1))
        counts = torch.bincount(self.train_labels, minlength=len(self.labels)).tolist()
        n_valid = 0 if self.valid_labels is None else len(self.valid_labels)
        size = f"{vision.channels} x {vision.image_size} x {vision.image_size}"
        counted = ", ".join(f"{name} {n:,}" for name, n in zip(self.labels, counts, strict=True))
        say(
            f"data: {len(self.train_labels):,} training and {n_valid:,} validation images of "
            f"{size}, {len(self.labels)} labels; {self.per_batch} images per batch (training "
            f"counts: {counted})"
        )

    def _read_valid(self, vision) -> tuple[torch.Tensor, torch.Tensor]:
        """The validation images, their labels numbered as the training labels are."""
        d = self.config.data
        valid = load_images(d.images.valid, vision.channels, vision.image_size)
        index = {name: i for i, name in enumerate(self.labels)}
        unknown = sorted(set(valid.names) - set(index))
        if unknown:
            raise DataError(
                f"{d.images.valid}: label {unknown[0]!r} does not occur in the training images "
                f"({d.images.train}): a classifier can only predict the labels it was trained on"
            )
        remap = torch.tensor([index[name] for name in valid.names], dtype=torch.long)
        return valid.images, remap[valid.labels]

    def batches(self, epoch):
        return fixed_size_batches(
            len(self.train_labels), self.per_batch, self.config.train.seed, epoch
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
        return self._batch(images, self.train_labels[indices])

    def _batch(self, images: torch.Tensor, labels: torch.Tensor) -> ImageBatch:
        return ImageBatch(
            to_pixels(images), labels, len(labels), len(labels) * (self.vision.n_patches + 1)
        )

    @property
    def has_valid(self):
        return self.valid_labels is not None and len(self.valid_labels) > 0

    def valid_batches(self):
        for start in range(0, len(self.valid_labels), self.per_batch):
            yield self._batch(
                self.valid_images[start : start + self.per_batch],
                self.valid_labels[start : start + self.per_batch],
            )

    def new_model(self):
        init_from = self.config.train.init_from
        if init_from is None:  # no tokens: vocabulary and special ids unused
            cfg = self.config.model.replace(
                vocab_size=1, pad_id=0, bos_id=0, eos_id=0, **self.heads()
            )
            return build_model(cfg)
        return pretrained_under(load_model(init_from), self.heads(), init_from)

    def loss(self, net, model, batch, device):
        with autocast(device, self.config.train.precision):
            logits = model.pooler(net(batch.pixels))  # (B, n_classes)
        return self.class_loss(logits, batch.labels, batch.units, batch.tokens)

    def save_files(self):
        return {"decode": self.config.decode, "labels": self.labels}
