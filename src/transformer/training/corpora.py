"""The training data as the loop sees it: texts read, tokenizers trained or loaded, examples
encoded."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..config import DataConfig, ModelConfig, RunConfig
from ..data import corpus as C
from ..data import text as T
from ..data.batching import Batch, Example, batch_indices, collate, encode_examples, padding_share
from ..data.stream import stream_texts
from ..data.tokenizer import (
    ENCODER_SPECIALS,
    SPECIAL_TOKENS,
    UNK_ID,
    Tokenizer,
    TokenizerError,
    sentinel_tokens,
    train_tokenizer,
)
from ..model_dir import load_tokenizers, save_tokenizers
from . import distributed as D


def train_parts(d: DataConfig) -> list[tuple[str, str | None]]:
    """(targets, sources) of each training source: one, or one per file of a mixture
    (data.train_weights); sources None for a language model (for a classifier, the TSV file: its
    texts are the targets; text-to-text pairs: the TSV's two columns, data.text.TsvColumn)."""
    if d.train_pairs is not None:
        return [(T.TsvColumn(d.train_pairs, 1), T.TsvColumn(d.train_pairs, 0))]
    if d.is_translation:
        return [(tgt, src) for src, tgt in d.train_sources]
    if d.train_audio is not None:  # the transcripts: clip<TAB>voice<TAB>text
        return [(str(Path(d.train_audio) / "transcripts.tsv"), None)]
    return [((d.train_text or d.train_tsv or d.train_squad), None)]


def train_files(d: DataConfig) -> tuple[str, str | None]:
    """(targets, sources) of the training data when it is one source (see train_parts)."""
    parts = train_parts(d)
    if len(parts) > 1:
        raise ValueError("a mixture of training files: use train_parts")
    return parts[0]


def valid_files(d: DataConfig) -> tuple[str | tuple[str, ...] | None, str | tuple | None]:
    """(targets, sources) of the validation data; targets None when there is none. Translation
    files may be lists, read one after the other (read_valid)."""
    if d.valid_pairs is not None:
        return T.TsvColumn(d.valid_pairs, 1), T.TsvColumn(d.valid_pairs, 0)
    if d.is_translation:
        return d.valid_tgt, d.valid_src
    return (d.valid_text or d.valid_tsv), None


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
    mixture: C.Mixture | None = None
    """With several training sources (data.train_weights): the examples each epoch draws from
    them; `train` is epoch 0's."""

    def corpus(self, epoch: int) -> C.Corpus | C.CorpusView:
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


TOKENIZER_NAMES = {
    "word": "word tokenizer",
    "char": "character tokenizer",
    "bpe": "BPE",
    "unigram": "Unigram",
}
"""Each of config's TOKENIZER_KINDS by name, in the order compare_tokenizers shows them."""


def special_tokens(config: RunConfig) -> tuple[str, ...]:
    """The special tokens a trained tokenizer starts with: BERT's for the encoder family's
    objectives, ours followed by T5's sentinels for span corruption."""
    if config.objective == "span_corruption":
        return SPECIAL_TOKENS + sentinel_tokens(config.data.sentinels)
    return ENCODER_SPECIALS if config.objective in ("mlm", "classify", "qa") else SPECIAL_TOKENS


def tokenizer_cache_key(config: RunConfig) -> dict:
    """What a tokenizer trained from the [data] files depends on."""
    d = config.data
    key = {
        "format": C.FORMAT,
        "kind": d.tokenizer,
        "files": [C.file_key(f) for part in train_parts(d) for f in part if f],
        "vocab_size": d.vocab_size,
        "min_frequency": d.min_frequency,
        "shared": d.shared_vocab or not d.is_translation,
        "sample": d.tokenizer_sample,
    }
    if d.is_mixture:
        key["weights"] = list(d.weights)
    if special_tokens(config) != SPECIAL_TOKENS:
        key["specials"] = list(special_tokens(config))
    if d.train_tsv:
        key["labelled"] = True
    if d.train_squad:
        key["squad"] = True
    if d.train_audio:
        key["audio"] = True
    if config.packed:
        key["documents"] = d.documents
    return key


def _train_pair(config: RunConfig, kind: str, sample: int) -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizers of this kind trained on the training stream: one object for a
    shared vocabulary (and for a language model, which has only targets)."""
    d = config.data
    parts = train_parts(d)
    sources = parts[0][1]
    specials = special_tokens(config)
    if d.train_tsv:
        texts = lambda side: T.labelled_texts(d.train_tsv, sample)  # noqa: E731
    elif d.train_squad:
        texts = lambda side: squad_texts(d.train_squad, sample)  # noqa: E731
    elif d.train_audio:
        texts = lambda side: transcript_texts(sources_of_audio(d), sample)  # noqa: E731
    elif config.packed:  # running text: the pieces the stream is encoded in, line breaks kept
        texts = lambda side: stream_texts(d.train_text, d.documents, sample)  # noqa: E731
    else:
        texts = lambda side: mixture_texts(parts, d.weights, side, sample)  # noqa: E731
    if sources is None or d.shared_vocab:
        tok = train_tokenizer(kind, texts("both"), d.vocab_size, d.min_frequency, specials)
        return tok, tok
    return (
        train_tokenizer(kind, texts("source"), d.vocab_size, d.min_frequency, specials),
        train_tokenizer(kind, texts("target"), d.vocab_size, d.min_frequency, specials),
    )


def squad_texts(path: str, sample: int) -> Iterator[str]:
    """A SQuAD file's questions and distinct contexts (at most `sample` of them; 0: all), for the
    tokenizer."""
    from ..data.squad import read_squad

    seen: set[str] = set()
    texts = []
    for q in read_squad(path):
        texts.append(q.question)
        if q.context not in seen:
            seen.add(q.context)
            texts.append(q.context)
    return iter(texts[:sample] if sample else texts)


def sources_of_audio(d: DataConfig) -> Path:
    return Path(d.train_audio) / "transcripts.tsv"


def transcript_texts(path: Path, sample: int) -> Iterator[str]:
    """The transcripts (last column) of a speech folder's transcripts.tsv, for the tokenizer."""
    if not path.is_file():
        raise T.DataError(
            f"{path} not found: give data.train_audio a folder that `transformer data speech` wrote"
        )
    texts = [line.rsplit("\t", 1)[-1] for line in path.read_text(encoding="utf-8").splitlines()]
    return iter(texts[:sample] if sample else texts)


def mixture_texts(
    parts: list[tuple[str, str | None]], weights: Sequence[float], side: str, sample: int
) -> Iterator[str]:
    """data.text.tokenizer_texts over each training source in turn; with sample > 0, each source
    gives its share of the sample by weight x examples, so the vocabulary follows the mixture a
    run trains on."""
    if len(parts) == 1:
        yield from T.tokenizer_texts(*parts[0], side, sample)
        return
    sizes = [sum(1 for _ in T.iter_examples(t, s)) for t, s in parts]
    total = sum(w * n for w, n in zip(weights, sizes, strict=True))
    for (targets, sources), w, n in zip(parts, weights, sizes, strict=True):
        share = min(n, max(1, round(sample * w * n / total))) if sample else 0
        if w > 0:
            yield from T.tokenizer_texts(targets, sources, side, share)


def train_tokenizers(config: RunConfig, say: Callable[[str], None]) -> tuple[Tokenizer, Tokenizer]:
    """The [data] tokenizer trained on the training files as they stream by (at most
    data.tokenizer_sample examples), kept in the corpus cache, so a second run on the same files
    and settings loads it."""
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
    src_tok, tgt_tok = _train_pair(config, d.tokenizer, d.tokenizer_sample)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    save_tokenizers(tmp, src_tok, tgt_tok)
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)
    return src_tok, tgt_tok


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
    one less to its max_len."""
    d = config.data
    max_len = d.max_len - (config.objective == "mlm")
    if d.is_mixture:
        return [
            C.prepare_corpus(targets, tgt_tok, max_len, sources, src_tok, d.cache, say=say)
            for targets, sources in train_parts(d)
        ]
    targets, sources = train_files(d)
    if not d.bpe_dropout:
        return [
            C.prepare_corpus(
                targets, tgt_tok, max_len, sources, src_tok if sources else None, d.cache, say=say
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
        )
        for k in range(d.segmentations)
    ]


def compare_tokenizers(
    config: RunConfig, sample: int, say: Callable[[str], None] = lambda _: None
) -> list[dict]:
    """`transformer tokenize --compare`: the four kinds trained on (a sample of) the config's
    training data with its vocab_size and min_frequency, measured on its validation text (the
    training sample when it has none): vocabulary, tokens per sentence per side, <unk> share."""
    parts = train_parts(config.data)
    targets, sources = parts[0]
    valid_targets, valid_sources = valid_files(config.data)
    eval_sources, eval_targets = (
        read_valid(valid_targets, valid_sources) if valid_targets else (None, None)
    )
    rows = []
    for kind in TOKENIZER_NAMES:
        say(f"training the {TOKENIZER_NAMES[kind]} ...")
        src_tok, tgt_tok = _train_pair(config, kind, sample)
        if sources is None:
            src_tok = None
        if eval_targets is None:
            kept = list(itertools.islice(T.iter_examples(targets, sources), 2000))
            eval_sources = [s for _, s, _ in kept] if sources else None
            eval_targets = [t for _, _, t in kept]
        row = {"tokenizer": kind, "vocab_size": tgt_tok.vocab_size}
        for side, tok, lines in (
            ("source", src_tok, eval_sources),
            ("target", tgt_tok, eval_targets),
        ):
            if tok is None or not lines:
                continue
            ids = tok.encode_batch(lines)
            n = sum(map(len, ids))
            row[f"{side}_tokens"] = n / len(lines)
            row[f"{side}_unk"] = sum(i == UNK_ID for row_ids in ids for i in row_ids) / max(n, 1)
        rows.append(row)
    return rows


def read_valid(
    targets: str | tuple[str, ...], sources: str | tuple[str, ...] | None
) -> tuple[list[str] | None, list[str]]:
    """(sources, targets) of the validation files, a list of files read one after the other."""
    if isinstance(targets, tuple):
        pairs = zip(targets, sources or [None] * len(targets), strict=True)
        read = [read_valid(t, s) for t, s in pairs]
        return (
            None if sources is None else [s for r in read for s in r[0]],
            [t for r in read for t in r[1]],
        )
    kept = list(T.iter_examples(targets, sources))
    return ([s for _, s, _ in kept] if sources else None), [t for _, _, t in kept]


def run_tokenizers(
    config: RunConfig,
    run_dir: Path,
    dist: D.DistInfo,
    say: Callable[[str], None],
    resume: bool = False,
) -> tuple[Tokenizer, Tokenizer]:
    """The run's (source, target) tokenizers: the run dir's on resume (and on ranks other than 0,
    which call this after rank 0 has), init_from's, or trained on the files; written to run_dir."""
    d, t = config.data, config.train
    if resume:
        try:
            return load_tokenizers(run_dir)
        except TokenizerError as e:
            raise TokenizerError(
                f"{e}: every checkpoint holds a copy of the run's tokenizer; copy it back from "
                f"{run_dir / 'checkpoints'}/step-*/ into {run_dir}"
            ) from None
    if not dist.is_main:
        return load_tokenizers(run_dir)
    if t.init_from:
        src_tok, tgt_tok = load_tokenizers(t.init_from)
    else:
        src_tok, tgt_tok = train_tokenizers(config, say)
        say(
            f"trained {TOKENIZER_NAMES[d.tokenizer]}: vocabulary {src_tok.vocab_size:,}"
            + ("" if src_tok is tgt_tok else f" (source) and {tgt_tok.vocab_size:,} (target)")
        )
    save_tokenizers(run_dir, src_tok, tgt_tok)
    return src_tok, tgt_tok


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
    mixture = C.Mixture(corpora, d.weights, t.seed) if d.is_mixture else None
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
        valid_sources, valid_targets = read_valid(*valid_files(d))
        max_len = d.max_len - (config.objective == "mlm")
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


def describe_mixture(mixture: C.Mixture, names: list[str]) -> str:
    """The run's header line for a mixture: each source's examples, weight and share of an
    epoch."""
    counts = mixture.counts()
    total = sum(counts) or 1
    parts = [
        f"{name} {len(part):,} x {weight:g} = {n:,} ({n / total:.0%})"
        for name, part, weight, n in zip(names, mixture.parts, mixture.weights, counts, strict=True)
    ]
    return f"data: a mixture, per epoch: {'; '.join(parts)}"
