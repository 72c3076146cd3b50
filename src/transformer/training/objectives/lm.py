"""lm on packed text: next-token prediction over blocks of one token stream, as GPT-style trainers
train language models (nanoGPT, Hugging Face's run_clm, fairseq's --sample-break-mode none).

The training text is one stream (data.stream: each document <s> ... </s>, data.text.documents), read
each epoch as a ring from a drawn offset, in blocks of data.text.block_size positions in a drawn
order, data.batch_tokens // block_size blocks a batch. Validation reads the validation text's stream
once, from its start, in blocks (the same every time): loss, NLL and perplexity per token, and NLL
per character (nats; bits per character = that / ln 2), which compares models with other
tokenizers. best/ by validation loss.

With data.text.pack = false a language model reads one example per line instead (seq2seq.Seq2Seq).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ...config import ConfigError, RunConfig
from ...data import stream as S
from ...data.batching import Batch
from ...model.build import build_model
from ...model_dir import load_config, load_model
from .. import distributed as D
from ..tokenizing import run_tokenizers
from .base import BatchCache, Objective, validation_sums
from .seq2seq import Seq2Seq


class PackedLM(Objective):
    """A decoder-only language model on blocks of a token stream (see the module doc)."""

    name = "lm"

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        dist: D.DistInfo,
        say: Callable[[str], None],
        resume: bool = False,
    ):
        super().__init__(config)
        d, t = config.data, config.train
        positions = (
            load_config(t.init_from).max_positions if t.init_from else config.model.max_positions
        )
        self.block_size = d.text.block_size or positions
        self.rows = max(1, t.batch_tokens // self.block_size)
        tokenizer = run_tokenizers(config, run_dir, dist, say, resume)[1]
        self.tokenizer = tokenizer
        m = config.model
        self.bos, self.eos, self.pad = m.bos_id, m.eos_id, m.pad_id
        if dist.is_main:
            self.train, self.valid = self._streams(say)
        D.barrier(dist)  # rank 0 has written the streams: the others map them
        if not dist.is_main:
            self.train, self.valid = self._streams(lambda _: None)
        say(
            f"data: {d.text.train_text} as one stream of {len(self.train):,} tokens "
            f"({self.train.documents:,} document(s) of data.documents={d.text.documents!r}, "
            f"{self.train.chars / max(len(self.train), 1):.2f} characters per token), blocks of "
            f"{self.block_size} tokens, {self.rows} a batch"
            + (f"; validation {len(self.valid):,} tokens" if self.valid else "")
        )
        self._cache = BatchCache()
        self._drawn: tuple[int, tuple[int, np.ndarray]] | None = None

    def _streams(self, say: Callable[[str], None]) -> tuple[S.TokenStream, S.TokenStream | None]:
        """The training and validation (None without valid_text) streams, prepared or opened."""
        d = self.config.data

        def stream(path: str) -> S.TokenStream:
            return S.prepare_stream(
                path, self.tokenizer, d.text.documents, self.bos, self.eos, d.cache, say
            )

        return stream(d.text.train_text), (stream(d.text.valid_text) if d.text.valid_text else None)

    # data
    def _epoch(self, epoch: int) -> tuple[int, np.ndarray]:
        """(offset, order) of the epoch's blocks (data.stream.epoch_blocks), drawn once."""
        if self._drawn is None or self._drawn[0] != epoch:
            n, seed = len(self.train), self.config.train.seed
            self._drawn = (epoch, S.epoch_blocks(n, self.block_size, seed, epoch))
        return self._drawn[1]

    def batches(self, epoch):
        return S.BlockBatches(self._epoch(epoch)[1], self.rows)

    def padding_share(self, batches):
        return 1 - len(self.train) / (len(batches.order) * self.block_size)

    def attention_shape(self):
        return self.rows, self.block_size

    def _batch(self, spans: list[tuple[int, int]], stream: S.TokenStream) -> Batch:
        x = torch.full((len(spans), self.block_size), self.pad, dtype=torch.long)
        y = torch.full_like(x, self.pad)
        for row, (start, positions) in enumerate(spans):
            block = S.read_block(stream.ids, start, positions)  # validation's never wrap
            inputs, targets = S.targets(block, self.bos, self.pad)
            x[row, :positions] = torch.from_numpy(inputs)
            y[row, :positions] = torch.from_numpy(targets)
        width = max(positions for _, positions in spans)
        x, y = x[:, :width], y[:, :width]
        return Batch(None, None, x, y, int((y != self.pad).sum()))

    def collate(self, indices, key):
        def make() -> Batch:
            n, offset = len(self.train), self._epoch(key[0])[0]
            spans = [S.block_span(n, self.block_size, offset, k) for k in indices]
            return self._batch(spans, self.train)

        return self._cache.get(key, make)

    def units(self, indices, key):
        return self.collate(indices, key).n_tokens

    @property
    def has_valid(self):
        return self.valid is not None

    # model
    def new_model(self):
        if self.config.train.init_from:
            model = load_model(self.config.train.init_from)
            if self.block_size > model.config.max_positions and model.config.positional in (
                "sinusoidal",
                "learned",
            ):
                raise ConfigError(
                    f"data.block_size={self.block_size} exceeds the max_positions="
                    f"{model.config.max_positions} of train.init_from: lower data.block_size"
                )
            return model
        return build_model(self.config.model.replace(vocab_size=self.tokenizer.vocab_size))

    loss = Seq2Seq.loss  # teacher forcing over the block's targets, as a per-line language model

    def valid_batches(self) -> list[Batch]:
        spans = S.valid_blocks(len(self.valid), self.block_size)
        return [
            self._batch(spans[i : i + self.rows], self.valid)
            for i in range(0, len(spans), self.rows)
        ]

    def validate(self, model, device):
        batches = self.valid_batches()
        result = validation_sums(self, model, device, batches)
        tokens = sum(b.n_tokens for b in batches)
        result["valid_nll_per_char"] = result["valid_nll"] * tokens / max(self.valid.chars, 1)
        return result

    def describe(self, result):
        return (
            f"valid loss {result['valid_loss']:.4f}  nll {result['valid_nll']:.4f}  "
            f"ppl {result['valid_ppl']:.2f}  "
            f"bits/char {result['valid_nll_per_char'] / math.log(2):.4f}"
        )

    def save_files(self):
        return {"tokenizer": self.tokenizer, "decode": self.config.decode}
