"""caption: image captioning with an encoder-decoder over an image encoder (model.vision: ViT's
patches, [CLS] included), by teacher forcing with label-smoothed cross entropy over the caption's
tokens.

The rules:
- Data: data.images.train / valid are labelled images (a prepared .safetensors split or a
  folder of class folders, at model.vision's channels and size); an image's caption is its label's
  name ("red apple" for the emoji dataset). Validation names need not occur in training (the
  emoji's unseen split can validate). An image whose caption has more than data.max_len tokens
  with </s> is left out (counted).
- Tokenizer: data.tokenizer / data.vocab_size ("char" suits names) trained on every training
  image's caption (so a character's count is its images'), with <pad> <unk> <s> </s> first; a
  resumed run reads the run directory's, train.init_from's model brings its own.
- Targets: the decoder reads the start token then the caption, and predicts the caption then </s>;
  units are target tokens (</s> included).
- Batches: train.batch_tokens // (1 + P) images (the encoder's positions, which outweigh a
  caption's tokens), in an order drawn per epoch from data.batching.batch_seed, whole batches only.
  Augmentation (data.images.random_crop, data.images.horizontal_flip;
  data.image_tensors.augment) draws from a generator seeded per batch, so a resumed run sees the
  same images. A flip changes what some pictures mean (the emoji "left-facing fist" mirrors
  "right-facing fist"): leave it off for such names.
- Validation: loss, NLL and perplexity per target token over every validation image; then greedy
  captions of train.valid_questions images spread evenly over the split (0 = all): exact match
  (the whole caption equal to the name) and chrF (evaluation.captions). best/ by exact match: the
  number a captioner is used for (and the loss under label smoothing keeps falling after the
  captions stop improving); ties keep the earlier checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ...config import ConfigError, RunConfig
from ...data.batching import batch_seed, fixed_size_batches, to_device
from ...data.image_tensors import augment, to_pixels
from ...data.images import ImageSet, load_images
from ...data.text import DataError
from ...data.tokenizer import (
    SPECIAL_TOKENS,
    Tokenizer,
    train_tokenizer,
)
from ...evaluation.captions import caption_scores, greedy_captions
from ...model.build import build_model
from ...model_dir import load_config, load_model, load_tokenizers, save_tokenizers
from .. import distributed as D
from ..loss import label_smoothed_cross_entropy
from ..tokenizing import TOKENIZER_NAMES
from .base import Objective, StepSums, autocast, validation_sums


@dataclass
class CaptionBatch:
    """Pixels (B, channels, size, size) in [-1, 1], decoder input and targets (B, T)."""

    pixels: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    units: int
    tokens: int

    def to(self, device) -> CaptionBatch:
        move = lambda t: to_device(t, device)  # noqa: E731
        return CaptionBatch(
            move(self.pixels), move(self.tgt_in), move(self.tgt_out), self.units, self.tokens
        )


@dataclass
class Captioned:
    """A split's images uint8 (N, channels, size, size), each one's caption and its token ids."""

    images: torch.Tensor
    texts: list[str]
    targets: list[list[int]]
    dropped: int

    @classmethod
    def of(cls, data: ImageSet, tokenizer: Tokenizer, max_len: int) -> Captioned:
        ids = tokenizer.encode_batch(list(data.names))  # once per name
        keep = [i for i, label in enumerate(data.labels.tolist()) if len(ids[label]) + 1 <= max_len]
        labels = data.labels[keep].tolist()
        return cls(
            data.images[keep],
            [data.names[label] for label in labels],
            [ids[label] for label in labels],
            len(data.labels) - len(keep),
        )

    def __len__(self) -> int:
        return len(self.texts)


def caption_tokenizer(
    config: RunConfig,
    run_dir: Path,
    dist: D.DistInfo,
    say: Callable[[str], None],
    resume: bool,
    captions: list[str],
) -> Tokenizer:
    """The run's tokenizer (see the module doc), written to run_dir by rank 0 and read back by
    every process."""
    d, init_from = config.data, config.train.init_from
    if dist.is_main and not resume:
        if init_from:
            tokenizer = load_tokenizers(init_from)[1]
        else:
            tokenizer = train_tokenizer(
                d.tokenizer, captions, d.vocab_size, d.min_frequency, SPECIAL_TOKENS
            )
            say(
                f"trained {TOKENIZER_NAMES[d.tokenizer]} on {len(set(captions)):,} captions: "
                f"vocabulary {tokenizer.vocab_size:,}"
            )
        save_tokenizers(run_dir, tokenizer, tokenizer)
    D.barrier(dist)
    return load_tokenizers(run_dir)[1]


class Caption(Objective):
    """Image captioning (see the module docstring)."""

    name = "caption"
    best_key, higher_is_better = "valid_exact_match", True

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        dist: D.DistInfo,
        say: Callable[[str], None],
        resume: bool,
    ):
        super().__init__(config)
        d, init_from = config.data, config.train.init_from
        model = load_config(init_from) if init_from else config.model
        if model.arch != "encoder-decoder" or model.vision is None:
            raise ConfigError(
                f"train.init_from={init_from} is not an image captioner: it needs arch = "
                '"encoder-decoder" with [model.vision]'
            )
        self.vision = v = model.vision
        train = load_images(d.images.train, v.channels, v.image_size)
        names = [train.names[i] for i in train.labels.tolist()]
        self.tokenizer = caption_tokenizer(config, run_dir, dist, say, resume, names)
        self.train = Captioned.of(train, self.tokenizer, d.max_len)
        if not len(self.train):
            raise DataError(
                f"no caption of {d.images.train} fits data.max_len={d.max_len} tokens with </s>: "
                "raise data.max_len"
            )
        self.valid = None
        if d.images.valid:
            valid = load_images(d.images.valid, v.channels, v.image_size)
            self.valid = Captioned.of(valid, self.tokenizer, d.max_len)
        self.positions = v.n_patches + 1
        self.per_batch = max(1, config.train.batch_tokens // self.positions)
        if self.per_batch > len(self.train):
            raise DataError(
                f"train.batch_tokens={config.train.batch_tokens} makes batches of "
                f"{self.per_batch:,} images, more than the {len(self.train):,} training images: "
                f"lower it to {len(self.train) * self.positions:,} or less"
            )
        n_valid = 0 if self.valid is None else len(self.valid)
        dropped = self.train.dropped + (0 if self.valid is None else self.valid.dropped)
        say(
            f"data: {len(self.train):,} training and {n_valid:,} validation images of "
            f"{v.channels} x {v.image_size} x {v.image_size}, {len(set(names)):,} training "
            f"captions; {self.per_batch} images per batch; {dropped:,} left out (captions longer "
            f"than data.max_len={d.max_len} tokens)"
        )

    # data
    def batches(self, epoch):
        return fixed_size_batches(len(self.train), self.per_batch, self.config.train.seed, epoch)

    def padding_share(self, batches):
        """Of the caption positions (the encoder's have none)."""
        real = padded = 0
        for batch in batches:
            lengths = [len(self.train.targets[i]) + 1 for i in batch]
            real, padded = real + sum(lengths), padded + max(lengths) * len(lengths)
        return 1 - real / max(padded, 1)

    def attention_shape(self):
        return self.per_batch, self.positions

    def units(self, indices, key):
        return sum(len(self.train.targets[i]) + 1 for i in indices)

    def collate(self, indices, key):
        d = self.config.data
        images = self.train.images[indices]
        if d.images.random_crop or d.images.horizontal_flip:
            generator = torch.Generator().manual_seed(batch_seed(self.config.train.seed, *key))
            images = augment(images, d.images.random_crop, d.images.horizontal_flip, generator)
        return self._batch(images, [self.train.targets[i] for i in indices])

    def _batch(self, images: torch.Tensor, targets: list[list[int]]) -> CaptionBatch:
        cfg = self.model_config
        length = 1 + max(len(t) for t in targets)
        tgt_in = torch.full((len(targets), length), cfg.pad_id, dtype=torch.long)
        tgt_out = torch.full((len(targets), length), cfg.pad_id, dtype=torch.long)
        for row, ids in enumerate(targets):
            tgt_in[row, : len(ids) + 1] = torch.tensor([cfg.start_id] + ids, dtype=torch.long)
            tgt_out[row, : len(ids) + 1] = torch.tensor(ids + [cfg.eos_id], dtype=torch.long)
        units = sum(len(t) + 1 for t in targets)
        return CaptionBatch(
            to_pixels(images), tgt_in, tgt_out, units, len(targets) * self.positions + units
        )

    @property
    def has_valid(self):
        return self.valid is not None and len(self.valid) > 0

    def valid_batches(self, rows: list[int] | None = None):
        rows = list(range(len(self.valid))) if rows is None else rows
        for start in range(0, len(rows), self.per_batch):
            part = rows[start : start + self.per_batch]
            yield self._batch(self.valid.images[part], [self.valid.targets[i] for i in part])

    # model
    def new_model(self):
        init_from = self.config.train.init_from
        if init_from is None:
            return build_model(self.config.model.replace(vocab_size=self.tokenizer.vocab_size))
        model = load_model(init_from)
        if self.tokenizer.vocab_size > model.config.target_vocab_size:
            raise ConfigError(
                f"train.init_from={init_from}: its tokenizer has {self.tokenizer.vocab_size:,} "
                f"tokens but the model's vocabulary {model.config.target_vocab_size:,}: the "
                "tokenizer and weights do not belong together"
            )
        return model

    def loss(self, net, model, batch, device):
        with autocast(device, self.config.train.precision):
            logits = net(batch.pixels, batch.tgt_in)  # (B, T, V)
        out = label_smoothed_cross_entropy(
            logits, batch.tgt_out, self.config.train.label_smoothing, self.model_config.pad_id,
            batch.units, consume_logits=True,
        )  # fmt: skip
        return StepSums(out.loss, out.nll, out.n_tokens, batch.tokens)

    def validate(self, model, device):
        result = validation_sums(self, model, device, self.valid_batches())
        rows = self.captioned_rows()
        captions = greedy_captions(
            model,
            (b.pixels.to(device) for b in self.valid_batches(rows)),
            self.tokenizer.decode,
            self.config.data.max_len,
        )
        scores = caption_scores(captions, [self.valid.texts[i] for i in rows])
        return {**result, "valid_exact_match": scores.exact_match, "valid_chrf": scores.chrf}

    def captioned_rows(self) -> list[int]:
        """The validation images greedy-decoded: train.valid_questions of them (0 = all), spread
        evenly over the split (a split sorted by name gives names from a to z)."""
        n = len(self.valid)
        m = min(n, self.config.train.valid_questions or n)
        return sorted({round(k * (n - 1) / max(m - 1, 1)) for k in range(m)})

    def describe(self, result):
        return (
            f"valid loss {result['valid_loss']:.4f}  ppl {result['valid_ppl']:.2f}  "
            f"exact {result['valid_exact_match']:.1%}  chrF {result['valid_chrf']:.1f}"
        )

    def save_files(self):
        return {"tokenizer": self.tokenizer, "decode": self.config.decode}
