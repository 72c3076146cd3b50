"""Objectives over target tokens, by teacher forcing with label-smoothed cross entropy (§5.4):

- seq2seq: translation and text-to-text pairs (§5), on an encoder-decoder;
- lm: next-token language modelling, on a decoder-only model (a batch without sources);
- span_corruption: T5's pretraining of an encoder-decoder on one text per line: each text's noise
  spans replaced by sentinels in the input, the target the sentinels with the spans they hide
  (data.noising), then as seq2seq.

Validation: loss, NLL and perplexity per target token (translation: also greedy BLEU on a fixed
sample, training.validation); best/ by loss. Span corruption validates on one fixed corruption of
the validation texts.
"""

from __future__ import annotations

import numpy as np
import torch

from ...config import ConfigError, RunConfig
from ...data.batching import Batch, Example, batch_indices, batch_seed, collate, padding_share
from ...data.noising import corrupt_spans, noise_counts, span_corruption_lengths
from ...data.tokenizer import SENTINEL, Tokenizer
from ...model.build import build_model
from ...model_dir import load_model
from ..corpora import TrainingData
from ..loss import label_smoothed_cross_entropy
from ..validation import evaluate_bleu
from .base import BatchCache, Objective, StepSums, autocast, typical_shape, validation_sums


class Seq2Seq(Objective):
    """Translation (encoder-decoder) or next-token language modelling (decoder-only)."""

    def __init__(self, config: RunConfig, data: TrainingData):
        super().__init__(config)
        self.name = config.objective
        self.data = data

    def batches(self, epoch):
        return self.data.train_batches(epoch)

    def attention_shape(self):
        return typical_shape(self.data.train.sizes, self.config.train.batch_tokens)

    def padding_share(self, batches):
        return self.data.padding_share(batches)

    def units(self, indices, key):
        return self.data.target_tokens(indices, epoch=key[0])

    def collate(self, indices, key):
        return self.data.collate(indices, self.model_config, epoch=key[0])

    @property
    def has_valid(self):
        return bool(self.data.valid)

    def new_model(self):
        if self.config.train.init_from:
            return load_model(self.config.train.init_from)
        data = self.data
        target_vocab = None if data.shared else data.target_tokenizer.vocab_size
        cfg = self.config.model.replace(
            vocab_size=data.source_tokenizer.vocab_size, tgt_vocab_size=target_vocab
        )
        return build_model(cfg)

    def loss(self, net, model, batch, device):
        with autocast(device, self.config.train.precision):
            logits = _forward(net, batch)
        t = self.config.train
        out = label_smoothed_cross_entropy(
            logits,
            batch.tgt_out,
            t.label_smoothing,
            model.config.pad_id,
            batch.n_tokens,
            consume_logits=True,  # the logits serve the loss alone: their buffer takes its gradient
        )
        return StepSums(out.loss, out.nll, out.n_tokens, out.n_tokens)

    def validate(self, model, device):
        batches = self.data.valid_batches(self.config.train.batch_tokens, model.config)
        result = validation_sums(self, model, device, batches)
        return {**result, **evaluate_bleu(model, self.data, self.config)}

    def describe(self, result):
        scores = ""
        if "valid_bleu" in result:
            scores = f"  BLEU {result['valid_bleu']:.2f}  exact {result['valid_exact']:.1%}"
        return (
            f"valid loss {result['valid_loss']:.4f}  nll {result['valid_nll']:.4f}  "
            f"ppl {result['valid_ppl']:.2f}{scores}"
        )

    def save_files(self):
        data = self.config.data
        languages = None
        if data.source_lang is not None:
            languages = {"source": data.source_lang, "target": data.target_lang}
        return {
            "tokenizer": self.data.tokenizers,
            "decode": self.config.decode,
            "languages": languages,
        }


def _forward(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """Logits (B, T, V) for a batch (teacher forcing)."""
    if batch.src is not None:
        return model(batch.src, batch.tgt_in, src_mask=batch.src_mask)
    return model(batch.tgt_in)


def sentinel_ids(tokenizer: Tokenizer) -> list[int]:
    """The tokenizer's sentinels <extra_id_0>, <extra_id_1>, ... in order (as many as it has)."""
    ids = []
    while (i := tokenizer.token_to_id(SENTINEL.format(len(ids)))) is not None:
        ids.append(i)
    return ids


class SpanCorruption(Seq2Seq):
    """T5's span-corruption pretraining of an encoder-decoder on one text per line
    (data.text.train_text).

    Each text is corrupted afresh every epoch (a generator seeded per batch, see the base's rules);
    batches are formed by the corrupted lengths, which follow from each text's length
    (noising.span_corruption_lengths)."""

    name = "span_corruption"

    def __init__(self, config: RunConfig, data: TrainingData):
        super().__init__(config, data)
        self.sentinels = sentinel_ids(data.target_tokenizer)
        t = config.train
        longest = max(
            int(data.train.tgt_lengths.max()) if len(data.train) else 0, config.data.max_len
        )
        needed = noise_counts(longest, t.noise_density, t.mean_span)[
            1
        ]  # the spans of the longest text
        if len(self.sentinels) < needed:
            raise ConfigError(
                f"span corruption of texts up to {longest} tokens needs {needed} sentinel tokens "
                f"({SENTINEL.format(0)} ...) but the tokenizer has {len(self.sentinels)}: train it "
                "here with objective span_corruption (data.sentinels), or lower data.max_len"
            )
        lengths = [
            span_corruption_lengths(int(n), t.noise_density, t.mean_span)
            for n in data.train.tgt_lengths
        ]
        self.sizes = np.array([max(i, o + 1) for i, o in lengths], dtype=np.int64)
        self._cache = BatchCache()
        gen = torch.Generator().manual_seed(0)  # one fixed corruption of the validation texts
        self.valid = [self._corrupt(e.tgt, gen) for e in data.valid]

    def _corrupt(self, ids: list[int], generator: torch.Generator) -> Example:
        t = self.config.train
        inputs, targets = corrupt_spans(
            ids, self.sentinels, generator, t.noise_density, t.mean_span
        )
        return Example(inputs, targets)

    def batches(self, epoch):
        return batch_indices(
            self.sizes, self.config.train.batch_tokens, self.config.train.seed, epoch
        )

    def attention_shape(self):
        return typical_shape(self.sizes, self.config.train.batch_tokens)

    def padding_share(self, batches):
        return padding_share(batches, self.sizes)

    def _batch(self, examples: list[Example]) -> Batch:
        m = self.model_config
        return collate(examples, m.pad_id, m.start_id, m.eos_id)

    def collate(self, indices, key):
        def corrupted() -> Batch:
            gen = torch.Generator().manual_seed(batch_seed(self.config.train.seed, *key))
            return self._batch([self._corrupt(self.data.train[i].tgt, gen) for i in indices])

        return self._cache.get(key, corrupted)

    def units(self, indices, key):
        return self.collate(indices, key).n_tokens  # each target and its </s>

    def validate(self, model, device):
        sizes = [e.size for e in self.valid]
        order = batch_indices(sizes, self.config.train.batch_tokens, 0, 0, shuffle=False)
        batches = (self._batch([self.valid[i] for i in indices]) for indices in order)
        return validation_sums(self, model, device, batches)

    def describe(self, result):
        return (
            f"valid loss {result['valid_loss']:.4f}  nll {result['valid_nll']:.4f}  "
            f"ppl {result['valid_ppl']:.2f}"
        )

    def save_files(self):
        sentinels = " ".join(SENTINEL.format(k) for k in range(len(self.sentinels)))
        return {**super().save_files(), "special_tokens": {"sentinels": sentinels}}
