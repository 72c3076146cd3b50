"""KDE's vocabulary lists (kdeedu-kvtml-data: usr/share/apps/kvtml/{es,en}/*.kvtml, the word
lists of KHangMan and KAnagram) as Spanish -> English word pairs ("manzana" -> "apple") and
definition pairs ("Se usa para hacer vino" -> "Used to make wine").

A kvtml file is XML: each <entry id="N"> holds a <translation> with the <text> (the word) and a
<comment> (its definition, the game's hint). The Spanish files were translated from the English
templates, entry by entry, so entry N of a Spanish file translates entry N of its English file.

Rules (checked by reading every pair of kdeedu-kvtml-data 4:22.12.3-1):
- Files pair by FILES (Spanish stem, English stem): the same name, or the English name
  translated (frutas <-> fruits); the package's file names say nothing more. A pair of files
  not both installed is skipped and counted.
- The graded lists (GRADED: easy, medium, hard) are skipped whole: their Spanish lists were
  written anew (83 and 55 Spanish entries against 44 and 45; their definitions are Spanish
  dictionary entries, not translations) and a tenth of their id pairs are different words
  ("pelota" = "computer", "ensalada" = "cheeseburger", "navegar" = "yachtsman").
- An inserted Spanish entry: where the Spanish file has more entries than the English one, an
  entry whose word repeats an earlier word of the same file is taken as added by the
  translator (professiones: a second "mecánico" at 33; transportes: a second "bicicleta" at
  15) and dropped; the Spanish entries after it pair with the English id one lower.
- Entries pair by id; an entry on one side only is dropped. The words make one pair and the
  definitions another (when both sides have one). WRONG_WORDS and WRONG_DEFINITIONS list the
  entries whose Spanish is a different thing from the English (the translator's own choice or
  an English template changed later: "perro" = "kitten", "disquete" = "flashdrive", "billón"
  (10^12) = "billion", Pluto "noveno planeta" = "second-largest known dwarf planet"); they are
  dropped and counted.
- Then gcompris.same_or_number: a Spanish side equal to the English ("monitor", "madrid") or a
  number only (the numbers list's "0" -> "0") is dropped. Texts are made one line.
- group = "kvtml/<English stem>": a list's words and definitions go whole to one split.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from ...text import DataError
from ..splits import Pair, one_line
from .gcompris import same_or_number

PACKAGE = "kdeedu-kvtml-data"
FOLDER = "usr/share/apps/kvtml"
FILES = (
    ("animals", "animals"), ("computadoras", "computers"), ("deportes", "sports"),
    ("espacio", "space"), ("frutas", "fruits"), ("gente", "people"),
    ("inventos", "inventions"), ("monedas", "currencies"), ("numeros", "numbers"),
    ("objetos", "objects"), ("prendas", "clothing"), ("professiones", "professions"),
    ("transportes", "transportation"), ("vegetales", "vegetables"),
    ("worldcapitals", "worldcapitals"),
)  # fmt: skip
GRADED = ("easy", "medium", "hard")
WRONG_WORDS = frozenset({
    ("animals", 40), ("animals", 41), ("computers", 8), ("computers", 9), ("numbers", 31),
    ("inventions", 21), ("objects", 4),
})  # fmt: skip
"""(English stem, English id): perro = kitten, gaviota = kingfisher, disquete = flashdrive,
cintas = touchpad, billón = billion, tren = steamengine, cacerola = cooker."""
WRONG_DEFINITIONS = frozenset({
    ("animals", 40), ("animals", 41), ("computers", 8), ("computers", 9), ("space", 19),
    ("people", 7),
})  # fmt: skip
"""(English stem, English id): the definitions of the words above, Pluto's (ninth planet /
dwarf planet) and Galileo's (a sentence about him / a quotation)."""
Entries = dict[int, tuple[str, str]]  # entry id -> (word, definition)


def read_kvtml(data: bytes, where: str = "the kvtml file") -> Entries:
    """{entry id: (word, definition)} of a kvtml file, in the file's order (its first
    translation of each entry; "" where a field is absent)."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise DataError(f"{where} is not XML ({e}): reinstall {PACKAGE}") from None
    entries: Entries = {}
    for entry in root.iter("entry"):
        translation = entry.find("translation")
        if translation is None or not (entry.get("id") or "").isdigit():
            continue
        word = one_line(translation.findtext("text") or "")
        entries[int(entry.get("id"))] = (word, one_line(translation.findtext("comment") or ""))
    return entries


def drop_insertions(spanish: Entries, english: Entries, dropped: Counter) -> Entries:
    """The Spanish entries renumbered after removing those inserted by the translator (a
    repeated word while the Spanish file has more entries than the English; module's rules)."""
    kept: Entries = {}
    seen: set[str] = set()
    extra, shift = len(spanish) - len(english), 0
    for key in sorted(spanish):
        word, definition = spanish[key]
        if shift < extra and word.casefold() in seen:
            shift += 1
            dropped["Spanish entry inserted by the translator (a repeated word)"] += 1
            continue
        seen.add(word.casefold())
        kept[key - shift] = (word, definition)
    return kept


def file_pairs(spanish: Entries, english: Entries, stem: str, dropped: Counter) -> list[Pair]:
    """The word and definition pairs of one Spanish file and its English file."""
    spanish = drop_insertions(spanish, english, dropped)
    only = len(set(spanish) ^ set(english))
    if only:
        dropped["entry in one language only"] += only
    pairs = []
    for key, (eng_word, eng_definition) in english.items():
        if key not in spanish:
            continue
        spa_word, spa_definition = spanish[key]
        candidates = [("word", spa_word, eng_word, WRONG_WORDS)]
        if spa_definition and eng_definition:
            candidates.append(("definition", spa_definition, eng_definition, WRONG_DEFINITIONS))
        elif spa_definition or eng_definition:
            dropped["definition in one language only"] += 1
        for kind, spa, eng, wrong in candidates:
            if (stem, key) in wrong:
                reason = f"{kind} is not a translation (WRONG_WORDS, WRONG_DEFINITIONS)"
            else:
                reason = same_or_number(spa, eng) if spa and eng else f"empty {kind}"
            if reason:
                dropped[reason] += 1
            else:
                pairs.append(Pair(spa, eng, f"kvtml/{stem}"))
    return pairs


def kvtml_pairs(root: str | os.PathLike = "/", dropped: Counter | None = None) -> list[Pair]:
    """The word and definition pairs of the lists under ROOT/FOLDER, file by file in FILES'
    order; each drop counted in `dropped` under its reason."""
    dropped = Counter() if dropped is None else dropped
    folder = Path(root) / FOLDER
    if not (folder / "es").is_dir() or not (folder / "en").is_dir():
        raise DataError(f"{folder}/es and /en not found: apt-get install {PACKAGE}")
    for stem in GRADED:
        if (folder / "es" / f"{stem}.kvtml").is_file():
            dropped["graded list (easy, medium, hard) skipped whole: its Spanish is its own"] += 1
    pairs: list[Pair] = []
    for spa_stem, eng_stem in FILES:
        spa_file = folder / "es" / f"{spa_stem}.kvtml"
        eng_file = folder / "en" / f"{eng_stem}.kvtml"
        if not spa_file.is_file() or not eng_file.is_file():
            dropped["list not installed in both languages"] += 1
            continue
        spanish = read_kvtml(spa_file.read_bytes(), str(spa_file))
        english = read_kvtml(eng_file.read_bytes(), str(eng_file))
        pairs += file_pairs(spanish, english, eng_stem, dropped)
    return pairs
