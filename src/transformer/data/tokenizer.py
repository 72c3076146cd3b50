"""Tokenizers: byte-level BPE trained with Hugging Face `tokenizers`, and imported tokenizer.json files.

Our own tokenizers reserve the special tokens <pad>=0 <unk>=1 <s>=2 </s>=3 (the ids the
ModelConfig defaults name). They are byte-level: every input string maps to tokens (no
crash, no <unk>), and decoding gives back the text (no stray `Ġ` or `@@`).

`encode` adds no special tokens: the data pipeline adds <s>/</s> where the model needs them
(see `data.batching`). A model directory holds `tokenizer.json` (one shared vocabulary) or
`tokenizer.src.json` + `tokenizer.tgt.json` (separate source and target vocabularies).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from ..files import atomic_write_text

SPECIAL_TOKENS = ("<pad>", "<unk>", "<s>", "</s>")
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
SHARED_FILE = "tokenizer.json"
SOURCE_FILE = "tokenizer.src.json"
TARGET_FILE = "tokenizer.tgt.json"
MIN_VOCAB = 256 + len(SPECIAL_TOKENS)


class TokenizerError(ValueError):
    """A tokenizer file is missing or unreadable."""


class Tokenizer:
    """A thin wrapper over a `tokenizers.Tokenizer`: ids in, ids out, no special tokens added."""

    def __init__(self, tokenizer: tokenizers.Tokenizer):
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        """Text -> token ids, without special tokens."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        """Token ids -> text, skipping special tokens (<pad>, <s>, </s>, ...)."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        return self.tokenizer.decode_batch([[int(i) for i in ids] for ids in batch], skip_special_tokens=True)

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
