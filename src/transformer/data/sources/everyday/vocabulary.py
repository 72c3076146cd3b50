"""`transformer data vocabulary`: Spanish -> English pairs of children's software: GCompris's
instructions and vocabulary (gcompris.py) and KDE's vocabulary lists (kvtml.py), as
OUT/{train,valid,test}.{spa,eng} and OUT/PROVENANCE.md.

Rules:
- Sources (SOURCES): gcompris-qt-data and kdeedu-kvtml-data, read under --root (default /: an
  installed system; or a tree where each package was extracted with dpkg-deb -x). A package
  that is missing is skipped and named in the report with its install line; with both missing,
  a DataError says what to install.
- The pairs are each reader's (their modules give the rules and the drops).
- Splits hold whole groups (a GCompris QML context, a kvtml list): sha256 of the group key
  (splits.split_of), VALID_PERCENT valid, TEST_PERCENT test, the rest train: about 300 pairs
  each in valid and test with the packages of Debian 12, since a few contexts hold a third of
  the messages (ActivityInfo: every activity's title and description). splits.assign keeps a
  pair once and keeps valid and test English out of train.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from ...text import DataError
from .. import packages
from ..splits import (
    SPLITS,
    Pair,
    assign,
    check_out,
    counts_line,
    dropped_lines,
    split_of,
    split_rule,
    write_corpus,
)
from . import gcompris, kvtml

VALID_PERCENT = 15.0
TEST_PERCENT = 15.0
SOURCES: tuple[tuple[str, str, str, Callable[[str | os.PathLike, Counter], list[Pair]]], ...] = (
    ("gcompris", gcompris.PACKAGE, gcompris.CATALOGUE, gcompris.gcompris_pairs),
    ("kvtml", kvtml.PACKAGE, f"{kvtml.FOLDER}/es", kvtml.kvtml_pairs),
)
"""(source name: the group prefix, Debian package, the path under the root that says it is
installed, reader)."""
INSTALL = (
    "apt-get install gcompris-qt-data kdeedu-kvtml-data (or apt-get download them and "
    "dpkg-deb -x each into DIR, then --root DIR)"
)


def vocabulary_split(group: str) -> str:
    return split_of(group, VALID_PERCENT, TEST_PERCENT)


def build_vocabulary_corpus(out_dir: str | os.PathLike, root: str | os.PathLike = "/") -> dict:
    """Write OUT/{train,valid,test}.{spa,eng} and PROVENANCE.md (the module's rules); return
    {"pairs": {split: n}, "dropped": Counter, "sources": {name: pairs kept}, "skipped": [package],
    "install": the apt-get line for them, "versions", "licences": {package: ...}}."""
    out = check_out(out_dir, "vocabulary pairs")
    if not Path(root).is_dir():
        raise DataError(
            f"--root {root} does not exist: give the directory the packages were installed or "
            "extracted under (default /)"
        )
    pairs: list[Pair] = []
    dropped: Counter = Counter()
    found, skipped = [], []
    for name, package, holding, reader in SOURCES:
        if (Path(root) / holding).exists():
            pairs += reader(root, dropped)
            found.append((name, package))
        else:
            skipped.append(package)
    if not found:
        raise DataError(f"neither vocabulary package is installed: {INSTALL}")
    splits = assign(pairs, vocabulary_split, dropped)
    source_of = {(p.spa, p.eng): p.group.split("/", 1)[0] for p in reversed(pairs)}
    per_source = {name: {split: 0 for split in SPLITS} for name, _ in found}
    for split, kept in splits.items():
        for pair in kept:
            per_source[source_of[pair]][split] += 1
    doc = Path(root) / "usr/share/doc"
    report = {
        "pairs": {split: len(splits[split]) for split in SPLITS},
        "dropped": dropped,
        "sources": {name: sum(counts.values()) for name, counts in per_source.items()},
        "skipped": skipped,
        "install": f"apt-get install {' '.join(skipped)}" if skipped else "",
        "versions": {p: packages.package_version(p, root) for _, p in found},
        "licences": {p: packages.licence(p, doc) for _, p in found},
    }
    write_corpus(out, splits, _provenance(splits, report, per_source, dict(found)))
    return report


def _provenance(splits: dict, report: dict, per_source: dict, found: dict[str, str]) -> str:
    rows = [
        f"| {name} | {package} {report['versions'][package]} | {report['licences'][package]} | "
        + " | ".join(f"{per_source[name][split]:,}" for split in SPLITS)
        + " |"
        for name, package in found.items()
    ]
    skipped = (
        [f"Not installed, skipped: {', '.join(report['skipped'])} ({report['install']}).", ""]
        if report["skipped"]
        else []
    )
    return "\n".join(
        [
            "# Children's software vocabulary: Spanish -> English",
            "",
            "Built by `transformer data vocabulary` from two Debian packages: GCompris's Spanish "
            "catalogue (gcompris_es.qm: instructions for children, vocabulary words, place "
            "names; a Qt .qm keeps the English source beside the translation) and KDE's kvtml "
            "vocabulary lists (Spanish and English lists translated from the same templates, "
            "paired by entry id: words and their definitions).",
            "",
            "Licence: each package's own (from its copyright file); the translations are "
            "distributed under the same terms.",
            "",
            "| source | package | licence | train | valid | test |",
            "|---|---|---|---:|---:|---:|",
            *rows,
            "",
            *skipped,
            f"Pairs: {counts_line(splits, 'pairs')}.",
            "",
            "## Splits",
            "",
            split_rule(
                "a GCompris QML context as gcompris/CONTEXT, a kvtml list as kvtml/ENGLISH-STEM",
                VALID_PERCENT,
                TEST_PERCENT,
            ),
            "",
            "## What is kept",
            "",
            "GCompris: each message with an English source and one Spanish translation, cleaned "
            "as a software message (`data ui-strings`' rules: inline markup stripped, "
            "placeholders such as %1 kept when both sides have the same; long manuals, "
            "markup-heavy and plural messages dropped). kvtml: word and definition pairs of 15 "
            "lists (the graded easy/medium/hard lists are skipped: their Spanish lists are "
            "their own), with the translator's inserted entries and the entries whose Spanish "
            "is another thing dropped. Both: a Spanish side equal to the English (place names, "
            "shared words) or a number only is dropped. The rules in full: the docstrings of "
            "transformer.data.sources.everyday.gcompris and .kvtml.",
            "",
            "## Dropped",
            "",
            *dropped_lines(report["dropped"]),
            "",
        ]
    )
