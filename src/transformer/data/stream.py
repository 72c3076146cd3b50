"""Packed language-model text: a file read as one token stream, cut into blocks (GPT-style).

The stream: each document's tokens between <s> and </s>, documents one after the other. A document
is (data.text.documents) the whole file ("file": its line breaks are text, as nanoGPT reads a file),
the lines up to a blank line ("paragraph", joined by line breaks), or each non-empty line ("line",
as fairseq's language models read text). The ids are written once into a memory-mapped array in
the corpus cache (data.corpus's folder and rules: a key of the file, the tokenizer and the document
kind; written under a temporary name, checked when opened), beside a header with the counts.

A file is tokenized in pieces of about PIECE_CHARS characters, each cut before a line that starts
with a character other than whitespace: the byte-level BPE and the character tokenizer cut there
themselves (a line break is its own pre-token), so the pieces give the ids of the whole text.

Training blocks (`epoch_blocks`, `read_block`): an epoch reads the stream as a ring, from an
offset drawn for the epoch, in blocks of block_size positions (the last one shorter), in an order
drawn for the epoch; a block is its positions' tokens and the token after each, which it predicts.
Every position of the stream is predicted exactly once an epoch, and the offset moves the cuts from
one epoch to the next, as nanoGPT's random offsets do. After the last </s> the ring comes back to
the first <s>: a <s> is never a target (`targets` sets it to padding), it only begins a document.
Both are pure functions of (seed, epoch), so a resumed run reads what the uninterrupted one did.
Validation (`valid_blocks`) reads the stream once from its start, without the ring.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from .corpus import (
    FORMAT,
    default_cache_root,
    file_key,
    fingerprint,
    ids_dtype,
    key_digest,
    open_cached,
)
from .text import DataError, iter_lines
from .tokenizer import Tokenizer

PIECE_CHARS = 1 << 16
"""Characters of a whole-file document tokenized at once (at most: a piece ends at a line)."""
STREAM_FORMAT = 1


def iter_pieces(path: str | os.PathLike, documents: str) -> Iterator[tuple[str, bool]]:
    """The text of a file as (piece, ends a document) pairs, a document's pieces in order (see the
    module doc); a file without any non-blank text is a DataError."""
    found = False
    if documents == "line":
        for line in iter_lines(path):
            if line.strip():
                found = True
                yield line, True
    elif documents == "paragraph":
        lines: list[str] = []
        for line in [*iter_lines(path), ""]:
            if line.strip():
                lines.append(line)
            elif lines:
                found = True
                yield "\n".join(lines), True
                lines = []
    elif documents == "file":
        piece: list[str] = []
        size = 0
        for line in iter_lines(path, keep_ends=True):
            if size >= PIECE_CHARS and line[:1].strip():
                yield "".join(piece), False
                piece, size = [], 0
            found = found or bool(line.strip())
            piece.append(line)
            size += len(line)
        if found:
            yield "".join(piece), True
    else:
        raise ValueError(f"documents={documents!r} is not file, paragraph or line")
    if not found:
        raise DataError(f"{path} has no text, only blank lines: give a file with text in it")


def stream_texts(path: str | os.PathLike, documents: str, sample: int, seed: int = 0):
    """The texts a tokenizer for this packed file is trained on: its pieces, or with sample > 0 and
    more pieces than that, `sample` of them chosen at random (seeded), in file order."""
    keep = None
    if sample:
        n = sum(1 for _ in iter_pieces(path, documents))
        if n > sample:
            keep = set(np.random.default_rng(seed).choice(n, size=sample, replace=False).tolist())
    for i, (piece, _) in enumerate(iter_pieces(path, documents)):
        if keep is None or i in keep:
            yield piece


class TokenStream:
    """A prepared stream, memory-mapped: `ids` (all tokens), and the header's counts: tokens,
    characters (of the documents' text, what the tokens stand for; <s> and </s> stand for none)
    and documents."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.header = json.loads((self.path / "header.json").read_text(encoding="utf-8"))
        h = self.header
        self.ids = np.memmap(
            self.path / "ids", dtype=np.dtype(h["dtype"]), mode="r", shape=(h["tokens"],)
        )
        self.chars, self.documents = h["chars"], h["documents"]

    def __len__(self) -> int:
        return len(self.ids)


def encode_stream(
    path: str | os.PathLike, tokenizer: Tokenizer, documents: str, bos: int, eos: int
) -> Iterator[tuple[np.ndarray, int, bool]]:
    """The stream's ids in chunks: (ids, characters they stand for, ends a document)."""
    start = True
    for piece, end in iter_pieces(path, documents):
        ids = ([bos] if start else []) + tokenizer.encode(piece) + ([eos] if end else [])
        yield np.asarray(ids, dtype=np.int64), len(piece), end
        start = end


def prepare_stream(
    path: str | os.PathLike,
    tokenizer: Tokenizer,
    documents: str,
    bos: int,
    eos: int,
    cache: str | os.PathLike | None = None,
    say=lambda message: None,
) -> TokenStream:
    """The token stream of a text file: opened if the cache holds a complete one for the same key
    (the file, the tokenizer, the document kind, the <s>/</s> ids), else built and then opened."""
    key = {
        "format": FORMAT,
        "stream": STREAM_FORMAT,
        "file": file_key(path),
        "tokenizer": fingerprint(tokenizer),
        "documents": documents,
        "bos_eos": [bos, eos],
    }
    folder = (Path(cache) if cache else default_cache_root()) / f"stream-{key_digest(key)}"
    return open_cached(
        folder,
        lambda: _damage(folder, key),
        lambda tmp: _build(tmp, key, path, tokenizer, documents, bos, eos),
        TokenStream,
        "stream",
        f"{path} as one token stream",
        say,
    )


def _damage(folder: Path, key: dict) -> str | None:
    try:
        h = json.loads((folder / "header.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return f"header.json unreadable ({e})"
    if h.get("key") != key:
        return "built for another file or settings"
    size = h["tokens"] * np.dtype(h["dtype"]).itemsize
    file = folder / "ids"
    if not file.is_file() or file.stat().st_size != size:
        return (
            f"ids is {file.stat().st_size if file.is_file() else 'missing'} bytes, expected {size}"
        )
    return None


def _build(tmp: Path, key, path, tokenizer: Tokenizer, documents: str, bos: int, eos: int) -> None:
    """Write the stream's ids and header into the folder tmp (see corpus.open_cached)."""
    dtype = ids_dtype(tokenizer.vocab_size)
    tokens = chars = docs = 0
    digest = hashlib.sha256()
    with open(tmp / "ids", "wb") as f:
        for ids, n_chars, end in encode_stream(path, tokenizer, documents, bos, eos):
            data = ids.astype(dtype).tobytes()
            f.write(data)
            digest.update(data)
            tokens, chars, docs = tokens + len(ids), chars + n_chars, docs + end
    header = {
        "key": key,
        "tokens": tokens,
        "chars": chars,
        "documents": docs,
        "dtype": dtype.name,
        "sha256": digest.hexdigest(),
    }
    (tmp / "header.json").write_text(json.dumps(header, indent=1), encoding="utf-8")


def epoch_blocks(n: int, block_size: int, seed: int, epoch: int) -> tuple[int, np.ndarray]:
    """(offset, order) of an epoch over a ring of n tokens: block k starts at offset + k *
    block_size (mod n); order is the permutation of the ceil(n / block_size) blocks it reads
    them in."""
    rng = np.random.default_rng([seed, epoch, 0x5EED])
    offset = int(rng.integers(n))
    return offset, rng.permutation(-(-n // block_size))


def block_span(n: int, block_size: int, offset: int, k: int) -> tuple[int, int]:
    """(first position, positions) of block k of the ring from `offset`: block_size positions, the
    last block the n - k * block_size that remain."""
    return (offset + k * block_size) % n, min(block_size, n - k * block_size)


def read_block(ids: np.ndarray, start: int, positions: int) -> np.ndarray:
    """positions + 1 tokens of the ring `ids` from start (wrapping past its end), never reading
    outside it: the block's inputs and, one further, what they predict."""
    n = len(ids)
    index = (start + np.arange(positions + 1)) % n
    return np.asarray(ids[index], dtype=np.int64)


def valid_blocks(n: int, block_size: int) -> list[tuple[int, int]]:
    """(first position, positions) of the blocks that read a stream once from its start: every
    position but the last predicts the next token, in order, block_size at a time."""
    return [(s, min(block_size, n - 1 - s)) for s in range(0, n - 1, block_size)]


def targets(block: np.ndarray, bos: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) of a block read by read_block; a <s> target (what follows a </s>) is
    padding: it is where a document starts, not something to predict."""
    x, y = block[:-1], block[1:].copy()
    y[y == bos] = pad
    return x, y


class BlockBatches(Sequence):
    """An epoch's batches of block numbers: `rows` blocks each, in the epoch's order."""

    def __init__(self, order: np.ndarray, rows: int):
        self.order, self.rows = order, rows

    def __len__(self) -> int:
        return -(-len(self.order) // self.rows)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        if not -len(self) <= k < len(self):
            raise IndexError(k)
        k %= len(self)
        return self.order[k * self.rows : (k + 1) * self.rows].tolist()
