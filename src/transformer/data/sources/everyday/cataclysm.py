"""Cataclysm: Dark Days Ahead's Spanish catalogs (Debian cataclysm-dda-data, CC-BY-SA-3.0) as
Spanish -> English pairs of everyday text: NPC dialogue and sentence-like descriptions of
things. ROOT/usr/share/locale/{es_ES,es_AR}/LC_MESSAGES/cataclysm-dda.mo translate the same
English twice, and both variants are read.

Rules:
- Entries: read with Python's gettext. The header (empty msgid) is skipped; a message context
  (`ctx\\x04msgid`) is split off; a plural entry gives its singular (msgid -> form 0). Both sides
  become one line (splits.one_line).
- Spanish written twice: 57 es_ES msgstr are the translation twice over, glued or spaced
  ("Hazte cargo.Hazte cargo."); when the Spanish is X + X (X at least 5 characters, an optional
  space between) and the English is not Y + Y, one half is kept.
- Drops, each counted under its reason, in this order: a <color_...> tag, another <...> tag
  (<npcname>, <swear>, </color>, <C|c>), a printf placeholder (%s, %d, %1$s, %2.1f%%), a {...}
  placeholder, a `$` token (all these on either side); Spanish equal to the English
  (untranslated); a single English word; game mechanics (an `_` identifier, or 3 or more digits
  and symbols other than prose punctuation: "[STR 11]", "SP2022, 2340"); no sentence ending
  (the English does not end in . ! ? …, closing quotes aside: UI labels, names, fragments
  completed at run time like "Are we fighting? There's a"); then the length rules below; a
  Spanish/English length ratio outside RATIO_RANGE (a different or garbled translation).
- Kept: the English ends a sentence and is *conversational* (2 to 15 words holding I, me, my,
  you, your, we, us or our, contractions included, or ending in ?, or a two-word reply such as
  "Got it." or "Well, sure.") or *sentence-like* (3 to 20 words). subset_of names which; longer
  lines are dropped as "more than 20 words".
- Group (the held-out unit): "cataclysm/" + the msgid normalised, lowercased with everything but
  the letters a-z dropped (digits, punctuation, spacing): "I'm thirsty…" and "I'm thirsty.", "A
  10-round box magazine ..." and "A 20-round box magazine ..." share a group. The msgctxt is not
  the key: only 2,103 of the ~49,600 entries have one, and 1,430 of those are gender twins
  (prof_desc_male and prof_desc_female hold the same 238 msgids), so keying by context would put
  one English string in two groups and lump hundreds of unrelated lines together. The key
  depends on the English alone, so the es_ES and es_AR pairs of one msgid always share a group.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from ...text import DataError
from ..gettext_ui import read_mo
from ..splits import Pair, one_line

VARIANTS = ("es_ES", "es_AR")
MO_PATH = "usr/share/locale/{variant}/LC_MESSAGES/cataclysm-dda.mo"
PACKAGE = "cataclysm-dda-data"
MAX_CONVERSATIONAL_WORDS = 15
MAX_SENTENCE_WORDS = 20
RATIO_RANGE = (0.4, 2.5)  # Spanish / English characters
MIN_HALF = 5  # characters of a doubled msgstr's half

COLOR_TAG = re.compile(r"<color_|</color>")
TAG = re.compile(r"<[^<>\s][^<>]*>")
PRINTF = re.compile(r"%(?:\d+\$)?[-+#0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfFgGcsp%]")
BRACES = re.compile(r"\{[^{}]*\}")
DIALOGUE = re.compile(
    r"\b(?:I|me|my|mine|myself|you|your|yours|yourself|we|us|our|ours|ourselves)\b"
    r"|\b(?:I|you|we)['’](?:m|re|ve|ll|d)\b",
    re.IGNORECASE,
)
ENDING = re.compile(r"[.!?…]['\"”’)\]]*$")
PROSE = set(".,;:!?¡¿'\"‘’“”«»()-–—…/ ")


def find_mo(root: str | os.PathLike, variant: str) -> Path:
    """ROOT's cataclysm-dda.mo of one Spanish variant (es_ES, es_AR)."""
    path = Path(root) / MO_PATH.format(variant=variant)
    if not path.is_file():
        raise DataError(
            f"Cataclysm: DDA's Spanish catalogs are missing under {root} (no {path}): apt-get "
            f"install {PACKAGE} (or apt-get download {PACKAGE} and dpkg-deb -x it into DIR, "
            "then --root DIR)"
        )
    return path


def half_of_double(text: str) -> str | None:
    """X when text is X + X or X + " " + X with X of MIN_HALF characters or more, else None."""
    for gap in ("", " "):
        size, odd = divmod(len(text) - len(gap), 2)
        if not odd and size >= MIN_HALF and text[:size] + gap + text[:size] == text:
            return text[:size]
    return None


def undouble(spa: str, eng: str) -> str:
    """The Spanish with a doubled translation cut to one half (when the English is not doubled)."""
    half = half_of_double(spa)
    return half if half is not None and half_of_double(eng) is None else spa


def group_of(eng: str) -> str:
    """The held-out group of an English msgid: its letters, lowercased."""
    return "cataclysm/" + " ".join(re.findall(r"[a-z]+", eng.lower()))


def subset_of(eng: str) -> str:
    """Which kept subset an English line belongs to: "conversational" or "sentence-like"."""
    words = len(eng.split())
    talk = words == 2 or DIALOGUE.search(eng) or eng.endswith("?")
    if words <= MAX_CONVERSATIONAL_WORDS and talk:
        return "conversational"
    return "sentence-like"


def mechanics_marks(eng: str) -> int:
    """Digits and symbols other than prose punctuation in the English."""
    return sum(ch.isdigit() or not (ch.isalpha() or ch in PROSE) for ch in eng)


def reason_to_drop(spa: str, eng: str) -> str | None:
    """Why a (one-line, undoubled) entry is not everyday text, or None to keep it."""
    both = spa + "\n" + eng
    if COLOR_TAG.search(both):
        return "colour tag <color_...>"
    if TAG.search(both):
        return "markup tag <...>"
    if PRINTF.search(both):
        return "printf placeholder (%s, %d ...)"
    if BRACES.search(both):
        return "{...} placeholder"
    if "$" in both:
        return "$ token"
    if not spa:
        return "empty translation"
    if spa == eng:
        return "Spanish equal to the English (untranslated)"
    words = len(eng.split())
    if words < 2:
        return "single word"
    if "_" in eng or mechanics_marks(eng) >= 3:
        return "game mechanics (digits and symbols)"
    if not ENDING.search(eng):
        return "no sentence ending (UI label, name or fragment)"
    conversational = subset_of(eng) == "conversational"
    if not conversational and words > MAX_SENTENCE_WORDS:
        return f"more than {MAX_SENTENCE_WORDS} words"
    if not RATIO_RANGE[0] <= len(spa) / len(eng) <= RATIO_RANGE[1]:
        return f"Spanish/English length ratio outside {RATIO_RANGE[0]}-{RATIO_RANGE[1]}"
    return None


def cataclysm_pairs(
    root: str | os.PathLike, dropped: Counter, variants: Iterable[str] = VARIANTS
) -> list[Pair]:
    """The kept (Spanish, English) pairs of each variant's catalog, variant after variant in file
    order; each dropped entry counted in `dropped` under its reason."""
    paths = [find_mo(root, variant) for variant in variants]
    pairs = []
    for path in paths:
        for msgid, msgstr in read_mo(path)[0]:
            eng = one_line(msgid)
            spa = undouble(one_line(msgstr), eng)
            reason = reason_to_drop(spa, eng)
            if reason:
                dropped[reason] += 1
            else:
                pairs.append(Pair(spa, eng, group_of(eng)))
    return pairs
