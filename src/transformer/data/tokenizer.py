"""Tokenizers trained on the user's corpus with Hugging Face `tokenizers`, and imported tokenizer.json files.

Four kinds (`[data] tokenizer`), all NFC-normalised, all with the special tokens <pad>=0 <unk>=1
<s>=2 </s>=3 (the ids the ModelConfig defaults name), all saved as one tokenizer.json:
- "bpe" (default): byte-level BPE (GPT-2's byte alphabet). Every string maps to tokens, never
  <unk>, and decoding gives the (NFC) text back exactly.
- "unigram": SentencePiece's Unigram model over words marked with "▁" where a space was.
  Decoding gives the text back, except characters never seen in training: those are <unk>.
- "word": whole words and punctuation marks (the pre-tokenizer splits at spaces and between
  letters/digits and other marks: "¿De quién es?" -> ¿ De quién es ?); the vocab_size - 4 most
  frequent ones seen at least min_frequency times, everything else <unk>. Decoding (the rule of
  `detokenize_words`) joins words with one space, with none before . , ; : ! ? ) ] } » ” ’ %
  nor after ¿ ¡ ( [ { « “ ‘ ; so it loses the original spacing where that differed (e.g. "a - b"
  and "a-b" both come back as "a - b"), and an <unk> loses its word.
- "char": every character (spaces included) seen at least min_frequency times, others <unk>;
  decoding concatenates them, so the text comes back except for <unk>s. Sequences are ~5x longer
  than BPE's: data.max_len must be set for it.
Decoding skips special tokens, <unk> included.

`encode` adds no special tokens: the data pipeline adds <s>/</s> where the model needs them
(see `data.batching`). A model directory holds `tokenizer.json` (one shared vocabulary) or
`tokenizer.src.json` + `tokenizer.tgt.json` (separate source and target vocabularies).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

import tokenizers
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers

from ..files import atomic_write_text

SPECIAL_TOKENS = ("<pad>", "<unk>", "<s>", "</s>")
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
SHARED_FILE = "tokenizer.json"
SOURCE_FILE = "tokenizer.src.json"
TARGET_FILE = "tokenizer.tgt.json"
MIN_VOCAB = 256 + len(SPECIAL_TOKENS)
KINDS = ("bpe", "unigram", "word", "char")
NO_SPACE_BEFORE = ".,;:!?)]}»”’%"
NO_SPACE_AFTER = "¿¡([{«“‘"
_SPACE_BEFORE = re.compile(f" +([{re.escape(NO_SPACE_BEFORE)}])")
_SPACE_AFTER = re.compile(f"([{re.escape(NO_SPACE_AFTER)}]) +")


def detokenize_words(words: Iterable[str]) -> str:
    """Words -> text: joined by one space, none before closing punctuation (NO_SPACE_BEFORE)
    nor after opening punctuation (NO_SPACE_AFTER)."""
    return _SPACE_AFTER.sub(r"\1", _SPACE_BEFORE.sub(r"\1", " ".join(words)))


class TokenizerError(ValueError):
    """A tokenizer file is missing or unreadable."""


class Tokenizer:
    """A thin wrapper over a `tokenizers.Tokenizer`: ids in, ids out, no special tokens added."""

    def __init__(self, tokenizer: tokenizers.Tokenizer):
        self.tokenizer = tokenizer
        model, decoder = type(tokenizer.model).__name__, type(tokenizer.decoder).__name__
        self.kind = {"WordLevel": "char" if decoder == "Fuse" else "word", "Unigram": "unigram",
                     "BPE": "bpe"}.get(model, "other")
        """bpe, unigram, word, char (ours, or an imported one of that model), or other (WordPiece, ...)."""
        self._join_words = model == "WordLevel" and tokenizer.decoder is None

    def encode(self, text: str) -> list[int]:
        """Text -> token ids, without special tokens."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        """Token ids -> text, skipping special tokens (<pad>, <s>, </s>, ...)."""
        text = self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)
        return detokenize_words(text.split(" ")) if self._join_words else text

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        texts = self.tokenizer.decode_batch([[int(i) for i in ids] for ids in batch], skip_special_tokens=True)
        return [detokenize_words(t.split(" ")) for t in texts] if self._join_words else texts

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included (the model's embedding size must be at least this)."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def token_to_id(self, token: str) -> int | None:
        return self.tokenizer.token_to_id(token)

    def id_to_token(self, index: int) -> str | None:
        return self.tokenizer.id_to_token(index)

    def save(self, path: str | os.PathLike) -> None:
        """Write the tokenizer.json file `path` atomically."""
        atomic_write_text(path, self.tokenizer.to_str(pretty=True))

    @classmethod
    def load(cls, path: str | os.PathLike) -> Tokenizer:
        """Read a tokenizer.json (ours, or a Hugging Face one: BERT, GPT-2, Llama, ...)."""
        path = Path(path)
        if not path.is_file():
            raise TokenizerError(f"{path} not found: expected a tokenizer.json file")
        try:
            return cls(tokenizers.Tokenizer.from_file(str(path)))
        except Exception as e:  # the Rust library raises plain Exceptions
            raise TokenizerError(f"{path} is not a valid tokenizer.json ({str(e).splitlines()[0]})") from None

    from_file = load

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size})"


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    """Train a byte-level BPE tokenizer (Sennrich et al. 2016; GPT-2's byte alphabet) on `texts`.

    All 256 byte symbols are in the vocabulary, so any string can be encoded; the specials
    take ids 0-3. The vocabulary has at most `vocab_size` entries (fewer on little text).
    """
    if vocab_size < MIN_VOCAB:
        raise TokenizerError(f"vocab_size={vocab_size} is too small: a byte-level BPE needs at least "
                             f"{MIN_VOCAB} (256 bytes + 4 special tokens)")
    tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    for index, token in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(token) == index, f"special token {token} did not get id {index}"
    return Tokenizer(tok)


def _check_specials(tok: tokenizers.Tokenizer) -> Tokenizer:
    for index, token in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(token) == index, f"special token {token} did not get id {index}"
    return Tokenizer(tok)


def _counting(texts: Iterable[str], seen: list[int]) -> Iterable[str]:
    for text in texts:
        seen[0] += 1
        yield text


def train_word(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    """Word-level: the vocab_size - 4 most frequent words and punctuation marks (see the module doc)."""
    _check_vocab("word", vocab_size, len(SPECIAL_TOKENS) + 1)
    tok = tokenizers.Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # \w+ | [^\w\s]+
    seen = [0]
    tok.train_from_iterator(_counting(texts, seen), trainer=trainers.WordLevelTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS), show_progress=False))
    _check_trained(tok, seen[0], "word")
    return _check_specials(tok)


def train_char(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    """Character-level: every character seen at least min_frequency times; vocab_size must hold them all."""
    _check_vocab("char", vocab_size, len(SPECIAL_TOKENS) + 1)
    tok = tokenizers.Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    seen = [0]
    tok.train_from_iterator(_counting(texts, seen), trainer=trainers.WordLevelTrainer(
        vocab_size=1 << 30, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS), show_progress=False))
    _check_trained(tok, seen[0], "char")
    chars = tok.get_vocab_size() - len(SPECIAL_TOKENS)
    if chars + len(SPECIAL_TOKENS) > vocab_size:
        raise TokenizerError(f"data.vocab_size={vocab_size} is too small for a character vocabulary: the text has "
                             f"{chars:,} characters seen at least {min_frequency} time(s); set data.vocab_size to "
                             f"{chars + len(SPECIAL_TOKENS):,} or more (or raise data.min_frequency)")
    return _check_specials(tok)


def train_unigram(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    """SentencePiece-style Unigram (Kudo 2018) over "▁"-marked words; min_frequency is not used by it."""
    _check_vocab("unigram", vocab_size, len(SPECIAL_TOKENS) + 2)
    tok = tokenizers.Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    seen = [0]
    tok.train_from_iterator(_counting(texts, seen), trainer=trainers.UnigramTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), unk_token="<unk>", show_progress=False))
    _check_trained(tok, seen[0], "unigram")
    return _check_specials(tok)


def _check_vocab(kind: str, vocab_size: int, least: int) -> None:
    if vocab_size < least:
        raise TokenizerError(f"data.vocab_size={vocab_size} is too small for a {kind} tokenizer: give at least {least}")


def _check_trained(tok: tokenizers.Tokenizer, texts: int, kind: str) -> None:
    if texts == 0 or tok.get_vocab_size() <= len(SPECIAL_TOKENS):
        raise TokenizerError(f"no text to train the {kind} tokenizer on: the training data is empty")


def train_tokenizer(kind: str, texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    """Train a tokenizer of this kind ("bpe", "unigram", "word", "char"; see the module doc)."""
    trainers_ = {"bpe": train_bpe, "unigram": train_unigram, "word": train_word, "char": train_char}
    if kind not in trainers_:
        raise TokenizerError(f"tokenizer {kind!r} is not one of {', '.join(KINDS)}")
    return trainers_[kind](texts, vocab_size, min_frequency)


def save_tokenizers(path: str | os.PathLike, source: Tokenizer, target: Tokenizer | None = None) -> None:
    """Write `tokenizer.json` (shared: target None or the same object) or the .src/.tgt pair into `path`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if target is None or target is source:
        source.save(path / SHARED_FILE)
    else:
        source.save(path / SOURCE_FILE)
        target.save(path / TARGET_FILE)


def has_tokenizer(path: str | os.PathLike) -> bool:
    path = Path(path)
    return (path / SHARED_FILE).is_file() or (path / SOURCE_FILE).is_file()


def load_tokenizers(model_dir: str | os.PathLike) -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizers of a model directory; the same object when the vocabulary is shared."""
    path = Path(model_dir)
    if (path / SHARED_FILE).is_file():
        tok = Tokenizer.load(path / SHARED_FILE)
        return tok, tok
    if (path / SOURCE_FILE).is_file() and (path / TARGET_FILE).is_file():
        return Tokenizer.load(path / SOURCE_FILE), Tokenizer.load(path / TARGET_FILE)
    raise TokenizerError(f"{path} has no tokenizer: expected {SHARED_FILE} or {SOURCE_FILE} + {TARGET_FILE}")
