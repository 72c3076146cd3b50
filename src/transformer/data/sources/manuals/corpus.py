"""`transformer data manuals`: Spanish -> English sentence pairs of manual prose, from the six
Debian manuals that ship the same pages in both languages (translated with po4a or itstool, so
the two sides have the same structure). Every other translated manual in Debian is left out on
purpose: it is a test set no one trains on.

Rules (which manuals and pages: catalog.py; their text blocks: blocks.py; pairing and filters:
pairing.py):
- Splits: whole documents, by sha256 of "manual/relative path" (splits.split_of),
  VALID_PERCENT and TEST_PERCENT; splits.assign deduplicates and keeps valid and test English out
  of train. With max_share below 1, a manual's training pairs beyond that share of all training
  pairs are dropped, whole documents at a time in hash order (valid and test keep theirs).
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ...text import DataError
from .. import packages
from ..bible.verse_align import LengthModel, fit_length_model
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
from .catalog import MANUALS, Manual, documents
from .pairing import (
    MAX_CHARS,
    MIN_WORDS,
    RATIO_RANGE,
    Unequal,
    block_pairs,
    pairs_by_id,
    reason_to_drop,
    sentence_pairs,
)

VALID_PERCENT = 3.0
TEST_PERCENT = 3.0


@dataclass
class Found:
    """What one manual gave."""

    documents: int = 0  # pages present in both languages
    how: Counter = field(default_factory=Counter)  # documents paired by id, position, aligner;
    # skipped: unequal block counts with unequal="skip", or a page without blocks
    pairs: dict[str, int] = field(default_factory=lambda: {name: 0 for name in SPLITS})
    licence: str = packages.UNKNOWN
    versions: str = ""


def manual_split(group: str) -> str:
    return split_of(group, VALID_PERCENT, TEST_PERCENT)


def _install_line(manuals: list[Manual]) -> str:
    names = dict.fromkeys(p for m in manuals for p in (m.english, m.spanish))
    return "apt-get install -y " + " ".join(names)


def build_manuals_corpus(
    out_dir: str | os.PathLike,
    root: str | os.PathLike = "/",
    unequal: Unequal = "align",
    max_share: float = 1.0,
) -> dict:
    """Write OUT/{train,valid,test}.{spa,eng} and PROVENANCE.md; return a report."""
    out = check_out(out_dir, "manual pairs")
    base = Path(root)
    if not base.is_dir():
        raise DataError(
            f"--root {root} does not exist: give the directory the packages were installed under "
            "(default /)"
        )
    found: dict[str, Found] = {}
    skipped: list[Manual] = []
    pages: list[tuple[Manual, str, list[str], list[str]]] = []
    dropped: Counter = Counter()
    blocks_dropped: Counter = Counter()
    for manual in MANUALS:
        docs = documents(base, manual)
        if docs is None:
            skipped.append(manual)
            continue
        found[manual.name] = Found(documents=len(docs))
        for relative, en_file, es_file in docs:
            english = manual.reader(en_file.read_bytes(), blocks_dropped)
            spanish = manual.reader(es_file.read_bytes(), blocks_dropped)
            pages.append((manual, relative, english, spanish))
    if not found:
        raise DataError(f"none of the manuals is installed: {_install_line(list(MANUALS))}")
    model = fit_length_model(
        [(en.text, es.text) for _, _, english, spanish in pages if len(english) == len(spanish)
         for en, es in zip(english, spanish, strict=True)]
    )  # fmt: skip
    pairs: list[Pair] = []
    for manual, relative, english, spanish in pages:
        report = found[manual.name]
        keyed = pairs_by_id(english, spanish) if manual.by_id else None
        if keyed is not None:
            how, blocks = "id", keyed
            unmatched = len(english) + len(spanish) - 2 * len(keyed)
            dropped["block without an id, or whose id has no counterpart (pairing by id)"] += (
                unmatched
            )
        else:
            how, blocks = block_pairs(english, spanish, unequal, model)
        report.how[how] += 1
        if how == "skipped":
            why = "no text blocks" if not english or not spanish else "block counts differ"
            dropped[f"document: {why}"] += 1
            continue
        group = f"{manual.name}/{relative}"
        for spa_block, eng_block in blocks:
            for spa, eng in sentence_pairs(spa_block, eng_block, model, dropped):
                reason = reason_to_drop(spa, eng)
                if reason:
                    dropped[reason] += 1
                else:
                    pairs.append(Pair(spa, eng, group))
    splits = assign(pairs, manual_split, dropped)
    manual_of = {(p.spa, p.eng): p.group.split("/", 1)[0] for p in pairs}
    if max_share < 1.0:
        splits["train"] = _cap(splits["train"], manual_of, pairs, max_share, dropped)
    for name, kept in splits.items():
        for pair in kept:
            found[manual_of[pair]].pairs[name] += 1
    installed = packages.versions(
        (p for m in MANUALS if m.name in found for p in (m.english, m.spanish)), base
    )
    for manual in MANUALS:
        if manual.name in found:
            found[manual.name].licence = packages.licence(manual.english, base / "usr/share/doc")
            found[manual.name].versions = ", ".join(
                f"{p} {installed.get(p, packages.UNKNOWN)}"
                for p in dict.fromkeys((manual.english, manual.spanish))
            )
    report = {
        "pairs": {name: len(splits[name]) for name in SPLITS},
        "manuals": found,
        "skipped": [m.name for m in skipped],
        "install": _install_line(skipped) if skipped else "",
        "dropped": dropped,
        "blocks_dropped": blocks_dropped,
        "model": model,
    }
    write_corpus(out, splits, _provenance(splits, report, unequal, max_share))
    return report


def _cap(
    train: list[tuple[str, str]],
    manual_of: dict[tuple[str, str], str],
    pairs: list[Pair],
    max_share: float,
    dropped: Counter,
) -> list[tuple[str, str]]:
    """Train without each manual's pairs beyond max_share of the training pairs (whole documents,
    in sha256 order of their keys)."""
    per_manual = Counter(manual_of[p] for p in train)
    others = {name: len(train) - count for name, count in per_manual.items()}
    group_of = {(p.spa, p.eng): p.group for p in pairs}
    kept_groups: set[str] = set()
    for name, count in per_manual.items():
        limit = int(max_share / (1 - max_share) * others[name]) if max_share < 1 else count
        if count <= limit:
            kept_groups |= {group_of[p] for p in train if manual_of[p] == name}
            continue
        sizes = Counter(group_of[p] for p in train if manual_of[p] == name)
        total = 0
        for group in sorted(sizes, key=lambda g: hashlib.sha256(g.encode()).hexdigest()):
            if total + sizes[group] <= limit:
                kept_groups.add(group)
                total += sizes[group]
    kept = [p for p in train if group_of[p] in kept_groups]
    if len(kept) < len(train):
        dropped[f"train pair beyond a manual's share of {max_share:g} (--max-share)"] += len(
            train
        ) - len(kept)
    return kept


def _provenance(splits: dict, report: dict, unequal: Unequal, max_share: float) -> str:
    model: LengthModel = report["model"]
    rows = [
        f"| {name} | {f.versions} | {f.licence} | {f.documents:,} | {f.how['id']:,} | "
        f"{f.how['position']:,} | {f.how['aligner']:,} | {f.how['skipped']:,} | "
        f"{f.pairs['train']:,} | {f.pairs['valid']:,} | "
        f"{f.pairs['test']:,} |"
        for name, f in report["manuals"].items()
    ]
    skipped = (
        [f"Not installed, skipped: {', '.join(report['skipped'])} ({report['install']}).", ""]
        if report["skipped"]
        else []
    )
    lines = [
        "# Debian manuals: Spanish -> English",
        "",
        "Built by `transformer data manuals` from manuals that Debian packages install in English "
        "and Spanish (translations made with po4a or itstool, so both sides share the page "
        "structure). Only these six manuals are read; every other translated manual in Debian "
        "is kept out as an unseen test set.",
        "",
        "Licence: each manual keeps its own licence (below, from the English package's "
        "copyright file; the Spanish translation is distributed under the same terms). Check "
        "before redistributing.",
        "",
        "| manual | packages | licence | documents in both | by id | by position | by aligner | "
        "skipped | train | valid | test |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        *skipped,
        f"Pairs: {counts_line(splits, 'sentence pairs')}.",
        "",
        "## Splits",
        "",
        split_rule("documents, keyed by manual/relative path", VALID_PERCENT, TEST_PERCENT),
        *(
            [f"Training pairs of one manual are capped at {max_share:g} of all training pairs."]
            if max_share < 1
            else []
        ),
        "",
        "## Segments",
        "",
        "A document is one page present in both languages. Its text blocks (paragraphs, list "
        "items, titles; code, commands, tables and page furniture dropped; inline code kept) "
        "pair by their HTML id in LibreOffice's help (the same in every language; its pages "
        "order some sections by their translated names), elsewhere by position when both "
        "sides have as many, otherwise "
        + (
            "by a length-based alignment of the blocks (Gale & Church)"
            if unequal == "align"
            else "the document is skipped"
        )
        + ". Each block pair is cut into sentences and aligned by length (Gale & Church; "
        f"Spanish/English length ratio {model.ratio:.3f}, variance {model.variance:.2f} per "
        f"character, fitted on the position-paired blocks); beads with sentences on both sides "
        "are pairs. Filters: Spanish equal to the English or containing it, fewer than "
        f"{MIN_WORDS} English words, "
        f"more than {MAX_CHARS} characters, a length ratio outside {RATIO_RANGE[0]}-"
        f"{RATIO_RANGE[1]}.",
        "",
        "Blocks dropped while reading pages (both languages):",
        "",
        *dropped_lines(report["blocks_dropped"]),
        "",
        "Dropped:",
        "",
        *dropped_lines(report["dropped"]),
    ]
    return "\n".join(lines) + "\n"
