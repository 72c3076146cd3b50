"""Verse alignment of two texts: pair verses with the same book/chapter/verse, drop the chapters
whose verse numbering does not line up (misalignment) and, in the others, the verses that do not
translate each other (verse_align); split whole chapters into train/valid/test (split_of).
"""

from __future__ import annotations

import hashlib
import math
import statistics
from dataclasses import dataclass, field

from .sword import Verse
from .verse_align import aligned_verses, fit_length_model

Chapter = tuple[str, int]


@dataclass
class Alignment:
    pairs: dict[Verse, tuple[str, str]]
    dropped_chapters: dict[Chapter, str] = field(default_factory=dict)  # chapter -> reason
    dropped_verses: list[Verse] = field(default_factory=list)  # text on one side only
    misaligned_verses: list[Verse] = field(
        default_factory=list
    )  # text on both sides, not each other's (verse_align)
    only_in_one: int = 0  # verses whose book/chapter the other module lacks


def _correlation(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 3 or statistics.pstdev(xs) == 0 or statistics.pstdev(ys) == 0:
        return -1.0
    return statistics.correlation(xs, ys)


def misalignment(pairs: list[tuple[str, str]]) -> str | None:
    """Why a chapter's verses (in order) do not line up, or None when they do.

    Signs of a chapter whose verse numbering differs between the two texts (Hebrew vs English
    numbering, verses merged at a chapter boundary): its first or last verse is empty on one
    side only, the verse lengths match better when one side is shifted by one or two verses, or
    they do not correspond at all (a verse-length correlation under 0.2 over 8 or more verses;
    this also drops a few good chapters whose verses are all of one length, e.g. Lamentations 5).
    """
    for position, (a, b) in ((0, pairs[0]), (-1, pairs[-1])):
        if bool(a) != bool(b):
            return f"{'first' if position == 0 else 'last'} verse empty in one text"
    if len(pairs) >= 4:
        xs = [math.log1p(len(a)) for a, _ in pairs]
        ys = [math.log1p(len(b)) for _, b in pairs]
        same = _correlation(xs, ys)
        for shift in (1, 2):
            shifted = max(
                _correlation(xs[shift:], ys[:-shift]), _correlation(xs[:-shift], ys[shift:])
            )
            if shifted > max(same + 0.3, 0.5):
                return (
                    f"verse lengths line up shifted by {shift} "
                    f"(correlation {shifted:.2f} vs {same:.2f})"
                )
        if len(pairs) >= 8 and same < 0.2:
            return f"verse lengths do not correspond (correlation {same:.2f})"
    return None


def align(src: dict[Verse, str], tgt: dict[Verse, str]) -> Alignment:
    """Pair verses with the same book/chapter/verse; drop chapters that do not line up, then the
    verses of the remaining chapters that do not translate each other (verse_align)."""
    chapters: dict[Chapter, list[Verse]] = {}
    for key in src:
        if key in tgt:
            chapters.setdefault(key[:2], []).append(key)
    src_counts: dict[Chapter, int] = {}
    tgt_counts: dict[Chapter, int] = {}
    for key in src:
        src_counts[key[:2]] = src_counts.get(key[:2], 0) + 1
    for key in tgt:
        tgt_counts[key[:2]] = tgt_counts.get(key[:2], 0) + 1
    result = Alignment(pairs={})
    result.only_in_one = sum(1 for k in src if k not in tgt) + sum(1 for k in tgt if k not in src)
    kept: list[
        tuple[list[Verse], list[tuple[str, str]]]
    ] = []  # chapters that pass the chapter checks
    for chapter, keys in chapters.items():
        if src_counts[chapter] != tgt_counts[chapter]:
            result.dropped_chapters[chapter] = (
                f"{src_counts[chapter]} vs {tgt_counts[chapter]} verses"
            )
            continue
        texts = [(src[k], tgt[k]) for k in keys]
        if not any(a or b for a, b in texts):
            continue  # a chapter neither text has (e.g. an apocryphal book in the versification)
        reason = misalignment(texts)
        if reason:
            result.dropped_chapters[chapter] = reason
            continue
        kept.append((keys, texts))
    model = fit_length_model([pair for _, texts in kept for pair in texts])
    for keys, texts in kept:
        for key, (a, b), aligned in zip(keys, texts, aligned_verses(texts, model), strict=True):
            if a and b:
                if aligned:
                    result.pairs[key] = (a, b)
                else:
                    result.misaligned_verses.append(key)
            elif a or b:
                result.dropped_verses.append(key)
    return result


def split_of(chapter: Chapter, valid_percent: int = 2, test_percent: int = 3) -> str:
    """train / valid / test for a whole chapter, from a hash of its name: deterministic and
    independent of which texts are paired, so neighbouring verses never straddle splits."""
    bucket = int(hashlib.sha256(f"{chapter[0]}.{chapter[1]}".encode()).hexdigest(), 16) % 100
    if bucket < valid_percent:
        return "valid"
    if bucket < valid_percent + test_percent:
        return "test"
    return "train"
