"""Verse-level alignment check: which verses of a chapter really translate each other.

Two translations can number a chapter's verses alike and still pair them wrongly from some verse
on: the Reina-Valera splits 1 Chronicles 21:15 in two and joins two verses further on, so its
verses 15-30 each hold the text of the World English Bible's verse before; 1 Kings 22 shifts
at verse 43 (Hebrew numbering), Romans 5:12 opens with a clause the other text has in verse 11,
1 Corinthians 16:24 ends with a subscription the other text lacks. The chapter checks (equal
verse counts, whole-chapter length correlation) keep such chapters; this check keeps only the
verses that pair one to one under their own numbers.

Rules (a length-based alignment in the manner of Gale & Church 1993, over characters):
- Lengths: a verse pair of lengths (a, b) has residual d = (b - c a) / sqrt(s2 (a + b) / 2 + 1),
  where c is the corpus's target/source length ratio and s2 its residual variance per character
  (fit_length_model: c from the totals, s2 from the median squared residual, robust to the
  misaligned pairs it is meant to find). A matched pair costs d^2 / 2.
- Beads, chosen by dynamic programming over the chapter, cheapest path from (0, 0) to (n, n):
  1-1 match (d^2 / 2); 1-1 mismatch (MISMATCH_COST, a pair too unlike to be a translation, e.g.
  a verse with a clause the other lacks); 2-1 and 1-2 merges (the merged lengths' d^2 / 2 +
  SHIFT_COST); 1-0 and 0-1 (SHIFT_COST). A shift of the numbering therefore needs evidence
  worth two beads' penalty; paths stay within MAX_OFFSET verses of the diagonal.
- Kept: the 1-1 matches on the diagonal, i.e. verse k against verse k. Verses inside a shift
  (paired with another number) and mismatches are dropped, not renumbered: the verse references
  of the output stay those of both texts.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

SHIFT_COST = (
    8.0  # a merge, split or unpaired verse: a shift needs two, i.e. 16 nats of length evidence
)
MISMATCH_COST = 8.0  # a pair whose residual exceeds 4 standard deviations is not a translation
MAX_OFFSET = 3  # verses a chapter's numbering may drift between the texts
MIN_VARIANCE = (
    0.5  # floor for s2, so texts of identical lengths (tests, a text against itself) stay finite
)


@dataclass(frozen=True)
class LengthModel:
    ratio: float  # c: target characters per source character
    variance: float  # s2: residual variance per character

    def cost(self, src_len: int, tgt_len: int) -> float:
        """d^2 / 2 for a pair of lengths (characters)."""
        d = (tgt_len - self.ratio * src_len) / math.sqrt(
            self.variance * (src_len + tgt_len) / 2 + 1
        )
        return d * d / 2


def fit_length_model(pairs: list[tuple[str, str]]) -> LengthModel:
    """c and s2 from verse pairs (most of them aligned): c from the character totals, s2 from the
    median of the squared residuals divided by the median of a chi-square with one degree of
    freedom (0.455), so that the misaligned minority does not inflate it."""
    lengths = [(len(a), len(b)) for a, b in pairs if a and b]
    if not lengths:
        return LengthModel(1.0, MIN_VARIANCE)
    ratio = sum(b for _, b in lengths) / sum(a for a, _ in lengths)
    residuals = [(b - ratio * a) ** 2 / ((a + b) / 2 + 1) for a, b in lengths]
    return LengthModel(ratio, max(MIN_VARIANCE, statistics.median(residuals) / 0.455))


Bead = tuple[
    int, int, int, int, bool
]  # (source verse, target verse, source verses, target verses, kept)


def best_path(pairs: list[tuple[str, str]], model: LengthModel) -> tuple[float, list[Bead]]:
    """The cheapest bead sequence covering a chapter's verse pairs (in order), and its cost."""
    n = len(pairs)
    src = [len(a) for a, _ in pairs]
    tgt = [len(b) for _, b in pairs]
    best: dict[tuple[int, int], float] = {(0, 0): 0.0}
    back: dict[tuple[int, int], tuple[int, int, bool]] = {}  # cell -> (di, dj, kept)

    def relax(i: int, j: int, di: int, dj: int, cost: float, kept: bool) -> None:
        cell = (i + di, j + dj)
        if abs(cell[0] - cell[1]) > MAX_OFFSET:  # the callers keep cells within the chapter
            return
        total = best[(i, j)] + cost
        if total < best.get(cell, math.inf):
            best[cell] = total
            back[cell] = (di, dj, kept)

    for i in range(n + 1):
        for j in range(max(0, i - MAX_OFFSET), min(n, i + MAX_OFFSET) + 1):
            if (i, j) not in best:
                continue
            if i < n and j < n:
                cost = model.cost(src[i], tgt[j])
                if cost <= MISMATCH_COST:
                    relax(i, j, 1, 1, cost, i == j)
                else:
                    relax(i, j, 1, 1, MISMATCH_COST, False)
            if i + 1 < n and j < n:
                relax(i, j, 2, 1, model.cost(src[i] + src[i + 1], tgt[j]) + SHIFT_COST, False)
            if i < n and j + 1 < n:
                relax(i, j, 1, 2, model.cost(src[i], tgt[j] + tgt[j + 1]) + SHIFT_COST, False)
            if i < n:
                relax(i, j, 1, 0, SHIFT_COST, False)
            if j < n:
                relax(i, j, 0, 1, SHIFT_COST, False)
    beads: list[Bead] = []
    cell = (n, n)
    while cell != (0, 0):
        di, dj, kept = back[cell]
        cell = (cell[0] - di, cell[1] - dj)
        beads.append((cell[0], cell[1], di, dj, kept))
    return best[(n, n)], beads[::-1]


def aligned_verses(pairs: list[tuple[str, str]], model: LengthModel) -> list[bool]:
    """For a chapter's verse pairs in order (same numbers, equal counts): whether each verse k of
    the source translates verse k of the target (see the module's rules)."""
    keep = [False] * len(pairs)
    for i, _, _, _, kept in best_path(pairs, model)[1]:
        if kept:  # a 0-1 bead at the chapter's end starts at i = n
            keep[i] = True
    return keep
