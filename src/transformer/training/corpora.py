"""The training data as the loop sees it: texts read, tokenizers trained or loaded, examples
encoded.

Which files a run reads is data_files.py's; its tokenizers (trained, cached, loaded, compared)
tokenizing.py's."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..config import OBJECTIVES, ModelConfig, RunConfig
from ..data import corpus as C
from ..data.batching import Batch, Example, batch_indices, collate, encode_examples, padding_share
from ..data.mixture import CorpusView, Mixture
from ..data.tokenizer import (
    Tokenizer,
    TokenizerError,
)
from ..model_dir import load_tokenizers
from . import distributed as D
from .data_files import read_valid, train_files, train_parts, valid_files
from .tokenizing import (
    run_tokenizers,
    train_tokenizers,
)


@dataclass
class TrainingData:
    """Encoded training and validation examples, their tokenizers, and the batching that the loop
    uses."""

    source_tokenizer: Tokenizer
    target_tokenizer: Tokenizer
    train: C.Corpus
    """The training examples, memory-mapped (data.corpus)."""
    valid: list[Example]
    batch_tokens: int
    seed: int
    valid_references: list[str] = field(default_factory=list)
    """The validation target lines as read (indexed by Example.line): references for BLEU."""
    segmentations: list[C.Corpus] = field(default_factory=list)
    """With data.bpe_dropout: the training corpus in several random segmentations, epoch e training
    on segmentations[e % len]; `train` is the first. Empty without BPE-dropout."""
    mixture: Mixture | None = None
    """With several training sources (data.text.train_weights): the examples each epoch draws from
    them; `train` is epoch 0's."""

    def corpus(self, epoch: int) -> C.Corpus | CorpusView:
        """The training corpus epoch `epoch` reads."""
        if self.mixture is not None:
            return self.mixture.epoch(epoch)
        return (
            self.segmentations[epoch % len(self.segmentations)]
            if self.segmentations
            else self.train
        )

    @property
    def shared(self) -> bool:
        return self.source_tokenizer is self.target_tokenizer

    @property
    def tokenizers(self) -> Tokenizer | tuple[Tokenizer, Tokenizer]:
        """What save_model takes: one tokenizer when shared, else (source, target)."""
        return (
            self.source_tokenizer if self.shared else (self.source_tokenizer, self.target_tokenizer)
        )

    def train_batches(self, epoch: int) -> Sequence[list[int]]:
        """The epoch's batches (lists of example indices into corpus(epoch)): a pure function of
        (seed, epoch) and that corpus."""
        return batch_indices(self.corpus(epoch).sizes, self.batch_tokens, self.seed, epoch)

    def target_tokens(self, indices: list[int], epoch: int = 0) -> int:
        """Target tokens the loss counts in a batch of epoch `epoch` (each target plus its </s>)."""
        return int(self.corpus(epoch).tgt_lengths[indices].sum()) + len(indices)

    def collate(
        self, indices: list[int], model_config: ModelConfig, split: str = "train", epoch: int = 0
    ) -> Batch:
        examples = self.corpus(epoch) if split == "train" else self.valid
        return collate(
            [examples[i] for i in indices],
            model_config.pad_id,
            model_config.start_id,
            model_config.eos_id,
        )

    def valid_batches(self, batch_tokens: int, model_config: ModelConfig) -> Iterator[Batch]:
        sizes = [e.size for e in self.valid]
        for indices in batch_indices(sizes, batch_tokens, 0, 0, shuffle=False):
            yield self.collate(indices, model_config, split="valid")

    def padding_share(self, batches: Sequence[list[int]]) -> float:
        """Padding share of epoch 0's batches (with BPE-dropout: of the first segmentation,
        `train`)."""
        return padding_share(batches, self.train.tgt_lengths, self.train.src_lengths)


def prepare_only(config: RunConfig, say: Callable[[str], None]) -> list[C.Corpus]:
    """`transformer data prepare`: what `train` would build before its first step (the tokenizer,
    unless train.init_from gives one, and the training corpus's arrays: one per source of a
    mixture), kept in the cache."""
    src_tok, tgt_tok = (
        load_tokenizers(config.train.init_from)
        if config.train.init_from
        else train_tokenizers(config, say)
    )
    corpora = training_corpora(config, src_tok, tgt_tok, say)
    return corpora if config.data.is_mixture else corpora[:1]


def training_corpora(
    config: RunConfig, src_tok: Tokenizer, tgt_tok: Tokenizer, say: Callable[[str], None]
) -> list[C.Corpus]:
    """The config's training files prepared with these tokenizers (built, or opened from the cache):
    one corpus, one per source of a mixture, or with data.bpe_dropout data.segmentations of them,
    each segmented anew with the merges dropped at random (kept in the cache: a resumed run reads
    the same ones). A masked-LM text takes [CLS] and [SEP] (one more than a language model's <s>):
    one less to its max_len. With data.protect_markup the pairs are read masked (data.markup)."""
    d = config.data
    max_len = d.max_len - OBJECTIVES[config.objective].encoder_tokens
    protect = d.protect_markup
    if d.is_mixture:
        return [
            C.prepare_corpus(
                targets, tgt_tok, max_len, sources, src_tok, d.cache, say=say, protect=protect
            )
            for targets, sources in train_parts(d)
        ]
    targets, sources = train_files(d)
    if not d.bpe_dropout:
        return [
            C.prepare_corpus(
                targets,
                tgt_tok,
                max_len,
                sources,
                src_tok if sources else None,
                d.cache,
                say=say,
                protect=protect,
            )
        ]
    try:
        dropped_tgt = tgt_tok.with_bpe_dropout(d.bpe_dropout)
        dropped_src = dropped_tgt if src_tok is tgt_tok else src_tok.with_bpe_dropout(d.bpe_dropout)
    except TokenizerError as e:
        raise TokenizerError(
            f"{e} (the run's tokenizer{' from train.init_from' if config.train.init_from else ''})"
        ) from None
    say(
        f"data: BPE-dropout {d.bpe_dropout}: {d.segmentations} segmentations of the training "
        f"corpus, epoch e on segmentation e mod {d.segmentations}"
    )
    return [
        C.prepare_corpus(
            targets,
            dropped_tgt,
            max_len,
            sources,
            dropped_src if sources else None,
            d.cache,
            say=say,
            segmentation=k,
            protect=protect,
        )
        for k in range(d.segmentations)
    ]


def prepare_data(
    config: RunConfig,
    run_dir: Path,
    dist: D.DistInfo,
    say: Callable[[str], None],
    resume: bool = False,
) -> TrainingData:
    """Tokenizers (see run_tokenizers), the training corpus prepared into memory-mapped arrays
    (or reused, see data.corpus), validation encoded.

    Under torchrun, rank 0 does the work while the others wait, then every rank maps the same
    files."""
    d, t = config.data, config.train
    if dist.is_main:
        src_tok, tgt_tok = run_tokenizers(config, run_dir, dist, say, resume)
        corpora = training_corpora(config, src_tok, tgt_tok, say)
    D.barrier(dist)  # rank 0 has written the tokenizers and the arrays: the others read them
    if not dist.is_main:
        src_tok, tgt_tok = run_tokenizers(config, run_dir, dist, say, resume)
        corpora = training_corpora(config, src_tok, tgt_tok, say=lambda _: None)
    mixture = Mixture(corpora, d.weights, t.seed) if d.is_mixture else None
    train = corpora[0] if mixture is None else mixture.epoch(0)
    if mixture is not None:
        say(describe_mixture(mixture, [src for src, _ in d.train_sources]))
    dropped = train.dropped
    if dropped["empty"]:
        say(f"dropped {dropped['empty']:,} empty line(s) of the training data")
    longest = [c.dropped["too_long"] for c in corpora]
    too_long = sum(longest) if mixture is not None else max(longest)
    if too_long:
        say(
            f"dropped {too_long:,} training example(s) longer than data.max_len={d.max_len} tokens"
            + (" (the most of any segmentation)" if d.bpe_dropout else "")
        )

    valid, valid_targets = [], []
    if valid_files(d)[0]:
        valid_sources, valid_targets = read_valid(*valid_files(d), d.protect_markup)
        max_len = d.max_len - OBJECTIVES[config.objective].encoder_tokens
        valid, too_long = encode_examples(
            valid_targets, tgt_tok, max_len, valid_sources, src_tok if valid_sources else None
        )
        if too_long:
            say(
                f"dropped {too_long:,} validation example(s) longer than "
                f"data.max_len={d.max_len} tokens"
            )
    say(f"data: {len(train):,} training and {len(valid):,} validation examples")
    return TrainingData(
        src_tok,
        tgt_tok,
        train,
        valid,
        t.batch_tokens,
        t.seed,
        list(valid_targets),
        corpora if d.bpe_dropout else [],
        mixture,
    )


def describe_mixture(mixture: Mixture, names: list[str]) -> str:
    """The run's header line for a mixture: each source's examples, weight and share of an
    epoch."""
    counts = mixture.counts()
    total = sum(counts) or 1
    parts = [
        f"{name} {len(part):,} x {weight:g} = {n:,} ({n / total:.0%})"
        for name, part, weight, n in zip(names, mixture.parts, mixture.weights, counts, strict=True)
    ]
    return f"data: a mixture, per epoch: {'; '.join(parts)}"
