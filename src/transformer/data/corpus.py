"""Training corpora of any size: read as streams, tokenized once into memory-mapped arrays.

`train` does not hold the corpus in Python lists. The first run on a set of files writes, per
side, every kept example's token ids as one flat array (uint16 when the vocabulary fits, else
uint32) and an offsets index, plus each example's line in the files and a `header.json` with the
key it was built for. Every later run, `--resume` and each torchrun process maps those files
(np.memmap): the pages are shared with the OS page cache, not copied into each process.

Where: `data.cache` (default `$TRANSFORMER_CACHE_DIR/corpora`, else `~/.cache/transformer/corpora`),
one folder per key: the files (absolute path, size, modification time), the tokenizer(s) (a hash of
their tokenizer.json) and `data.max_len`. A changed file, tokenizer or max_len gives another key, so
another folder. A folder is written under a temporary name and renamed when complete, and its array
sizes are checked against the header when opened: a half-written or truncated one is never read (it
is rebuilt).

Reading: files are UTF-8, one example per line (the rules of transformer.data.lines), `.gz` files
are decompressed as they are read. Aligned files are read in step; if one ends first the
error names both line counts. Pairs with an empty side (after stripping) are dropped and
counted, as are examples longer than max_len tokens (a side with its <s>/</s>).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import encoding_pool
from .batching import Example
from .text import DataError, ReadCounts, check_file, iter_examples
from .tokenizer import Tokenizer

FORMAT = 1
CHUNK_LINES = 100_000
"""Lines tokenized at once (one `encode_batch` call, parallel in Rust) on the way to the arrays."""


def default_cache_root() -> Path:
    if os.environ.get("TRANSFORMER_CACHE_DIR"):
        return Path(os.environ["TRANSFORMER_CACHE_DIR"]) / "corpora"
    return (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "transformer" / "corpora"
    )


def fingerprint(tokenizer: Tokenizer) -> str:
    return hashlib.sha256(tokenizer.tokenizer.to_str().encode("utf-8")).hexdigest()


def file_key(path: str | os.PathLike) -> dict:
    path = check_file(path)
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def corpus_key(
    targets: str | os.PathLike,
    sources: str | os.PathLike | None,
    tgt_tok: Tokenizer,
    src_tok: Tokenizer | None,
    max_len: int,
    segmentation: int | None = None,
    protect: bool = False,
) -> dict:
    """Everything the arrays depend on: if any of it changes, they are built again. `segmentation`
    numbers the corpora of one BPE-dropout tokenizer (each a different random segmentation);
    `protect`, pairs read with their markup masked (data.protect_markup)."""
    key = {
        "format": FORMAT,
        "files": {
            "target": file_key(targets),
            **({"source": file_key(sources)} if sources else {}),
        },
        "tokenizers": {
            "target": fingerprint(tgt_tok),
            **({"source": fingerprint(src_tok)} if src_tok else {}),
        },
        "max_len": max_len,
    }
    if segmentation is not None:
        key["segmentation"] = segmentation
    if protect:
        key["protect_markup"] = True
    return key


def key_digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:20]


def ids_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds ids below vocab_size (uint16 or uint32)."""
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.uint32)


class Corpus(Sequence):
    """A prepared corpus, memory-mapped: a sequence of Example (built on access) plus arrays.

    Arrays (n = examples): tgt_lengths, src_lengths (None for a language model), lines (the
    0-based line of each example in the files), sizes (the padded row each needs, as
    Example.size)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.header = json.loads((self.path / "header.json").read_text(encoding="utf-8"))
        h = self.header
        self.n = h["examples"]
        sides = ["target"] + (["source"] if "source" in h["tokens"] else [])
        self._ids, self._offsets = {}, {}
        for side in sides:
            self._offsets[side] = _map(self.path / f"{side}.offsets", np.int64, self.n + 1)
            self._ids[side] = _map(
                self.path / f"{side}.ids", np.dtype(h["dtype"][side]), h["tokens"][side]
            )
        self.lines = _map(self.path / "lines", np.int64, self.n)
        self.tgt_lengths = np.diff(self._offsets["target"]).astype(np.int32)
        self.src_lengths = (
            np.diff(self._offsets["source"]).astype(np.int32) if "source" in sides else None
        )
        self.sizes = self.tgt_lengths + 1
        if self.src_lengths is not None:
            self.sizes = np.maximum(self.sizes, self.src_lengths)

    def __len__(self) -> int:
        return self.n

    def _side(self, side: str, i: int) -> list[int]:
        o = self._offsets[side]
        return self._ids[side][o[i] : o[i + 1]].tolist()

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        i = int(i)
        if not -self.n <= i < self.n:
            raise IndexError(i)
        i %= self.n
        src = self._side("source", i) if self.src_lengths is not None else None
        return Example(src, self._side("target", i), int(self.lines[i]))

    @property
    def dropped(self) -> dict[str, int]:
        return self.header["dropped"]


def _map(path: Path, dtype, count: int) -> np.ndarray:
    if count == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


def damage(path: Path, key: dict) -> str | None:
    """Why the folder cannot be read as the corpus for key (None: it can)."""
    try:
        h = json.loads((path / "header.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return f"header.json unreadable ({e})"
    if h.get("key") != key:
        return "built for other files or settings"
    expected = {"lines": 8 * h["examples"]}
    for side, tokens in h["tokens"].items():
        expected[f"{side}.offsets"] = 8 * (h["examples"] + 1)
        expected[f"{side}.ids"] = tokens * np.dtype(h["dtype"][side]).itemsize
    for name, size in expected.items():
        file = path / name
        if not file.is_file() or file.stat().st_size != size:
            found = file.stat().st_size if file.is_file() else "missing"
            return f"{name} is {found} bytes, expected {size}"
    return None


def prepare_corpus(
    targets: str | os.PathLike,
    tgt_tok: Tokenizer,
    max_len: int,
    sources: str | os.PathLike | None = None,
    src_tok: Tokenizer | None = None,
    cache: str | os.PathLike | None = None,
    say=lambda message: None,
    segmentation: int | None = None,
    protect: bool = False,
) -> Corpus:
    """The prepared corpus of these files: opened if the cache holds a complete one for the same
    key, else built (streaming, CHUNK_LINES at a time) and then opened. protect: pairs read with
    their markup masked (data.protect_markup; text.iter_examples)."""
    protect = protect and sources is not None
    key = corpus_key(
        targets, sources, tgt_tok, src_tok if sources else None, max_len, segmentation, protect
    )
    path = (Path(cache) if cache else default_cache_root()) / key_digest(key)
    return open_cached(
        path,
        lambda: damage(path, key),
        lambda tmp: _build(tmp, key, targets, tgt_tok, max_len, sources, src_tok, protect),
        Corpus,
        "corpus",
        f"{f'{sources} + ' if sources else ''}{targets}",
        say,
    )


def open_cached(
    path: Path,
    damage: Callable[[], str | None],
    build: Callable[[Path], None],
    open_: Callable[[Path], Any],
    kind: str,
    what: str,
    say: Callable[[str], None],
):
    """A prepared folder of the cache: opened when it is there and damage() finds nothing wrong,
    else built whole (build(tmp) fills a temporary folder beside it, its files are synced, then it
    is renamed into place; on any error the temporary folder is removed) and then opened."""
    if path.exists():
        why = damage()
        if why is None:
            say(f"data: prepared {kind} {path}")
            return open_(path)
        say(f"data: the prepared {kind} {path} cannot be used ({why}): building it again")
    say(f"data: preparing {what} into {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        build(tmp)
        for f in tmp.iterdir():  # on disk before the rename makes the folder visible
            with open(f, "rb") as handle:
                os.fsync(handle.fileno())
        if path.exists():
            shutil.rmtree(path)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return open_(path)


def _build(
    tmp: Path,
    key: dict,
    targets,
    tgt_tok: Tokenizer,
    max_len: int,
    sources,
    src_tok,
    protect: bool = False,
) -> None:
    """Write the corpus's files into the folder tmp (see open_cached)."""
    sides = {"target": tgt_tok, **({"source": src_tok} if sources else {})}
    dtypes = {side: ids_dtype(tok.vocab_size) for side, tok in sides.items()}
    files = {
        name: open(tmp / name, "wb")
        for name in ["lines"] + [f"{side}.{kind}" for side in sides for kind in ("ids", "offsets")]
    }
    pool = None
    try:
        counts, too_long, n = ReadCounts(), 0, 0
        tokens = dict.fromkeys(sides, 0)
        for side in sides:
            files[f"{side}.offsets"].write(np.zeros(1, np.int64).tobytes())
        stream = iter_examples(targets, sources, counts, protect)
        columns = {"target": 2, "source": 1}
        pending = None  # the chunk being encoded (by the workers while the next one is read)
        while True:
            chunk = list(itertools.islice(stream, CHUNK_LINES))
            if pending is not None:
                kept, dropped = _write(files, tokens, *pending, max_len, bool(sources))
                n, too_long = n + kept, too_long + dropped
            if not chunk:
                break
            if pool is None and pending is None and len(chunk) == CHUNK_LINES:
                pool = encoding_pool.start(
                    {side: tok.tokenizer.to_str() for side, tok in sides.items()}, dtypes
                )
            texts = {side: [e[columns[side]] for e in chunk] for side in sides}
            if pool is not None:
                pool.submit(texts)
                pending = (chunk, pool.result)
            else:
                pending = (chunk, _encode_here(sides, texts, dtypes))
    finally:
        if pool is not None:
            pool.close()
        for f in files.values():
            f.close()
    if n == 0:
        raise DataError(
            f"no training example is at most data.max_len={max_len} tokens long: raise "
            "data.max_len"
            + (
                " (a character tokenizer makes ~5x more tokens than BPE)"
                if tgt_tok.kind == "char"
                else ""
            )
        )
    header = {
        "format": FORMAT,
        "key": key,
        "examples": n,
        "tokens": tokens,
        "dtype": {side: dt.name for side, dt in dtypes.items()},
        "dropped": {"empty": counts.empty, "too_long": too_long},
        "lines_read": counts.lines,
    }
    (tmp / "header.json").write_text(json.dumps(header, indent=1), encoding="utf-8")


def _encode_here(sides: dict, texts: dict[str, list[str]], dtypes: dict):
    """In-process encoding of one chunk, as encoding_pool.Pool.submit returns it."""
    done = {
        side: encoding_pool.arrays(tok.encode_batch(texts[side]), dtypes[side])
        for side, tok in sides.items()
    }
    return lambda: done


def _write(files, tokens, chunk, job, max_len: int, paired: bool) -> tuple[int, int]:
    """Append one encoded chunk's kept examples (both sides non-empty, at most max_len) to the
    files; (kept, dropped as too long)."""
    ids = job()
    tgt_len = ids["target"][0]
    size = tgt_len + 1
    ok = tgt_len > 0
    if paired:
        src_len = ids["source"][0]
        size = np.maximum(size, src_len)
        ok &= src_len > 0
    ok &= size <= max_len
    keep = np.flatnonzero(ok)
    files["lines"].write(np.fromiter((chunk[i][0] for i in keep), np.int64, len(keep)).tobytes())
    for side, (lengths, flat) in ids.items():
        kept = lengths[keep]
        files[f"{side}.ids"].write(flat[np.repeat(ok, lengths)].tobytes())
        files[f"{side}.offsets"].write((tokens[side] + np.cumsum(kept)).tobytes())
        tokens[side] += int(kept.sum())
    return len(keep), len(chunk) - len(keep)
