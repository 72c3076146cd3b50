"""*Drascula: The Vampire Strikes Back*'s text as Spanish -> English pairs, read from ScummVM's
drascula.dat (Debian scummvm-data; GPL-2+, the game is freeware). The text of every language
sits in one table of the file; its English and Spanish lines pair by (group, index).

Format (as observed in scummvm-data 2.7.0; written from this description, not from ScummVM):
- The file starts with "DRASCULA" and a version byte, then the engine's tables. The text table
  is the file's last part: a u16 big-endian language count (6: en, es, de, fr, it, ru), then
  groups up to the end of the file (15 groups there: 501, 84, 15, 29, 24, 33, 32, 20, 25, 63, 4,
  5, 6, 7, 11 lines, the first of most groups empty).
- A group: a u16 line count, then per language a u16 byte length and that many bytes: the lines,
  each a u32 big-endian length (its 4 bytes included) and NUL-padded cp850 text; the entries
  fill all but the last 2 bytes, which are zero.
- The table is found as the first offset holding a u16 6 from which the groups read exactly to
  the end of the file (the table opens with the bytes 00 06 01 F5 4E 42 there).

Rules:
- Text: cp850, up to its first NUL; "º" (written for a space in two Spanish lines, "YAºTENGOº
  TODOS...") becomes a space; then splits.one_line. The case is kept as read: the English and
  most of the Spanish are in capitals and the Spanish is mostly unaccented (casing.py makes
  them ordinary text).
- Drops, counted by reason: an empty line on either side (unused slots, untranslated lines);
  a side with no letter (group 14's strings of digits); Spanish equal to the English ignoring
  case ("hacker", "igor", "NO": names and untranslated words).
- Group (held-out unit): "drascula/<group>/<index // 20>": 20 consecutive lines of a group. The
  groups are the speakers' dialogues (1 Drascula and Igor, 3 B.J., 8 the bartender, 9 Von Braun
  ...) and group 0 holds the hero's lines in the order of play, so consecutive lines are one
  scene or room; no finer scene marks are in the file.
"""

from __future__ import annotations

import os
import struct
from collections import Counter
from pathlib import Path

from ...text import DataError
from ..splits import Pair, one_line

DAT_PATH = "usr/share/scummvm/drascula.dat"
PACKAGE = "scummvm-data"
MAGIC = b"DRASCULA"
LANGUAGES = ("en", "es", "de", "fr", "it", "ru")
ENGLISH, SPANISH = LANGUAGES.index("en"), LANGUAGES.index("es")
SCENE_LINES = 20
Table = list[list[list[str]]]  # [group][language][index] -> text


def find_dat(root: str | os.PathLike) -> Path:
    """ROOT's drascula.dat."""
    path = Path(root) / DAT_PATH
    if not path.is_file():
        raise DataError(
            f"Drascula's text (drascula.dat) is missing under {root} (no {path}): apt-get "
            f"install {PACKAGE} (or apt-get download {PACKAGE} and dpkg-deb -x it into DIR, "
            "then --root DIR)"
        )
    return path


def _lines(block: bytes, count: int) -> list[str] | None:
    """The count lines of one language's block, or None when they do not fit it exactly."""
    lines, at = [], 0
    for _ in range(count):
        if at + 4 > len(block):
            return None
        (size,) = struct.unpack_from(">I", block, at)
        if size < 4 or at + size > len(block):
            return None
        lines.append(block[at + 4 : at + size].split(b"\0", 1)[0].decode("cp850"))
        at += size
    return lines if not any(block[at:]) else None


def _table_at(data: bytes, start: int) -> Table | None:
    """The groups of a text table that opens at start, or None when none reads to the end."""
    (languages,) = struct.unpack_from(">H", data, start)
    at, groups = start + 2, []
    while at < len(data):
        if at + 2 > len(data):
            return None
        (count,) = struct.unpack_from(">H", data, at)
        at += 2
        group = []
        for _ in range(languages):
            if at + 2 > len(data):
                return None
            (size,) = struct.unpack_from(">H", data, at)
            if at + 2 + size > len(data):
                return None
            lines = _lines(data[at + 2 : at + 2 + size], count)
            if lines is None:
                return None
            group.append(lines)
            at += 2 + size
        groups.append(group)
    return groups or None


def read_table(data: bytes) -> Table:
    """The text table of drascula.dat's bytes: [group][language][index] -> text."""
    if not data.startswith(MAGIC):
        raise DataError("drascula.dat does not start with DRASCULA: not ScummVM's Drascula data")
    marker = struct.pack(">H", len(LANGUAGES))
    start = data.find(marker, len(MAGIC))
    while start != -1:
        table = _table_at(data, start)
        if table is not None:
            return table
        start = data.find(marker, start + 1)
    raise DataError(
        f"drascula.dat holds no text table of {len(LANGUAGES)} languages: reinstall {PACKAGE}"
    )


def clean(text: str) -> str:
    """One line of the table as a segment: "º" read as a space, whitespace runs as one space."""
    return one_line(text.replace("º", " "))


def reason_to_drop(spa: str, eng: str) -> str | None:
    """Why a cleaned (Spanish, English) line pair is dropped, or None to keep it."""
    if not spa or not eng:
        return "empty line"
    if not any(ch.isalpha() for ch in spa) or not any(ch.isalpha() for ch in eng):
        return "no letter (digits or symbols only)"
    if spa.casefold() == eng.casefold():
        return "Spanish equal to the English (untranslated)"
    return None


def drascula_pairs(root: str | os.PathLike, dropped: Counter) -> list[Pair]:
    """The (Spanish, English) pairs of drascula.dat in group and index order; each dropped line
    counted in `dropped` under its reason."""
    table = read_table(find_dat(root).read_bytes())
    pairs = []
    for number, group in enumerate(table):
        for index, (eng, spa) in enumerate(zip(group[ENGLISH], group[SPANISH], strict=True)):
            eng, spa = clean(eng), clean(spa)
            reason = reason_to_drop(spa, eng)
            if reason:
                dropped[reason] += 1
            else:
                pairs.append(Pair(spa, eng, f"drascula/{number}/{index // SCENE_LINES}"))
    return pairs
