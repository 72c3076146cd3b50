"""The training data as the loop sees it: texts read, tokenizers trained or loaded, examples encoded."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..config import ModelConfig, RunConfig
from ..data.batching import Batch, Example, batch_indices, collate, encode_examples, padding_share
from ..data.text import read_monolingual, read_parallel
from ..data.tokenizer import Tokenizer, TokenizerError, load_tokenizers, save_tokenizers, train_bpe
from . import distributed as D


@dataclass
class TrainingData:
    """Encoded training and validation examples, their tokenizers, and the batching that the loop uses."""

    source_tokenizer: Tokenizer
    target_tokenizer: Tokenizer
    train: list[Example]
    valid: list[Example]
    batch_tokens: int
    seed: int
    valid_references: list[str] = field(default_factory=list)
    """The validation target lines as read (indexed by Example.line): references for BLEU."""
    sizes: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.sizes = [e.size for e in self.train]

    @property
    def shared(self) -> bool:
        return self.source_tokenizer is self.target_tokenizer

    @property
    def tokenizers(self) -> Tokenizer | tuple[Tokenizer, Tokenizer]:
        """What save_model takes: one tokenizer when shared, else (source, target)."""
        return self.source_tokenizer if self.shared else (self.source_tokenizer, self.target_tokenizer)

    def train_batches(self, epoch: int) -> list[list[int]]:
        """The epoch's batches (lists of example indices): a pure function of (seed, epoch)."""
        return batch_indices(self.sizes, self.batch_tokens, self.seed, epoch)

    def target_tokens(self, indices: list[int]) -> int:
        """Target tokens the loss counts in a batch (each target plus its </s>)."""
        return sum(len(self.train[i].tgt) + 1 for i in indices)

    def collate(self, indices: list[int], model_config: ModelConfig, split: str = "train") -> Batch:
        examples = self.train if split == "train" else self.valid
        return collate([examples[i] for i in indices], model_config.pad_id, model_config.start_id, model_config.eos_id)

    def valid_batches(self, batch_tokens: int, model_config: ModelConfig) -> Iterator[Batch]:
        sizes = [e.size for e in self.valid]
        for indices in batch_indices(sizes, batch_tokens, 0, 0, shuffle=False):
            yield self.collate(indices, model_config, split="valid")

    def padding_share(self, batches: list[list[int]]) -> float:
        return padding_share(batches, self.train)


def prepare_data(config: RunConfig, run_dir: Path, dist: D.DistInfo, say: Callable[[str], None],
                 resume: bool = False) -> TrainingData:
    """Read the [data] files, get tokenizers (run dir on resume, init_from's, or newly trained), encode."""
    d, t = config.data, config.train
    if d.is_translation:
        text = read_parallel(d.train_src, d.train_tgt)
        sources, targets, dropped = text.source, text.target, text.dropped_empty
        valid = read_parallel(d.valid_src, d.valid_tgt) if d.valid_src else None
        valid_sources, valid_targets = (valid.source, valid.target) if valid else (None, [])
    else:
        targets, dropped = read_monolingual(d.train_text)
        sources = None
        valid_targets = read_monolingual(d.valid_text)[0] if d.valid_text else []
        valid_sources = None
    if dropped:
        say(f"dropped {dropped:,} empty line(s) of the training data")

    if resume:
        try:
            src_tok, tgt_tok = load_tokenizers(run_dir)
        except TokenizerError as e:
            raise TokenizerError(f"{e}: every checkpoint holds a copy of the run's tokenizer; copy it back from "
                                 f"{run_dir / 'checkpoints'}/step-*/ into {run_dir}") from None
    elif t.init_from:
        src_tok, tgt_tok = load_tokenizers(t.init_from)
        if dist.is_main:
            save_tokenizers(run_dir, src_tok, tgt_tok)
    else:
        if dist.is_main:
            if sources is None or d.shared_vocab:
                src_tok = train_bpe((sources or []) + targets, d.vocab_size, d.min_frequency)
                tgt_tok = src_tok
            else:
                src_tok = train_bpe(sources, d.vocab_size, d.min_frequency)
                tgt_tok = train_bpe(targets, d.vocab_size, d.min_frequency)
            save_tokenizers(run_dir, src_tok, tgt_tok)
            say(f"trained BPE: vocabulary {src_tok.vocab_size:,}" +
                ("" if src_tok is tgt_tok else f" (source) and {tgt_tok.vocab_size:,} (target)"))
        D.barrier(dist)
        if not dist.is_main:
            src_tok, tgt_tok = load_tokenizers(run_dir)

    train, too_long = encode_examples(targets, tgt_tok, d.max_len, sources, src_tok if sources else None)
    if too_long:
        say(f"dropped {too_long:,} training example(s) longer than data.max_len={d.max_len} tokens")
    if not train:
        raise ValueError(f"no training example is at most data.max_len={d.max_len} tokens long: raise data.max_len")
    valid = []
    if valid_targets:
        valid, too_long = encode_examples(valid_targets, tgt_tok, d.max_len, valid_sources,
                                          src_tok if valid_sources else None)
        if too_long:
            say(f"dropped {too_long:,} validation example(s) longer than data.max_len={d.max_len} tokens")
    say(f"data: {len(train):,} training and {len(valid):,} validation examples")
    return TrainingData(src_tok, tgt_tok, train, valid, t.batch_tokens, t.seed, list(valid_targets))
