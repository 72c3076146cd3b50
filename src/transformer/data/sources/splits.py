"""What the modern-text builders share: held-out splits by a stable hash of a group key, one pair
per line, deduplication, and writing OUT/{split}.{spa,eng} and PROVENANCE.md atomically.

Rules (every builder states its own group key and percentages in its PROVENANCE.md):
- A group (a catalog, a package) goes whole to train, valid or test by
  sha256(key) mod 10,000 / 100, a number in [0, 100): under valid_percent is valid, under
  valid_percent + test_percent is test, the rest train. The same key always lands in the same
  split, whatever else the machine has installed.
- A segment is one line: every run of whitespace (newlines, tabs, U+2028, U+0085 ...) becomes
  one space (one_line), so line i of .spa always translates line i of .eng.
- The same (English, Spanish) pair is kept once, in the split of its earliest occurrence in
  train, valid, test order. A valid or test pair whose English also occurs in an earlier split
  is dropped: no English segment of valid or test is ever seen in training.
- With one_translation, an English segment keeps one Spanish translation: the most frequent,
  ties broken by the first seen; the others are dropped as conflicting.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ...files import atomic_write_text
from ..text import DataError

SPLITS = ("train", "valid", "test")
SOURCE, TARGET = "spa", "eng"  # the file suffixes: Spanish source, English target


def split_of(key: str, valid_percent: float, test_percent: float) -> str:
    """train / valid / test for a group key, from sha256(key): deterministic across rebuilds."""
    bucket = int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % 10_000 / 100
    if bucket < valid_percent:
        return "valid"
    if bucket < valid_percent + test_percent:
        return "test"
    return "train"


def one_line(text: str) -> str:
    """Every run of whitespace (line breaks of any kind included) as one space, ends stripped."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Pair:
    """One aligned segment pair and the group (catalog, package) it came from."""

    spa: str
    eng: str
    group: str


def assign(
    pairs: Iterable[Pair],
    split_of_group: Callable[[str], str],
    dropped: Counter,
    one_translation: bool = False,
) -> dict[str, list[tuple[str, str]]]:
    """{split: [(spa, eng), ...]} in first-seen order, deduplicated by the module's rules; each
    pair dropped is counted in `dropped` under its reason."""
    order = {name: rank for rank, name in enumerate(SPLITS)}
    seen: dict[tuple[str, str], list] = {}  # (eng, spa) -> [count, earliest split rank]
    for pair in pairs:
        rank = order[split_of_group(pair.group)]
        key = (pair.eng, pair.spa)
        if key in seen:
            dropped["duplicate pair"] += 1
            seen[key][0] += 1
            seen[key][1] = min(seen[key][1], rank)
        else:
            seen[key] = [1, rank]
    if one_translation:
        best: dict[str, tuple[str, str]] = {}
        for key, (count, _) in seen.items():  # first seen first: a tie keeps the earlier
            if key[0] not in best or count > seen[best[key[0]]][0]:
                best[key[0]] = key
        for key in [k for k in seen if best[k[0]] != k]:
            dropped["conflicting translation of an English string (not its most frequent)"] += 1
            del seen[key]
    english_rank: dict[str, int] = {}  # eng -> earliest split of the pairs kept so far
    for (eng, _), (_, rank) in seen.items():
        english_rank[eng] = min(english_rank.get(eng, rank), rank)
    splits: dict[str, list[tuple[str, str]]] = {name: [] for name in SPLITS}
    for (eng, spa), (_, rank) in seen.items():
        if english_rank[eng] < rank:
            earlier = SPLITS[english_rank[eng]]
            dropped[f"in {SPLITS[rank]} but its English is also in {earlier}"] += 1
            continue
        splits[SPLITS[rank]].append((spa, eng))
    return splits


def check_out(out_dir: str | os.PathLike, what: str) -> Path:
    """Refuse an --out that is a file (before anything is read or written)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DataError(f"--out {out_dir} is a file: give a directory for the {what}")
    return out


def write_corpus(
    out_dir: str | os.PathLike,
    splits: dict[str, list[tuple[str, str]]],
    provenance: str,
    extra: dict[str, str] | None = None,
) -> None:
    """OUT/{split}.spa and .eng for each split given, extra files by name, then PROVENANCE.md:
    each written to a temporary file and renamed, so no reader sees half a file."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, pairs in splits.items():
        for suffix, side in ((SOURCE, 0), (TARGET, 1)):
            lines = [pair[side] for pair in pairs]
            assert all(line and line == one_line(line) for line in lines), "one segment per line"
            atomic_write_text(out / f"{name}.{suffix}", "".join(line + "\n" for line in lines))
    for name, text in (extra or {}).items():
        atomic_write_text(out / name, text)
    atomic_write_text(out / "PROVENANCE.md", provenance)


def counts_line(splits: dict[str, list[tuple[str, str]]], unit: str) -> str:
    """ "train 1,234, valid 56, test 78 pairs (total 1,368)"."""
    parts = ", ".join(f"{name} {len(pairs):,}" for name, pairs in splits.items())
    return f"{parts} {unit} (total {sum(len(p) for p in splits.values()):,})"


def dropped_lines(dropped: Counter) -> list[str]:
    """A Markdown list of what was dropped, most frequent reason first."""
    if not dropped:
        return ["- nothing"]
    return [f"- {count:,}: {reason}" for reason, count in dropped.most_common()]


def split_rule(key: str, valid_percent: float, test_percent: float) -> str:
    """The held-out rule in words, for PROVENANCE.md."""
    return (
        f"Splits hold whole groups ({key}): sha256 of the key, mod 10,000, / 100 gives a number "
        f"in [0, 100); under {valid_percent:g} is valid, under {valid_percent + test_percent:g} "
        "test, the rest train, so a rebuild gives the same splits. A pair seen in several splits "
        "is kept once, in the earliest of train, valid, test; a valid or test pair whose English "
        "side is also in an earlier split is dropped, so valid and test English never occurs in "
        "train."
    )
