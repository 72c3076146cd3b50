"""Read and validate plain-text training data: aligned source/target files or one monolingual file.

Files hold one sentence per line, UTF-8. Problems a user can fix (a missing or empty file,
invalid UTF-8, line counts that differ) raise `DataError` with a one-line message naming the
file and line. Empty pairs are dropped and counted, never silently.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..lines import split_lines


class DataError(ValueError):
    """Training data is missing or malformed; the message names the file and line."""


def read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a UTF-8 text file, without their line endings (the rules of transformer.lines)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} not found: check the path in the [data] section of the config")
    if not path.is_file():
        raise DataError(f"{path} is not a file: expected a text file with one sentence per line")
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(f"{path} is empty: expected one sentence per line")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataError(f"{path} line {line}: invalid UTF-8 (byte 0x{raw[e.start]:02x}): "
                        "convert the file to UTF-8, e.g. with iconv") from None
    return split_lines(text)


@dataclass
class ParallelText:
    """Aligned sentence pairs and what was dropped while reading them."""

    source: list[str]
    target: list[str]
    dropped_empty: int = 0
    """Pairs dropped because one side (or both) was empty."""


def read_parallel(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> ParallelText:
    """Read aligned files line by line; drop (and count) pairs with an empty side."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(f"{src_path} has {len(src):,} lines but {tgt_path} has {len(tgt):,}: "
                        "the files must be aligned line by line")
    keep_src, keep_tgt = [], []
    for s, t in zip(src, tgt, strict=True):
        s, t = s.strip(), t.strip()
        if s and t:
            keep_src.append(s)
            keep_tgt.append(t)
    if not keep_src:
        raise DataError(f"{src_path} and {tgt_path} have no pair where both sides are non-empty")
    return ParallelText(keep_src, keep_tgt, dropped_empty=len(src) - len(keep_src))


def read_monolingual(path: str | os.PathLike) -> tuple[list[str], int]:
    """Read a text file for a language model: the non-empty lines and how many empty ones were dropped."""
    lines = read_lines(path)
    kept = [line.strip() for line in lines if line.strip()]
    return kept, len(lines) - len(kept)
