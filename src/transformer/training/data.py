"""The training data as the loop sees it: texts read, tokenizers trained or loaded, examples encoded."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..config import ModelConfig, RunConfig
from ..data import corpus as C
from ..data.batching import Batch, Example, batch_indices, collate, encode_examples
from ..data.tokenizer import (
    UNK_ID,
    Tokenizer,
    TokenizerError,
    load_tokenizers,
    save_tokenizers,
    train_tokenizer,
)
from . import distributed as D


@dataclass
class TrainingData:
    """Encoded training and validation examples, their tokenizers, and the batching that the loop uses."""

    source_tokenizer: Tokenizer
    target_tokenizer: Tokenizer
    train: Sequence[Example]
    """A data.corpus.Corpus (memory-mapped) or a list of examples."""
    valid: list[Example]
    batch_tokens: int
    seed: int
    valid_references: list[str] = field(default_factory=list)
    """The validation target lines as read (indexed by Example.line): references for BLEU."""
    sizes: np.ndarray = field(init=False)
    tgt_lengths: np.ndarray = field(init=False)
    src_lengths: np.ndarray | None = field(init=False)

    def __post_init__(self) -> None:
        if isinstance(self.train, C.Corpus):
            self.sizes, self.tgt_lengths, self.src_lengths = self.train.sizes, self.train.tgt_lengths, self.train.src_lengths
        else:
            self.sizes = np.array([e.size for e in self.train], dtype=np.int32)
            self.tgt_lengths = np.array([len(e.tgt) for e in self.train], dtype=np.int32)
            self.src_lengths = None if not self.train or self.train[0].src is None else \
                np.array([len(e.src) for e in self.train], dtype=np.int32)

    @property
    def shared(self) -> bool:
        return self.source_tokenizer is self.target_tokenizer

    @property
    def tokenizers(self) -> Tokenizer | tuple[Tokenizer, Tokenizer]:
        """What save_model takes: one tokenizer when shared, else (source, target)."""
        return self.source_tokenizer if self.shared else (self.source_tokenizer, self.target_tokenizer)

    def train_batches(self, epoch: int) -> Sequence[list[int]]:
        """The epoch's batches (lists of example indices): a pure function of (seed, epoch)."""
        return batch_indices(self.sizes, self.batch_tokens, self.seed, epoch)

    def target_tokens(self, indices: list[int]) -> int:
        """Target tokens the loss counts in a batch (each target plus its </s>)."""
        return int(self.tgt_lengths[indices].sum()) + len(indices)

    def collate(self, indices: list[int], model_config: ModelConfig, split: str = "train") -> Batch:
        examples = self.train if split == "train" else self.valid
        return collate([examples[i] for i in indices], model_config.pad_id, model_config.start_id, model_config.eos_id)

    def valid_batches(self, batch_tokens: int, model_config: ModelConfig) -> Iterator[Batch]:
        sizes = [e.size for e in self.valid]
        for indices in batch_indices(sizes, batch_tokens, 0, 0, shuffle=False):
            yield self.collate(indices, model_config, split="valid")

    def padding_share(self, batches: Sequence[list[int]]) -> float:
        """Share of padded positions among all positions (both sides) of these batches, from the length arrays."""
        real = padded = 0
        for side in (self.tgt_lengths + 1, self.src_lengths):
            if side is None:
                continue
            for batch in batches:
                lengths = side[batch]
                real += int(lengths.sum())
                padded += int(lengths.max()) * len(batch)
        return 1.0 - real / padded if padded else 0.0


TOKENIZER_NAMES = {"bpe": "BPE", "unigram": "Unigram", "word": "word tokenizer", "char": "character tokenizer"}


def tokenizer_cache_key(config: RunConfig) -> dict:
    """What a tokenizer trained from the [data] files depends on."""
    d = config.data
    files = [d.train_src, d.train_tgt] if d.is_translation else [d.train_text]
    return {"format": C.FORMAT, "kind": d.tokenizer, "files": [C.file_key(f) for f in files], "vocab_size": d.vocab_size,
            "min_frequency": d.min_frequency, "shared": d.shared_vocab or not d.is_translation,
            "sample": d.tokenizer_sample}


def train_tokenizers(config: RunConfig, say: Callable[[str], None]) -> tuple[Tokenizer, Tokenizer]:
    """The [data] tokenizer trained on the training files as they stream by (at most data.tokenizer_sample examples),
    kept in the corpus cache, so a second run on the same files and settings loads it."""
    d = config.data
    root = Path(d.cache) if d.cache else C.default_cache_root()
    path = root / f"tokenizer-{C.key_digest(tokenizer_cache_key(config))}"
    if path.is_dir():
        try:
            tokenizers = load_tokenizers(path)
            say(f"trained {TOKENIZER_NAMES[d.tokenizer]}: loaded from {path}")
            return tokenizers
        except TokenizerError:
            pass  # damaged: train again
    targets, sources = (d.train_tgt, d.train_src) if d.is_translation else (d.train_text, None)
    texts = lambda side: C.tokenizer_texts(targets, sources, side, d.tokenizer_sample)  # noqa: E731
    if sources is None or d.shared_vocab:
        src_tok = tgt_tok = train_tokenizer(d.tokenizer, texts("both"), d.vocab_size, d.min_frequency)
    else:
        src_tok = train_tokenizer(d.tokenizer, texts("source"), d.vocab_size, d.min_frequency)
        tgt_tok = train_tokenizer(d.tokenizer, texts("target"), d.vocab_size, d.min_frequency)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    save_tokenizers(tmp, src_tok, tgt_tok)
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)
    return src_tok, tgt_tok


def prepare_only(config: RunConfig, say: Callable[[str], None]) -> C.Corpus:
    """`transformer data prepare`: what `train` would build before its first step (the tokenizer,
    unless train.init_from gives one, and the training corpus's arrays), kept in the cache."""
    d = config.data
    src_tok, tgt_tok = load_tokenizers(config.train.init_from) if config.train.init_from else \
        train_tokenizers(config, say)
    targets, sources = (d.train_tgt, d.train_src) if d.is_translation else (d.train_text, None)
    return C.prepare_corpus(targets, tgt_tok, d.max_len, sources, src_tok if sources else None, d.cache, say=say)


def compare_tokenizers(config: RunConfig, sample: int, say: Callable[[str], None] = lambda _: None) -> list[dict]:
    """`transformer tokenize --compare`: the four kinds trained on (a sample of) the config's
    training data with its vocab_size and min_frequency, measured on its validation text (the
    training sample when it has none): vocabulary, tokens per sentence per side, <unk> share."""
    d = config.data
    targets, sources = (d.train_tgt, d.train_src) if d.is_translation else (d.train_text, None)
    if d.is_translation and d.valid_src:
        eval_sources, eval_targets = read_valid(d.valid_tgt, d.valid_src)
    elif not d.is_translation and d.valid_text:
        eval_sources, eval_targets = read_valid(d.valid_text, None)
    else:
        eval_sources, eval_targets = None, None
    rows = []
    for kind in ("word", "char", "bpe", "unigram"):
        say(f"training the {TOKENIZER_NAMES[kind]} ...")
        shared = sources is None or d.shared_vocab
        texts = lambda side: C.tokenizer_texts(targets, sources, side, sample)  # noqa: E731
        src_tok = train_tokenizer(kind, texts("both" if shared else "source"), d.vocab_size, d.min_frequency) \
            if sources else None
        tgt_tok = src_tok if shared and src_tok else train_tokenizer(kind, texts("target"), d.vocab_size, d.min_frequency)
        if eval_targets is None:
            kept = list(itertools.islice(C.iter_examples(targets, sources), 2000))
            eval_sources = [s for _, s, _ in kept] if sources else None
            eval_targets = [t for _, _, t in kept]
        row = {"tokenizer": kind, "vocab_size": tgt_tok.vocab_size}
        for side, tok, lines in (("source", src_tok, eval_sources), ("target", tgt_tok, eval_targets)):
            if tok is None or not lines:
                continue
            ids = tok.encode_batch(lines)
            n = sum(map(len, ids))
            row[f"{side}_tokens"] = n / len(lines)
            row[f"{side}_unk"] = sum(i == UNK_ID for row_ids in ids for i in row_ids) / max(n, 1)
        rows.append(row)
    return rows


def read_valid(targets: str, sources: str | None) -> tuple[list[str] | None, list[str]]:
    kept = list(C.iter_examples(targets, sources))
    return ([s for _, s, _ in kept] if sources else None), [t for _, _, t in kept]


def prepare_data(config: RunConfig, run_dir: Path, dist: D.DistInfo, say: Callable[[str], None],
                 resume: bool = False) -> TrainingData:
    """Tokenizers (the run dir's on resume, init_from's, or trained on the files), the training
    corpus prepared into memory-mapped arrays (or reused, see data.corpus), validation encoded.

    Under torchrun, rank 0 does the work while the others wait, then every rank maps the same files."""
    d, t = config.data, config.train
    targets, sources = (d.train_tgt, d.train_src) if d.is_translation else (d.train_text, None)

    def get_tokenizers() -> tuple[Tokenizer, Tokenizer]:
        if resume:
            try:
                return load_tokenizers(run_dir)
            except TokenizerError as e:
                raise TokenizerError(f"{e}: every checkpoint holds a copy of the run's tokenizer; copy it back from "
                                     f"{run_dir / 'checkpoints'}/step-*/ into {run_dir}") from None
        if not dist.is_main:
            return load_tokenizers(run_dir)
        if t.init_from:
            src_tok, tgt_tok = load_tokenizers(t.init_from)
        else:
            src_tok, tgt_tok = train_tokenizers(config, say)
            say(f"trained {TOKENIZER_NAMES[d.tokenizer]}: vocabulary {src_tok.vocab_size:,}" +
                ("" if src_tok is tgt_tok else f" (source) and {tgt_tok.vocab_size:,} (target)"))
        save_tokenizers(run_dir, src_tok, tgt_tok)
        return src_tok, tgt_tok

    def corpus(quiet: bool = False) -> C.Corpus:
        return C.prepare_corpus(targets, tgt_tok, d.max_len, sources, src_tok if sources else None, d.cache,
                                say=(lambda _: None) if quiet else say)

    if dist.is_main:
        src_tok, tgt_tok = get_tokenizers()
        train = corpus()
    D.barrier(dist)  # rank 0 has written the tokenizers and the arrays: the others read them
    if not dist.is_main:
        src_tok, tgt_tok = get_tokenizers()
        train = corpus(quiet=True)
    dropped = train.dropped
    if dropped["empty"]:
        say(f"dropped {dropped['empty']:,} empty line(s) of the training data")
    if dropped["too_long"]:
        say(f"dropped {dropped['too_long']:,} training example(s) longer than data.max_len={d.max_len} tokens")

    valid, valid_targets = [], []
    valid_files = (d.valid_tgt, d.valid_src) if d.is_translation else (d.valid_text, None)
    if valid_files[0]:
        valid_sources, valid_targets = read_valid(*valid_files)
        valid, too_long = encode_examples(valid_targets, tgt_tok, d.max_len, valid_sources,
                                          src_tok if valid_sources else None)
        if too_long:
            say(f"dropped {too_long:,} validation example(s) longer than data.max_len={d.max_len} tokens")
    say(f"data: {len(train):,} training and {len(valid):,} validation examples")
    return TrainingData(src_tok, tgt_tok, train, valid, t.batch_tokens, t.seed, list(valid_targets))
