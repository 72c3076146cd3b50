"""The encoder family's objectives share [CLS] text [SEP] rows, the run's special-token record and
the way a pretrained encoder is put under new heads; masked-LM pretraining is here, the
classifiers in classify.py.

mlm (BERT's masked-LM, Devlin et al. 2019 §3.1): tokens chosen and corrupted as data.noising says
(a generator seeded per batch), cross entropy on the chosen positions only, the head run on those
positions alone. Validation on one fixed masking of the validation texts: loss, perplexity and
masked-token accuracy; best/ by loss.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ...config import ConfigError, RunConfig
from ...data.batching import batch_indices, batch_seed, pad_rows, padding_share, to_device
from ...data.noising import IGNORE, mask_tokens
from ...data.tokenizer import EncoderTokens, Tokenizer
from ...model.build import build_model, tie_weights
from ...model.transformer import EncoderOnly
from ...model_dir import load_model
from ...model_records import load_special_tokens
from .. import distributed as D
from ..checkpoint import step_dirs
from ..corpora import TrainingData
from ..tokenizing import run_tokenizers
from .base import BatchCache, Objective, StepSums, autocast, validation_sums


@dataclass
class EncoderBatch:
    """[CLS] text [SEP] rows, right-padded: ids and mask (B, L); MLM labels (B, L) or class
    labels (B,)."""

    ids: torch.Tensor
    mask: torch.Tensor
    labels: torch.Tensor
    units: int
    tokens: int

    def to(self, device) -> EncoderBatch:
        return EncoderBatch(
            to_device(self.ids, device),
            to_device(self.mask, device),
            to_device(self.labels, device),
            self.units,
            self.tokens,
        )


def encoder_model(
    config: RunConfig, tokenizer: Tokenizer, tokens: EncoderTokens, heads: dict
) -> EncoderOnly:
    """A fresh encoder from [model] with these heads, or train.init_from's encoder under them (see
    pretrained_under)."""
    init_from = config.train.init_from
    if init_from is None:
        cfg = config.model.replace(
            vocab_size=tokenizer.vocab_size,
            pad_id=tokens.pad,
            bos_id=tokens.cls,
            eos_id=tokens.sep,
            **heads,
        )
        return build_model(cfg)
    init = load_model(init_from)
    if tokenizer.vocab_size > init.config.vocab_size:
        raise ConfigError(
            f"train.init_from={init_from}: its tokenizer has {tokenizer.vocab_size:,} tokens but "
            f"the model's vocab_size is {init.config.vocab_size:,}: the tokenizer and weights do "
            "not belong together"
        )
    return pretrained_under(init, heads, init_from)


def pretrained_under(init: EncoderOnly, heads: dict, init_from: str) -> EncoderOnly:
    """The pretrained encoder `init` rebuilt with these heads: every tensor the new model has under
    the same name is copied (a shape mismatch is an error), except a classifier's, which is always
    new (so are heads the pretrained model lacks)."""
    model = build_model(init.config.replace(**heads))
    theirs, mine = init.state_dict(), model.state_dict()
    copied = {
        name: tensor
        for name, tensor in theirs.items()
        if name in mine and not name.startswith("pooler.classifier.")
    }
    for name, tensor in copied.items():
        if tensor.shape != mine[name].shape:
            raise ConfigError(
                f"train.init_from={init_from}: {name} has shape {tuple(tensor.shape)}, "
                f"the new model {tuple(mine[name].shape)}"
            )
    model.load_state_dict(copied, strict=False)
    tie_weights(model)
    return model


class EncoderObjective(Objective):
    """An objective on a text encoder: its tokenizer and special tokens ([CLS], [SEP], [PAD],
    [MASK])."""

    def __init__(self, config: RunConfig, tokenizer: Tokenizer, init_dir: Path | None):
        super().__init__(config)
        self.tokenizer = tokenizer
        self.tokens = EncoderTokens(tokenizer, load_special_tokens(init_dir) if init_dir else None)

    def save_files(self):
        return {
            "tokenizer": self.tokenizer,
            "decode": self.config.decode,
            "special_tokens": self.tokens.record(),
        }


class TextRows:
    """What the objectives with one unit per row ([CLS] text [SEP], a window) share: rows batched
    by tokens from self.sizes (each row's length with its special tokens)."""

    def batches(self, epoch):
        return batch_indices(
            self.sizes, self.config.train.batch_tokens, self.config.train.seed, epoch
        )

    def padding_share(self, batches):
        return padding_share(batches, self.sizes - 1)

    def units(self, indices, key):
        return len(indices)


def run_tokenizer(
    config: RunConfig, run_dir: Path, dist: D.DistInfo, say: Callable[[str], None], resume: bool
) -> Tokenizer:
    """The run's one tokenizer (tokenizing.run_tokenizers): rank 0 trains or loads it first, the
    other processes then read what it wrote."""
    if dist.is_main:
        tokenizer, _ = run_tokenizers(config, run_dir, dist, say, resume)
    D.barrier(dist)
    if not dist.is_main:
        tokenizer, _ = run_tokenizers(config, run_dir, dist, say, resume)
    return tokenizer


def init_dir(config: RunConfig, run_dir: Path, resume: bool) -> Path | None:
    """Where the run's special-token record comes from: the pretrained model's (init_from), or the
    newest checkpoint's on resume; None: the tokenizer was trained here with ENCODER_SPECIALS."""
    if resume and step_dirs(run_dir):
        return step_dirs(run_dir)[-1]
    return Path(config.train.init_from) if config.train.init_from else None


class MaskedLM(EncoderObjective):
    """BERT's masked-LM pretraining on one text per line (data.text.train_text)."""

    name = "mlm"

    def __init__(self, config: RunConfig, data: TrainingData, init_dir: Path | None = None):
        super().__init__(config, data.target_tokenizer, init_dir)
        if self.tokens.mask is None:
            raise ConfigError(
                "the tokenizer has no [MASK] token: masked-LM pretraining needs one "
                "(train the tokenizer here, or start from a BERT-style model)"
            )
        self.data = data
        self.sizes = data.train.sizes + 1  # [CLS] ids [SEP]: one more than the corpus's <s> ids
        self.special = torch.tensor(sorted(self.tokens.ids))
        self._cache = BatchCache()

    def batches(self, epoch):
        return batch_indices(
            self.sizes, self.config.train.batch_tokens, self.config.train.seed, epoch
        )

    def padding_share(self, batches):
        return padding_share(batches, self.data.train.tgt_lengths + 1)

    def _mask(self, rows: list[list[int]], seed: int) -> EncoderBatch:
        ids, mask = pad_rows([self.tokens.wrap(r) for r in rows], self.tokens.pad)  # (B, L) each
        generator = torch.Generator().manual_seed(seed)
        vocab = self.model_config.vocab_size if self.model_config else self.tokenizer.vocab_size
        inputs, labels = mask_tokens(
            ids, self.special, self.tokens.mask, vocab, self.config.train.mlm_probability, generator
        )
        return EncoderBatch(inputs, mask, labels, int((labels != IGNORE).sum()), int(mask.sum()))

    def collate(self, indices, key):
        seed = batch_seed(self.config.train.seed, *key)
        return self._cache.get(
            key, lambda: self._mask([self.data.train[i].tgt for i in indices], seed)
        )

    def units(self, indices, key):
        return self.collate(indices, key).units

    @property
    def has_valid(self):
        return bool(self.data.valid)

    def new_model(self):
        heads = dict(mlm_head=True, pooler=False, n_classes=0)
        return encoder_model(self.config, self.tokenizer, self.tokens, heads)

    def loss(self, net, model, batch, device):
        chosen = batch.labels != IGNORE  # (B, L)
        with autocast(device, self.config.train.precision):
            hidden = net(batch.ids, attention_mask=batch.mask)  # (B, L, C)
            logits = model.mlm_head(
                hidden[chosen]
            )  # (N, V): the head runs on the chosen positions only
        target = batch.labels[chosen]
        nll = F.cross_entropy(logits.float(), target, reduction="sum")
        eps = self.config.train.label_smoothing
        loss = (
            F.cross_entropy(logits.float(), target, reduction="sum", label_smoothing=eps)
            if eps
            else nll
        )
        return StepSums(loss, nll, batch.units, batch.tokens, logits.detach())

    def validate(self, model, device):
        """On one fixed masking of the validation texts (the same at every validation)."""
        sizes = [e.size + 1 for e in self.data.valid]
        order = batch_indices(sizes, self.config.train.batch_tokens, 0, 0, shuffle=False)
        batches = (
            self._mask([self.data.valid[i].tgt for i in indices], seed=number)
            for number, indices in enumerate(order)
        )
        correct = units = 0.0

        def count(batch: EncoderBatch, out: StepSums) -> None:
            nonlocal correct, units
            correct += int((out.logits.argmax(-1) == batch.labels[batch.labels != IGNORE]).sum())
            units += out.units

        result = validation_sums(self, model, device, batches, count)
        return {**result, "valid_accuracy": correct / units}

    def describe(self, result):
        return (
            f"valid loss {result['valid_loss']:.4f}  ppl {result['valid_ppl']:.2f}  "
            f"masked-token accuracy {result['valid_accuracy']:.1%}"
        )
