"""One document's blocks paired, cut into sentences and filtered, for `transformer data manuals`.

Rules:
- LibreOffice's blocks pair by their HTML id (par_id..., hd_id...: the same in every language),
  the k-th block of an id with the k-th when the id occurs as often on both sides; its pages
  order some sections by their translated names (the Calc functions), so position fails there.
  A page where under ID_SHARE of the blocks have an id pairs as the others do.
- Other blocks pair by position when both sides have as many; otherwise (unequal) they are
  aligned by length (sentences.align_sentences, Gale & Church, on blocks: "align", the default)
  or the document is skipped ("skip").
- Each block pair is cut into sentences (sentences.split_sentences) and aligned by length
  (align_sentences): every bead with sentences on both sides (1-1, 2-1, 1-2, rarely 2-2) is a
  pair; sentences left alone are dropped and counted. The length model (Spanish characters per
  English character and the variance) is fitted on the position-paired blocks.
- Filters, each drop counted by reason: Spanish equal to the English or containing it whole
  (untranslated, or an untranslated sentence merged into a bead), fewer than
  MIN_WORDS words on the English side, more than MAX_CHARS characters on either side, a
  Spanish/English length ratio outside RATIO_RANGE.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from ..bible.verse_align import LengthModel
from ..sentences import align_sentences, split_sentences
from .blocks import Block

MIN_WORDS = 3
MAX_CHARS = 400
RATIO_RANGE = (0.5, 2.2)  # Spanish / English characters
ID_SHARE = 0.5  # of the blocks with an id, for a by_id manual's page to pair by id
Unequal = Literal["align", "skip"]


def pairs_by_id(english: list[Block], spanish: list[Block]) -> list[tuple[str, str]] | None:
    """(Spanish, English) texts of the blocks whose key occurs as often on both sides (the k-th
    with the k-th), in English order; None when under ID_SHARE of the blocks have a key."""
    if sum(bool(b.key) for b in english + spanish) < ID_SHARE * len(english + spanish):
        return None
    keyed: dict[str, list[str]] = {}
    for block in spanish:
        keyed.setdefault(block.key, []).append(block.text)
    english_count = Counter(b.key for b in english)
    seen: Counter = Counter()
    pairs = []
    for block in english:
        others = keyed.get(block.key, [])
        if block.key and len(others) == english_count[block.key]:
            pairs.append((others[seen[block.key]], block.text))
            seen[block.key] += 1
    return pairs


def block_pairs(
    english: list[Block], spanish: list[Block], unequal: Unequal, model: LengthModel
) -> tuple[str, list[tuple[str, str]]]:
    """How one document's blocks were paired ("position", "aligner", "skipped") and the
    (Spanish, English) block pairs."""
    en, es = [b.text for b in english], [b.text for b in spanish]
    if len(en) == len(es) and en:
        return "position", list(zip(es, en, strict=True))
    if unequal == "skip" or not en or not es:
        return "skipped", []
    pairs, _ = align_sentences(en, es, model)
    return "aligner", [(s, e) for e, s in pairs]


def sentence_pairs(
    spa: str, eng: str, model: LengthModel, dropped: Counter
) -> list[tuple[str, str]]:
    """(Spanish, English) sentence groups of one block pair, aligned by length."""
    english, spanish = split_sentences(eng), split_sentences(spa)
    if len(english) == 1 and len(spanish) == 1:
        return [(spa, eng)]
    pairs, alone = align_sentences(english, spanish, model)
    if alone:
        dropped["sentence without a counterpart (dropped by the aligner)"] += alone
    return [(es, en) for en, es in pairs]


def reason_to_drop(spa: str, eng: str) -> str | None:
    if spa == eng or eng in spa:
        return "Spanish equals or contains the English (untranslated)"
    if len(eng.split()) < MIN_WORDS:
        return f"fewer than {MIN_WORDS} English words"
    if len(spa) > MAX_CHARS or len(eng) > MAX_CHARS:
        return f"more than {MAX_CHARS} characters"
    ratio = len(spa) / len(eng)
    if not RATIO_RANGE[0] <= ratio <= RATIO_RANGE[1]:
        return f"Spanish/English length ratio outside {RATIO_RANGE[0]}-{RATIO_RANGE[1]}"
    return None
