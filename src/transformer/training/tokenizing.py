"""A run's tokenizers: trained on its training files as they stream by (kept in the corpus cache),
loaded from train.init_from or a resumed run, written into the run directory; and the four kinds
compared on a config's data (`transformer tokenize --compare`).

With data.protect_markup the pairs are read masked (transformer.data.markup), the trainer counts
the text between the slot tokens, and the tokenizer gets the slot tokens
(data.tokenizer.with_slot_tokens); a run's tokenizer must hold them exactly when the setting is on
(one from train.init_from too)."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ..config import OBJECTIVES, DataConfig, RunConfig
from ..data import corpus as C
from ..data import text as T
from ..data.markup import split_at_slots
from ..data.stream import stream_texts
from ..data.tokenizer import (
    ENCODER_SPECIALS,
    SPECIAL_TOKENS,
    UNK_ID,
    Tokenizer,
    TokenizerError,
    sentinel_tokens,
    train_tokenizer,
    with_slot_tokens,
)
from ..model_dir import load_tokenizers, save_tokenizers
from . import distributed as D
from .data_files import read_valid, train_parts, valid_files

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
    objective = OBJECTIVES[config.objective]
    if objective.sentinels:
        return SPECIAL_TOKENS + sentinel_tokens(config.data.sentinels)
    return ENCODER_SPECIALS if objective.encoder_tokens else SPECIAL_TOKENS


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
    if d.text.train_tsv:
        key["labelled"] = True
    if d.squad.train:
        key["squad"] = True
    if d.audio.train:
        key["audio"] = True
    if config.packed:
        key["documents"] = d.text.documents
    if d.protect_markup:
        key["protect_markup"] = True
    return key


def _train_pair(config: RunConfig, kind: str, sample: int) -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizers of this kind trained on the training stream: one object for a
    shared vocabulary (and for a language model, which has only targets)."""
    d = config.data
    parts = train_parts(d)
    sources = parts[0][1]
    specials = special_tokens(config)
    if d.text.train_tsv:
        texts = lambda side: T.labelled_texts(d.text.train_tsv, sample)  # noqa: E731
    elif d.squad.train:
        texts = lambda side: squad_texts(d.squad.train, sample)  # noqa: E731
    elif d.audio.train:
        texts = lambda side: transcript_texts(sources_of_audio(d), sample)  # noqa: E731
    elif config.packed:  # running text: the pieces the stream is encoded in, line breaks kept
        texts = lambda side: stream_texts(d.text.train_text, d.text.documents, sample)  # noqa: E731
    elif d.protect_markup:  # the text between the slot tokens, as encoding will see it
        texts = lambda side: split_at_slots(  # noqa: E731
            mixture_texts(parts, d.weights, side, sample, protect=True)
        )
    else:
        texts = lambda side: mixture_texts(parts, d.weights, side, sample)  # noqa: E731

    def train(side: str) -> Tokenizer:
        tok = train_tokenizer(kind, texts(side), d.vocab_size, d.min_frequency, specials)
        return with_slot_tokens(tok) if d.protect_markup else tok

    if sources is None or d.shared_vocab:
        tok = train("both")
        return tok, tok
    return train("source"), train("target")


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
    return Path(d.audio.train) / "transcripts.tsv"


def transcript_texts(path: Path, sample: int) -> Iterator[str]:
    """The transcripts (last column) of a speech folder's transcripts.tsv, for the tokenizer."""
    if not path.is_file():
        raise T.DataError(
            f"{path} not found: give data.train_audio a folder that `transformer data speech` wrote"
        )
    texts = [line.rsplit("\t", 1)[-1] for line in path.read_text(encoding="utf-8").splitlines()]
    return iter(texts[:sample] if sample else texts)


def mixture_texts(
    parts: list[tuple[str, str | None]],
    weights: Sequence[float],
    side: str,
    sample: int,
    protect: bool = False,
) -> Iterator[str]:
    """data.text.tokenizer_texts over each training source in turn; with sample > 0, each source
    gives its share of the sample by weight x examples, so the vocabulary follows the mixture a
    run trains on. protect: the pairs masked (data.protect_markup)."""
    if len(parts) == 1:
        yield from T.tokenizer_texts(*parts[0], side, sample, protect=protect)
        return
    sizes = [sum(1 for _ in T.iter_examples(t, s)) for t, s in parts]
    total = sum(w * n for w, n in zip(weights, sizes, strict=True))
    for (targets, sources), w, n in zip(parts, weights, sizes, strict=True):
        share = min(n, max(1, round(sample * w * n / total))) if sample else 0
        if w > 0:
            yield from T.tokenizer_texts(targets, sources, side, share, protect=protect)


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


def compare_tokenizers(
    config: RunConfig, sample: int, say: Callable[[str], None] = lambda _: None
) -> list[dict]:
    """`transformer tokenize --compare`: the four kinds trained on (a sample of) the config's
    training data with its vocab_size and min_frequency, measured on its validation text (the
    training sample when it has none): vocabulary, tokens per sentence per side, <unk> share."""
    parts = train_parts(config.data)
    targets, sources = parts[0]
    valid_targets, valid_sources = valid_files(config.data)
    protect = config.data.protect_markup
    eval_sources, eval_targets = (
        read_valid(valid_targets, valid_sources, protect) if valid_targets else (None, None)
    )
    rows = []
    for kind in TOKENIZER_NAMES:
        say(f"training the {TOKENIZER_NAMES[kind]} ...")
        src_tok, tgt_tok = _train_pair(config, kind, sample)
        if sources is None:
            src_tok = None
        if eval_targets is None:
            kept = list(itertools.islice(T.iter_examples(targets, sources, protect=protect), 2000))
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
            src_tok, tgt_tok = load_tokenizers(run_dir)
        except TokenizerError as e:
            raise TokenizerError(
                f"{e}: every checkpoint holds a copy of the run's tokenizer; copy it back from "
                f"{run_dir / 'checkpoints'}/step-*/ into {run_dir}"
            ) from None
        check_slot_tokens(config, src_tok, "the resumed run's")
        return src_tok, tgt_tok
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
    check_slot_tokens(config, src_tok, "train.init_from's" if t.init_from else "the run's")
    save_tokenizers(run_dir, src_tok, tgt_tok)
    return src_tok, tgt_tok


def check_slot_tokens(config: RunConfig, tokenizer: Tokenizer, whose: str) -> None:
    """TokenizerError unless the tokenizer holds markup's slot tokens exactly when
    data.protect_markup is on (training and translation must mask alike)."""
    want = config.data.protect_markup
    if tokenizer.protects_markup == want:
        return
    if want:
        raise TokenizerError(
            f"data.protect_markup is on but {whose} tokenizer has no slot tokens (｟1｠ ...): "
            "start from a model trained with data.protect_markup, or set it false"
        )
    raise TokenizerError(
        f"{whose} tokenizer holds the slot tokens of data.protect_markup: set data.protect_markup "
        "= true, as the model was trained"
    )
