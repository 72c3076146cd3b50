"""Read and validate plain-text training data, as streams: aligned source/target files or one
monolingual file, plain or gzipped.

Files hold one sentence per line, UTF-8 (the line rules of transformer.data.lines). Problems a user
can fix (a missing or empty file, invalid UTF-8, an unreadable .gz, line counts that differ)
raise `DataError` with a one-line message naming the file and line. Pairs with an empty side
are dropped and counted, never silently. With protect (data.protect_markup), each pair is read
with its placeholders and markup masked by slot tokens (transformer.data.markup.protect_pair).
"""

from __future__ import annotations

import gzip
import itertools
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .markup import protect_pair


class DataError(ValueError):
    """Training data is missing or malformed; the message names the file and line."""


def check_file(path: str | os.PathLike) -> Path:
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} not found: check the path in the [data] section of the config")
    if not path.is_file():
        raise DataError(f"{path} is not a file: expected a text file with one sentence per line")
    return path


def iter_lines(path: str | os.PathLike, keep_ends: bool = False) -> Iterator[str]:
    """The lines of a UTF-8 text file (plain or .gz) one at a time, without their endings (with
    keep_ends: each with its "\n", as the file has it, "\r\n" read as "\n").

    Same rules as transformer.data.lines.split_lines: a BOM at the start is dropped, lines end at
    "\\n" with an optional "\\r" before it. Invalid UTF-8 or an unreadable .gz is a DataError
    naming the file and line."""
    path = check_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    number = 0
    try:
        with opener(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise DataError(
                        f"{path} line {number}: invalid UTF-8 (byte 0x{raw[e.start]:02x}): "
                        "convert the file to UTF-8, e.g. with iconv"
                    ) from None
                if keep_ends:
                    yield line.replace("\r\n", "\n") if line.endswith("\r\n") else line
                else:
                    yield line.removesuffix("\n").removesuffix("\r")
    except (gzip.BadGzipFile, EOFError, OSError) as e:
        raise DataError(
            f"{path}: cannot be read after line {number} ({e}): "
            f"{'is it a complete gzip file?' if opener is gzip.open else 'check the file'}"
        ) from None


@dataclass
class ReadCounts:
    """What reading the files found: lines, and pairs dropped for an empty side."""

    lines: int = 0
    empty: int = 0


class TsvColumn(str):
    """A text-to-text TSV file (`input<TAB>target` per line) standing for one of its columns where
    the pipeline takes aligned files: training.data_files.train_files gives (TsvColumn(path, 1),
    TsvColumn(path, 0)) and iter_examples then reads both sides from the one file."""

    column: int

    def __new__(cls, path: str | os.PathLike, column: int) -> TsvColumn:
        obj = super().__new__(cls, os.fspath(path))
        obj.column = column
        return obj


def _tab_separated(
    path: str | os.PathLike, left: str, right: str, counts: ReadCounts | None = None
) -> Iterator[tuple[int, str, str]]:
    """(line, left side, right side) of each non-blank `left<TAB>right` line; 0-based lines.

    The left side is what precedes the first tab, the right side the rest (stripped; tabs inside
    it stay). Blank lines are skipped (and counted as empty). A line without a tab or with an
    empty side is a DataError naming the file and its 1-based line, and so is a file without any."""
    counts = counts if counts is not None else ReadCounts()
    form = f"each line must be {left}<TAB>{right}"
    for line, raw in enumerate(iter_lines(path)):
        counts.lines += 1
        if not raw.strip():
            counts.empty += 1
            continue
        a, tab, b = raw.partition("\t")
        a, b = a.strip(), b.strip()
        where = f"{path} line {line + 1}"
        if not tab:
            raise DataError(f"{where}: no tab: {form}")
        for side, text in ((f"{left} (before the tab)", a), (f"{right} (after the tab)", b)):
            if not text:
                raise DataError(f"{where}: the {side} is empty: {form}")
        yield line, a, b
    if counts.lines == counts.empty:
        raise DataError(f"{path} has no {left}<TAB>{right} line")


def iter_pairs(
    path: str | os.PathLike, counts: ReadCounts | None = None
) -> Iterator[tuple[int, str, str]]:
    """(line, input, target) of each line of a text-to-text `input<TAB>target` file (see
    _tab_separated)."""
    return _tab_separated(path, "input", "target", counts)


def iter_examples(
    targets: str | os.PathLike,
    sources: str | os.PathLike | None = None,
    counts: ReadCounts | None = None,
    protect: bool = False,
) -> Iterator[tuple[int, str | None, str]]:
    """(line, source, target) for each line where no side is empty after stripping; 0-based lines.

    With sources, the two files are read in step; if one ends before the other, the error
    names both line counts and where the shorter ended. Two TsvColumn of one file: its pairs.
    protect: each pair with its placeholders and markup masked (markup.protect_pair)."""
    if protect and sources is not None:
        for line, s, t in iter_examples(targets, sources, counts):
            yield line, *protect_pair(s, t)
        return
    if isinstance(sources, TsvColumn) and isinstance(targets, TsvColumn):
        yield from iter_pairs(targets, counts)
        return
    counts = counts if counts is not None else ReadCounts()
    any_src, any_tgt = sources is None, False  # a file with no non-blank line is "empty"
    if sources is None:
        for line, text in enumerate(iter_lines(targets)):
            counts.lines += 1
            text = text.strip()
            any_tgt = any_tgt or bool(text)
            if text:
                yield line, None, text
            else:
                counts.empty += 1
    else:
        src_lines, tgt_lines = iter_lines(sources), iter_lines(targets)
        missing = object()
        for line, (s, t) in enumerate(
            itertools.zip_longest(src_lines, tgt_lines, fillvalue=missing)
        ):
            if s is missing or t is missing:
                longer = tgt_lines if s is missing else src_lines
                total = (
                    line + 1 + sum(1 for _ in longer)
                )  # the shorter file ended after `line` lines
                n_src, n_tgt = (line, total) if s is missing else (total, line)
                raise DataError(
                    f"{sources} has {n_src:,} lines but {targets} has {n_tgt:,}: "
                    "the files must be aligned line by line"
                )
            counts.lines += 1
            s, t = s.strip(), t.strip()
            any_src, any_tgt = any_src or bool(s), any_tgt or bool(t)
            if s and t:
                yield line, s, t
            else:
                counts.empty += 1
    for path, seen in ((sources, any_src), (targets, any_tgt)):
        if path is not None and not seen:
            raise DataError(f"{path} is empty: expected one sentence per line")
    if counts.lines == counts.empty:
        raise DataError(
            f"{sources} and {targets} have no pair where both sides are non-empty"
            if sources
            else f"{targets} has no non-empty line"
        )


def tokenizer_texts(
    targets: str | os.PathLike,
    sources: str | os.PathLike | None,
    side: str,
    sample: int,
    seed: int = 0,
    protect: bool = False,
) -> Iterator[str]:
    """The texts a tokenizer is trained on, streamed: side "source", "target" or "both" (sources
    then targets, for a shared vocabulary) of the kept examples. With sample > 0 and more kept
    examples than that, `sample` of them chosen at random (seeded), in file order. protect: masked
    as iter_examples masks them."""
    keep = None
    if sample:
        n = sum(1 for _ in iter_examples(targets, sources))
        if n > sample:
            keep = set(random.Random(seed).sample(range(n), sample))
    for which in ["source", "target"] if side == "both" else [side]:
        if which == "source" and sources is None:
            continue
        for i, (_, s, t) in enumerate(iter_examples(targets, sources, protect=protect)):
            if keep is None or i in keep:
                yield s if which == "source" else t


def iter_labelled(path: str | os.PathLike) -> Iterator[tuple[int, str, str]]:
    """(line, label, text) for each line of a `label<TAB>text` file (plain or .gz); 0-based lines.
    Blank lines are skipped; a malformed line is a DataError naming the file and line
    (_tab_separated)."""
    return _tab_separated(path, "label", "text")


def labelled_texts(path: str | os.PathLike, sample: int, seed: int = 0) -> Iterator[str]:
    """The texts of a label<TAB>text file (a tokenizer's training stream): all, or `sample` of
    them chosen at random (seeded), in file order."""
    keep = None
    if sample:
        n = sum(1 for _ in iter_labelled(path))
        if n > sample:
            keep = set(random.Random(seed).sample(range(n), sample))
    for i, (_, _, text) in enumerate(iter_labelled(path)):
        if keep is None or i in keep:
            yield text


def split_text(
    path: str | os.PathLike, out: str | os.PathLike, valid_share: float = 0.1
) -> dict[str, int]:
    """Write out/train.txt (the first 1 - valid_share of the file's characters) and out/valid.txt
    (the rest), as nanoGPT splits a text for a language model; returns each file's characters.
    The text is read whole, byte for byte (line endings as they are)."""
    from ..files import atomic_write

    path = Path(path)
    if not path.is_file():
        why = "is not a file" if path.exists() else "not found"
        raise DataError(f"{path} {why}: give the text file to split")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(
            f"{path} line {line}: invalid UTF-8 (byte 0x{raw[e.start]:02x}): convert the file "
            "to UTF-8, e.g. with iconv"
        ) from None
    cut = int(len(text) * (1 - valid_share))
    if not text[:cut].strip() or not text[cut:].strip():
        raise DataError(
            f"{path} has {len(text):,} characters: too little text to keep {valid_share:.0%} of "
            "it for validation and train on the rest"
        )
    Path(out).mkdir(parents=True, exist_ok=True)
    parts = {"train.txt": text[:cut], "valid.txt": text[cut:]}
    for name, part in parts.items():
        atomic_write(Path(out) / name, lambda tmp, t=part: Path(tmp).write_bytes(t.encode("utf-8")))
    return {name: len(part) for name, part in parts.items()}
