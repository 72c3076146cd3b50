"""Tokenizers trained on the user's corpus with Hugging Face `tokenizers`, and imported
tokenizer.json files.

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

Trained for a run with data.protect_markup, a tokenizer also holds the slot tokens ｟1｠ … ｟32｠ of
transformer.data.markup as added tokens that are not special (with_slot_tokens): each is one token
wherever it stands, never split nor normalised, and decodes as itself. Its trainer counts the text
between them (markup.split_at_slots), as encoding sees it. A Unigram tokenizer then marks a word
start "▁" only at the start of the text and after a space, not after a slot token (Metaspace's
prepend_scheme "first"), so "｟1｠Guardar" decodes without a space. Tokenizers without them work as
before.

The encoder family (masked-LM, classifiers) trains the same kinds with BERT's special tokens
instead, ENCODER_SPECIALS: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, so pad, bos ([CLS]) and eos
([SEP]) keep the ids the ModelConfig defaults name; a text is fed as [CLS] text [SEP].

`encode` adds no special tokens: the data pipeline adds <s>/</s> where the model needs them
(see `data.batching`). This module knows tokenizer files, not directories: which files a model
directory holds (one shared vocabulary, or separate source and target ones) is
`transformer.model_dir`'s.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

import tokenizers
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers

from ..config import TOKENIZER_KINDS
from ..files import atomic_write_text
from .markup import SLOT_TOKENS

SPECIAL_TOKENS = ("<pad>", "<unk>", "<s>", "</s>")
SENTINEL = "<extra_id_{}>"
"""T5's sentinel tokens (span corruption): <extra_id_0>, <extra_id_1>, ..."""


def sentinel_tokens(n: int) -> tuple[str, ...]:
    """The first n sentinel tokens, in order."""
    return tuple(SENTINEL.format(k) for k in range(n))


ENCODER_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
UNK_ID = SPECIAL_TOKENS.index("<unk>")  # 1: ids follow SPECIAL_TOKENS' order
KINDS = (
    TOKENIZER_KINDS  # data.tokenizer's choice list, defined with the setting in transformer.config
)
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
        # ids in, ids out: an imported tokenizer.json may pad to a fixed length or truncate silently
        # (all-MiniLM-L6-v2's pads and cuts at 128); lengths are the data pipeline's business
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self.tokenizer = tokenizer
        model, decoder = type(tokenizer.model).__name__, type(tokenizer.decoder).__name__
        self.kind = {
            "WordLevel": "char" if decoder == "Fuse" else "word",
            "Unigram": "unigram",
            "BPE": "bpe",
        }.get(model, "other")
        """bpe, unigram, word, char (ours, or an imported one of that model), or other (WordPiece,
        ...)."""
        self._join_words = model == "WordLevel" and tokenizer.decoder is None

    def encode(self, text: str) -> list[int]:
        """Text -> token ids, without special tokens."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Text -> token ids and each token's character span [start, end) in text."""
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        return encoding.ids, [tuple(span) for span in encoding.offsets]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        """Token ids -> text, skipping special tokens (<pad>, <s>, </s>, ...)."""
        text = self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)
        return detokenize_words(text.split(" ")) if self._join_words else text

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        texts = self.tokenizer.decode_batch(
            [[int(i) for i in ids] for ids in batch], skip_special_tokens=True
        )
        return [detokenize_words(t.split(" ")) for t in texts] if self._join_words else texts

    def with_bpe_dropout(self, p: float) -> Tokenizer:
        """A copy that skips each BPE merge with probability p when encoding (BPE-dropout, Provilkov
        et al. 2020): the same vocabulary, other segmentations of the same text. Drawn by the
        tokenizers library, which takes no seed."""
        if self.kind != "bpe":
            raise TokenizerError(
                f"BPE-dropout needs a BPE tokenizer, this one is {self.kind!r}: set "
                "data.bpe_dropout = 0"
            )
        copy = tokenizers.Tokenizer.from_str(self.tokenizer.to_str())
        copy.model.dropout = p
        return Tokenizer(copy)

    @property
    def protects_markup(self) -> bool:
        """Whether it holds markup's slot tokens (trained with data.protect_markup)."""
        return all(self.tokenizer.token_to_id(t) is not None for t in SLOT_TOKENS)

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included (the model's embedding size must be at least
        this)."""
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
            raise TokenizerError(
                f"{path} is not a valid tokenizer.json ({str(e).splitlines()[0]})"
            ) from None

    from_file = load

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size})"


def train_bpe(
    texts: Iterable[str],
    vocab_size: int,
    min_frequency: int = 2,
    specials: tuple[str, ...] = SPECIAL_TOKENS,
) -> Tokenizer:
    """Train a byte-level BPE tokenizer (Sennrich et al. 2016; GPT-2's byte alphabet) on `texts`.

    All 256 byte symbols are in the vocabulary, so any string can be encoded; the specials
    take the first ids. The vocabulary has at most `vocab_size` entries (fewer on little text).
    """
    if vocab_size < 256 + len(specials):
        raise TokenizerError(
            f"vocab_size={vocab_size} is too small: a byte-level BPE needs at least "
            f"{256 + len(specials)} (256 bytes + {len(specials)} special tokens)"
        )
    tok = tokenizers.Tokenizer(models.BPE(unk_token=specials[1]))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return _check_specials(tok, specials)


def with_slot_tokens(tok: Tokenizer) -> Tokenizer:
    """The tokenizer (changed in place) with markup's slot tokens added after its vocabulary: added
    tokens, not special ones (decoding keeps them), matched in the raw text (see the module doc)."""
    if tok.protects_markup:
        return tok
    tok.tokenizer.add_tokens(
        [tokenizers.AddedToken(t, special=False, normalized=False) for t in SLOT_TOKENS]
    )
    if tok.kind == "unigram":
        tok.tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
        tok.tokenizer.decoder = decoders.Metaspace(prepend_scheme="first")
    return tok


def _check_specials(tok: tokenizers.Tokenizer, specials: tuple[str, ...]) -> Tokenizer:
    for index, token in enumerate(specials):
        assert tok.token_to_id(token) == index, f"special token {token} did not get id {index}"
    return Tokenizer(tok)


def _counting(texts: Iterable[str], seen: list[int]) -> Iterable[str]:
    for text in texts:
        seen[0] += 1
        yield text


def train_word(
    texts: Iterable[str],
    vocab_size: int,
    min_frequency: int = 2,
    specials: tuple[str, ...] = SPECIAL_TOKENS,
) -> Tokenizer:
    """Word-level: the vocab_size - 4 most frequent words and punctuation marks (see the module
    doc)."""
    _check_vocab("word", vocab_size, len(specials) + 1)
    tok = tokenizers.Tokenizer(models.WordLevel(unk_token=specials[1]))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # \w+ | [^\w\s]+
    seen = [0]
    tok.train_from_iterator(
        _counting(texts, seen),
        trainer=trainers.WordLevelTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(specials),
            show_progress=False,
        ),
    )
    _check_trained(tok, seen[0], "word", specials)
    return _check_specials(tok, specials)


def train_char(
    texts: Iterable[str],
    vocab_size: int,
    min_frequency: int = 2,
    specials: tuple[str, ...] = SPECIAL_TOKENS,
) -> Tokenizer:
    """Character-level: every character seen at least min_frequency times; vocab_size must hold them
    all."""
    _check_vocab("char", vocab_size, len(specials) + 1)
    tok = tokenizers.Tokenizer(models.WordLevel(unk_token=specials[1]))
    tok.normalizer = normalizers.NFC()
    # every character its own piece, line breaks too (packed text keeps them)
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    seen = [0]
    tok.train_from_iterator(
        _counting(texts, seen),
        trainer=trainers.WordLevelTrainer(
            vocab_size=1 << 30,
            min_frequency=min_frequency,
            special_tokens=list(specials),
            show_progress=False,
        ),
    )
    _check_trained(tok, seen[0], "char", specials)
    chars = tok.get_vocab_size() - len(specials)
    if chars + len(specials) > vocab_size:
        raise TokenizerError(
            f"data.vocab_size={vocab_size} is too small for a character vocabulary: the text has "
            f"{chars:,} characters seen at least {min_frequency} time(s); set data.vocab_size to "
            f"{chars + len(specials):,} or more (or raise data.min_frequency)"
        )
    return _check_specials(tok, specials)


def train_unigram(
    texts: Iterable[str],
    vocab_size: int,
    min_frequency: int = 2,
    specials: tuple[str, ...] = SPECIAL_TOKENS,
) -> Tokenizer:
    """SentencePiece-style Unigram (Kudo 2018) over "▁"-marked words; min_frequency is not used by
    it."""
    _check_vocab("unigram", vocab_size, len(specials) + 2)
    tok = tokenizers.Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    seen = [0]
    tok.train_from_iterator(
        _counting(texts, seen),
        trainer=trainers.UnigramTrainer(
            vocab_size=vocab_size,
            special_tokens=list(specials),
            unk_token=specials[1],
            show_progress=False,
        ),
    )
    _check_trained(tok, seen[0], "unigram", specials)
    return _check_specials(tok, specials)


def _check_vocab(kind: str, vocab_size: int, least: int) -> None:
    if vocab_size < least:
        raise TokenizerError(
            f"data.vocab_size={vocab_size} is too small for a {kind} tokenizer: give at least "
            f"{least}"
        )


def _check_trained(
    tok: tokenizers.Tokenizer, texts: int, kind: str, specials: tuple[str, ...]
) -> None:
    if texts == 0 or tok.get_vocab_size() <= len(specials):
        raise TokenizerError(
            f"no text to train the {kind} tokenizer on: the training data is empty"
        )


def train_tokenizer(
    kind: str,
    texts: Iterable[str],
    vocab_size: int,
    min_frequency: int = 2,
    specials: tuple[str, ...] = SPECIAL_TOKENS,
) -> Tokenizer:
    """Train a tokenizer of this kind ("bpe", "unigram", "word", "char"; see the module doc) whose
    first ids are `specials` (SPECIAL_TOKENS, or ENCODER_SPECIALS for the encoder family)."""
    trainers_ = {"bpe": train_bpe, "unigram": train_unigram, "word": train_word, "char": train_char}
    if kind not in trainers_:
        raise TokenizerError(f"tokenizer {kind!r} is not one of {', '.join(KINDS)}")
    return trainers_[kind](texts, vocab_size, min_frequency, specials)


ENCODER_ROLES = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")
"""The roles an encoder's special tokens play (Hugging Face's names), in ENCODER_SPECIALS' order."""


class EncoderTokens:
    """The ids of an encoder's special tokens: [PAD], [UNK], [CLS] (first), [SEP] (last), [MASK].

    From a model directory's record (special_tokens.json: role -> token, as `record()` writes it),
    or, without one, from BERT's names in the vocabulary (ours and imported BERT/MiniLM use
    them)."""

    def __init__(self, tokenizer: Tokenizer, record: dict[str, str] | None = None):
        record = record or dict(zip(ENCODER_ROLES, ENCODER_SPECIALS, strict=True))
        self.names = {role: record.get(role) for role in ENCODER_ROLES}
        ids = {
            role: tokenizer.token_to_id(name) if name else None for role, name in self.names.items()
        }
        missing = [
            self.names[r] or r for r in ("pad_token", "cls_token", "sep_token") if ids[r] is None
        ]
        if missing:
            raise TokenizerError(
                f"the tokenizer has no {', '.join(missing)} token: an encoder reads [CLS] text "
                "[SEP] "
                "(train it with objective mlm or classify, or import a BERT-style model)"
            )
        self.pad, self.unk, self.cls, self.sep, self.mask = (ids[r] for r in ENCODER_ROLES)

    def record(self) -> dict[str, str]:
        """What a model directory records (special_tokens.json)."""
        return {role: name for role, name in self.names.items() if name is not None}

    @property
    def ids(self) -> set[int]:
        """Every special id (never masked, never predicted)."""
        return {i for i in (self.pad, self.unk, self.cls, self.sep, self.mask) if i is not None}

    def wrap(self, ids: list[int]) -> list[int]:
        return [self.cls, *ids, self.sep]
