"""Matthew Henry's Concise Commentary (SWORD module MHCC, Debian `sword-comm-mhcc`, public domain):
each chapter's outline of headings with the verses they cover ("The first sabbath. (1-3)",
Genesis 2), paired with the Bible's text of those verses.

Two datasets come from the same 2,531 headings in 792 chapters:
- `transformer data commentary-headings` (summarization): the passage (the verses of a heading's
  range, one line) -> the heading; {train,valid,test}.tsv, `passage<TAB>heading`.
- `transformer data commentary-qa` (extractive question answering, SQuAD's JSON): the question is
  a heading, the context the chapter's verses, the answer the span of the verses it covers.

Reading the module: pysword opens Bible modules only, so the commentary is read here. A zCom
module is a verse index (.bzv: one record per canonical entry, in pysword's KJV index order:
block number, offset in the inflated block, size), a block index (.bzs: 12-byte little-endian
entries: offset, compressed size, inflated size) and zlib blocks (.bzz). The .conf says zCom4
(4-byte sizes, 12-byte records) but Debian's files hold 10-byte records (2-byte sizes): the
record size is read off the index's length. A chapter's outline is a table of
<row><cell>heading</cell><cell>(first-last)</cell></row> in the entry of its first verse.

Rules:
- A heading is its cell's text as one line (markup removed, entities decoded). Its range is
  "(N)" or "(N-M)"; any other range, N > M, or M beyond the chapter in the Bible text drops the
  heading (counted), and so does an empty passage.
- Splits hold whole chapters: align.split_of(chapter, VALID_PERCENT, TEST_PERCENT), a hash of
  the chapter's name, so a chapter's headings and verses are in one split.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ...files import atomic_write_text
from .bible.align import split_of
from .bible.sword import MODULES, BibleError, clean_osis, find_sword_dir, read_module
from .splits import SPLITS, check_out, dropped_lines

PACKAGE = "sword-comm-mhcc"
NAME = "MHCC"
INSTALL = f"apt-get install -y {PACKAGE}"
VALID_PERCENT, TEST_PERCENT = 10, 10
"""Chapters held out: ~80 valid and ~80 test of the 792 with an outline."""

_ROW = re.compile(r"<row>\s*<cell>(.*?)</cell>\s*<cell>(.*?)</cell>\s*</row>", re.S)
_RANGE = re.compile(r"\(\s*(\d+)\s*(?:-\s*(\d+)\s*)?\)")


@dataclass(frozen=True)
class Heading:
    """One line of a chapter's outline: the heading and the verses first..last it covers."""

    book: str  # OSIS book name (Gen, Matt, ...)
    chapter: int
    heading: str
    first: int
    last: int

    @property
    def key(self) -> str:
        return f"{self.book}.{self.chapter}.{self.first}-{self.last}"


def _conf(root: Path) -> dict[str, str]:
    conf = root / "mods.d" / "mhcc.conf"
    if not conf.is_file():
        raise BibleError(
            f"Matthew Henry's Concise Commentary is not installed in {root} (no "
            f"mods.d/mhcc.conf): {INSTALL}"
        )
    entries: dict[str, str] = {}
    for line in conf.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() not in entries:
            entries[key.strip()] = value.strip()
    return entries


class _Testament:
    """One testament's files of a zCom module: the text of an index, each block inflated once."""

    def __init__(self, folder: Path, name: str, entries: int):
        paths = [folder / f"{name}.bz{kind}" for kind in "vsz"]
        missing = [p.name for p in paths if not p.is_file()]
        if missing:
            raise BibleError(f"{folder} lacks {', '.join(missing)}: reinstall it: {INSTALL}")
        self.index, self.blocks, self.data = (p.read_bytes() for p in paths)
        size = next((s for s in (10, 12) if len(self.index) == s * entries), None)
        if size is None:
            raise BibleError(
                f"{paths[0]} has {len(self.index):,} bytes, not {entries:,} records of 10 or 12 "
                f"bytes (the KJV versification): reinstall it: {INSTALL}"
            )
        self.record = struct.Struct("<IIH" if size == 10 else "<III")
        self.inflated: dict[int, bytes] = {}

    def raw(self, index: int) -> bytes:
        """The record of entry `index` (entries linked to one text share it)."""
        start = index * self.record.size
        return self.index[start : start + self.record.size]

    def text(self, index: int) -> str:
        block, offset, size = self.record.unpack(self.raw(index))
        if size == 0:
            return ""
        if block not in self.inflated:
            if 12 * (block + 1) > len(self.blocks):
                raise BibleError(f"block {block} is past the block index: reinstall: {INSTALL}")
            start, length, _ = struct.unpack_from("<III", self.blocks, 12 * block)
            try:
                self.inflated[block] = zlib.decompress(self.data[start : start + length])
            except zlib.error as e:
                raise BibleError(
                    f"block {block} does not inflate ({e}): reinstall: {INSTALL}"
                ) from None
        return self.inflated[block][offset : offset + size].decode("utf-8", errors="replace")


def read_outlines(
    sword_dir: str | os.PathLike | None = None,
) -> tuple[list[tuple[str, int, str, str]], str]:
    """Every outline row as (book, chapter, heading, range text), in canonical order, and the
    module's version."""
    try:
        from pysword.books import BibleStructure
    except ImportError:
        raise BibleError(
            "the commentary needs pysword: pip install pysword (or pip install -e '.[data]')"
        ) from None
    try:
        root = find_sword_dir(sword_dir)
    except BibleError as e:
        raise BibleError(f"{e}; the commentary: {INSTALL}") from None
    conf = _conf(root)
    if conf.get("CompressType", "ZIP").upper() != "ZIP":
        raise BibleError(f"{NAME}: CompressType {conf['CompressType']} is not read here (ZIP is)")
    folder = root / conf.get("DataPath", "./modules/comments/zcom/mhcc/")
    structure = BibleStructure("kjv", ["ot", "nt"])
    rows = []
    for testament, books in structure.get_books().items():
        entries = 2 + sum(1 + len(b.chapter_lengths) + sum(b.chapter_lengths) for b in books)
        files = _Testament(folder, testament, entries)
        for book in books:
            for chapter, n_verses in enumerate(book.chapter_lengths, start=1):
                numbers = list(range(1, n_verses + 1))
                indices = structure.ref_to_indicies(
                    books=[book.name], chapters=[chapter], verses=numbers
                )[testament]
                seen: set[bytes] = set()
                for index in indices:
                    if files.raw(index) in seen:
                        continue
                    seen.add(files.raw(index))
                    for cell, verses in _ROW.findall(files.text(index)):
                        rows.append((book.osis_name, chapter, clean_osis(cell), clean_osis(verses)))
    return rows, conf.get("Version", "unknown")


def read_headings(
    bible: dict[tuple[str, int, int], str], sword_dir: str | os.PathLike | None = None
) -> tuple[list[Heading], Counter, str]:
    """The outline's headings whose range is valid in `bible` (the module's rules), what was
    dropped by reason, and the commentary's version."""
    rows, version = read_outlines(sword_dir)
    lengths: Counter = Counter()
    for book, chapter, _ in bible:
        lengths[(book, chapter)] += 1
    headings, dropped = [], Counter()
    for book, chapter, heading, verses in rows:
        match = _RANGE.fullmatch(verses)
        if not heading:
            dropped["empty heading"] += 1
            continue
        if not match:
            dropped[f"verse range not (N) or (N-M): {verses!r}"] += 1
            continue
        first = int(match.group(1))
        last = int(match.group(2) or first)
        if not 1 <= first <= last:
            dropped["verse range ends before it starts"] += 1
        elif last > lengths[(book, chapter)]:
            dropped["verse range beyond the chapter in the Bible text"] += 1
        elif not any(bible.get((book, chapter, v)) for v in range(first, last + 1)):
            dropped["no text in the Bible for its verses"] += 1
        else:
            headings.append(Heading(book, chapter, heading, first, last))
    return headings, dropped, version


def passage(bible: dict[tuple[str, int, int], str], h: Heading) -> str:
    """The verses a heading covers, as one line."""
    verses = (bible.get((h.book, h.chapter, v), "") for v in range(h.first, h.last + 1))
    return " ".join(" ".join(text.split()) for text in verses if text.strip())


def _chapter_split(h: Heading) -> str:
    return split_of((h.book, h.chapter), VALID_PERCENT, TEST_PERCENT)


def build_headings_corpus(
    out_dir: str | os.PathLike, bible: str = "kjv", sword_dir: str | os.PathLike | None = None
) -> dict:
    """Write OUT/{train,valid,test}.tsv (`passage<TAB>heading`), {split}.ids (book.chapter.first-
    last) and PROVENANCE.md; return the counts."""
    out = check_out(out_dir, "summarization data")
    verses, bible_version = read_module(bible, sword_dir)
    headings, dropped, version = read_headings(verses, sword_dir)
    splits: dict[str, list[Heading]] = {name: [] for name in SPLITS}
    for h in headings:
        splits[_chapter_split(h)].append(h)
    out.mkdir(parents=True, exist_ok=True)
    words: dict[str, float] = {}
    for name, rows in splits.items():
        texts = [passage(verses, h) for h in rows]
        atomic_write_text(
            out / f"{name}.tsv",
            "".join(f"{text}\t{h.heading}\n" for text, h in zip(texts, rows, strict=True)),
        )
        atomic_write_text(out / f"{name}.ids", "".join(f"{h.key}\n" for h in rows))
        words[name] = sum(len(t.split()) for t in texts) / max(len(texts), 1)
    report = _report(splits, dropped, version, bible, bible_version)
    report["passage_words"] = words
    atomic_write_text(out / "PROVENANCE.md", _headings_provenance(report))
    return report


def build_qa_corpus(
    out_dir: str | os.PathLike, bible: str = "kjv", sword_dir: str | os.PathLike | None = None
) -> dict:
    """Write OUT/{train,valid,test}.json in SQuAD's format and PROVENANCE.md; return the counts.

    Each chapter with an outline is one paragraph: its context the chapter's verses joined by one
    space, `verse_starts` the character offset of each verse (an addition to SQuAD's format); each
    heading is a question whose one answer is the text of its verses (`answer_start` its offset)
    and whose `verses` are [first, last]."""
    out = check_out(out_dir, "question answering data")
    verses, bible_version = read_module(bible, sword_dir)
    headings, dropped, version = read_headings(verses, sword_dir)
    by_chapter: dict[tuple[str, int], list[Heading]] = {}
    for h in headings:
        by_chapter.setdefault((h.book, h.chapter), []).append(h)
    splits: dict[str, list[Heading]] = {name: [] for name in SPLITS}
    articles: dict[str, list[dict]] = {name: [] for name in SPLITS}
    for (book, chapter), rows in by_chapter.items():
        numbers = sorted(v for b, c, v in verses if (b, c) == (book, chapter))
        context, starts = "", {}
        for v in numbers:
            text = " ".join(verses[(book, chapter, v)].split())
            starts[v] = len(context) + (1 if context else 0)
            context = f"{context} {text}" if context else text
        qas = []
        for h in rows:
            start = starts[h.first]
            end = starts[h.last] + len(" ".join(verses[(book, chapter, h.last)].split()))
            qas.append(
                {
                    "id": h.key,
                    "question": h.heading,
                    "answers": [{"text": context[start:end], "answer_start": start}],
                    "verses": [h.first, h.last],
                }
            )
        split = _chapter_split(rows[0])
        splits[split] += rows
        articles[split].append(
            {
                "title": f"{book} {chapter}",
                "paragraphs": [
                    {"context": context, "verse_starts": [starts[v] for v in numbers], "qas": qas}
                ],
            }
        )
    out.mkdir(parents=True, exist_ok=True)
    for name, data in articles.items():
        atomic_write_text(
            out / f"{name}.json",
            json.dumps({"version": f"mhcc-{bible}", "data": data}, ensure_ascii=False) + "\n",
        )
    report = _report(splits, dropped, version, bible, bible_version)
    atomic_write_text(out / "PROVENANCE.md", _qa_provenance(report))
    return report


def _report(splits, dropped, version, bible, bible_version) -> dict:
    return {
        "headings": {name: len(rows) for name, rows in splits.items()},
        "chapters": {
            name: len({(h.book, h.chapter) for h in rows}) for name, rows in splits.items()
        },
        "dropped": dropped,
        "version": version,
        "bible": bible,
        "bible_version": bible_version,
    }


def _source_lines(report: dict) -> list[str]:
    module = MODULES[report["bible"]]
    counts = ", ".join(
        f"{name} {report['headings'][name]:,} headings from {report['chapters'][name]:,} chapters"
        for name in SPLITS
    )
    return [
        f"Built from two SWORD modules packaged by Debian (Public Domain): {NAME} "
        f"{report['version']} (Matthew Henry's Concise Commentary on the Whole Bible, "
        f"`{PACKAGE}`), read by transformer/data/sources/commentary.py, and {module.name} "
        f"{report['bible_version']} ({module.title}, `{module.package}`), read with pysword.",
        "",
        "Each chapter of the commentary opens with an outline: headings, each with the verses "
        f"it covers. {counts}.",
        "",
        "Splits hold whole chapters: sha256 of `Book.chapter`, mod 100; under "
        f"{VALID_PERCENT} is valid, under {VALID_PERCENT + TEST_PERCENT} test, the rest train.",
        "",
        "Dropped headings:",
        "",
        *dropped_lines(report["dropped"]),
    ]


def _headings_provenance(report: dict) -> str:
    words = report["passage_words"]
    lines = [
        "# Summarization: Bible passages and their headings in Matthew Henry's commentary",
        "",
        "Lines of {train,valid,test}.tsv are `passage<TAB>heading`: the passage is the verses "
        "a heading covers, one line; {split}.ids gives `Book.chapter.first-last` for each line. "
        f"Passages average {words['train']:.0f} words (train), {words['test']:.0f} (test).",
        "",
        *_source_lines(report),
    ]
    return "\n".join(lines) + "\n"


def _qa_provenance(report: dict) -> str:
    lines = [
        "# Question answering: which verses of a chapter a commentary heading covers",
        "",
        "{train,valid,test}.json are in SQuAD 1.1's format (data / paragraphs / qas / answers). "
        "A paragraph is one chapter: its context is the chapter's verses joined by one space; "
        "`verse_starts` (added to the format) is the character offset of each verse. A question "
        "is one heading of the chapter's outline; its answer is the text of the verses it "
        "covers, from the start of the first to the end of the last, and `verses` is "
        "[first, last].",
        "",
        *_source_lines(report),
    ]
    return "\n".join(lines) + "\n"
