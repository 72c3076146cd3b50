"""Sentences of a paragraph, and pairing the sentences of two translations of one paragraph by
their lengths (Gale & Church 1993, over characters).

Rules:
- split_sentences cuts after . ! or ? (and any closing quotes or brackets) followed by
  whitespace and a capital, a digit or an opening mark (¿ ¡ " ( «), except after a known
  abbreviation (e.g., etc., Dr., p. ej. ...; see ABBREVIATIONS), a single letter (an initial)
  or a dotted acronym (A.D., U.S.).
- align_sentences chooses beads by dynamic programming, cheapest first: 1-1, 2-1, 1-2, 2-2,
  1-0 and 0-1, each costing its length cost (verse_align.LengthModel: d^2 / 2 of the merged
  lengths) plus its prior (BEAD_COST, -log of Gale & Church's bead frequencies relative to
  1-1). Beads with sentences on both sides become one pair each (merged sentences joined by a
  space); 1-0 and 0-1 beads are sentences without a counterpart, dropped and counted.
"""

from __future__ import annotations

import math
import re

from .bible.verse_align import LengthModel

# Gale & Church's bead frequencies (1-1 .89, 1-0 and 0-1 .0099, 2-1 and 1-2 .089, 2-2 .011),
# as -log(p / p(1-1)): what a bead costs beyond its lengths.
BEAD_COST = {
    (1, 1): 0.0,
    (2, 1): -math.log(0.089 / 2 / 0.89),
    (1, 2): -math.log(0.089 / 2 / 0.89),
    (2, 2): -math.log(0.011 / 0.89),
    (1, 0): -math.log(0.0099 / 2 / 0.89),
    (0, 1): -math.log(0.0099 / 2 / 0.89),
}
ABBREVIATIONS = frozenset(
    "e.g i.e etc vs approx cf dr mr mrs ms prof inc ltd co jr sr st no nos fig ver vol resp "
    "p.ej ej aprox sra srta dra pág núm ud uds et al ca".split()
)
_BOUNDARY = re.compile(r"[.!?][\"'”’)\]»]*\s+(?=[\"'“‘(\[¿¡«]*[A-ZÁÉÍÓÚÑÜ0-9])")


def split_sentences(text: str) -> list[str]:
    """The sentences of one line of text (see the module's rules)."""
    sentences, start = [], 0
    for match in _BOUNDARY.finditer(text):
        words = text[start : match.start()].split()
        last = words[-1].lstrip("\"'“‘([¿¡«").lower() if words else ""
        if text[match.start()] == "." and (
            last in ABBREVIATIONS
            or (len(last) == 1 and last.isalpha())
            or re.fullmatch(r"(\w\.)+\w", last)  # A.D. U.S. e.g. (the last dot is the match)
        ):
            continue
        sentences.append(text[start : match.end()].strip())
        start = match.end()
    if text[start:].strip():
        sentences.append(text[start:].strip())
    return sentences


def align_sentences(
    src: list[str], tgt: list[str], model: LengthModel
) -> tuple[list[tuple[str, str]], int]:
    """(pairs of aligned sentence groups, sentences without a counterpart) for two translations
    of one paragraph, in order."""
    n, m = len(src), len(tgt)
    best = {(0, 0): 0.0}
    back: dict[tuple[int, int], tuple[int, int]] = {}
    for i in range(n + 1):
        for j in range(m + 1):
            if (i, j) not in best:
                continue
            for (di, dj), prior in BEAD_COST.items():
                if i + di > n or j + dj > m:
                    continue
                a = sum(len(s) for s in src[i : i + di]) + di - 1 if di else 0
                b = sum(len(s) for s in tgt[j : j + dj]) + dj - 1 if dj else 0
                cost = best[(i, j)] + prior + (model.cost(a, b) if di and dj else 0.0)
                cell = (i + di, j + dj)
                if cost < best.get(cell, math.inf):
                    best[cell], back[cell] = cost, (di, dj)
    pairs, alone, cell = [], 0, (n, m)
    while cell != (0, 0):
        di, dj = back[cell]
        i, j = cell[0] - di, cell[1] - dj
        if di and dj:
            pairs.append((" ".join(src[i : i + di]), " ".join(tgt[j : j + dj])))
        else:
            alone += di + dj
        cell = (i, j)
    return pairs[::-1], alone
