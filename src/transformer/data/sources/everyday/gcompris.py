"""GCompris's Spanish catalogue (gcompris-qt-data: usr/share/gcompris-qt/translations/
gcompris_es.qm) as Spanish -> English pairs: instructions for children ("Encuentra la mariposa
marrón grisáceo" -> "Find the grayish brown butterfly"), vocabulary words, place names.

The Qt .qm format (read_qm; as lrelease writes it, checked on all 37 catalogues of
gcompris-qt-data 3.1-2):
- 16 bytes of magic (MAGIC), then sections: a tag byte and a big-endian u32 length. 0x69 holds
  the messages, 0xA7 the language code ("es"); the others (0x42 hashes, 0x2F contexts, 0x88
  plural rules) are skipped.
- A message is a run of fields, each a tag byte: 3 a translation (u32 byte length, UTF-16BE;
  0xFFFFFFFF: none), 6 the source text (u32 length, UTF-8), 7 the context (the QML component:
  "ActivityInfo", "board5_0", "Calendar"), 8 the comment (a disambiguation, empty in GCompris),
  5 an obsolete field of 4 bytes, 1 the end. Several translations are the plural forms of one
  message (chosen by %n at run time). Any other tag stops the reader with a DataError.
- A .qm holds no obsolete (vanished) messages: lrelease leaves them out.

What is kept (gcompris_pairs), each drop counted by reason:
- A message without a source text (gcompris_es.qm has one: "0 a 255 con" in tutorial4), or
  with plural forms, is dropped; so is an untranslated one (no translation or an empty one).
- Then ui_clean's rules for a software message (the same as `data ui-strings`): more than 3
  lines or 400 characters (the long activity manuals), markup that differs between the sides
  or more than 6 tags (the About box), placeholders (%1, %n) that differ, no letters besides
  placeholders, dropped; inline tags stripped when both sides have the same. A message with
  matching placeholders is kept ("Altitude: %1"): the model learns to carry them through.
- Spanish equal to the English (a place name, a letter, a word both languages share) and a
  line that is only a number ("1st", "12:30", "1º") are dropped: `same_or_number`.
- group = "gcompris/<context>": a QML component's messages go whole to one split. Contexts
  shared by every activity ("ActivityInfo": the titles and descriptions; "Data", "Dataset")
  are one group each.
"""

from __future__ import annotations

import os
import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ...text import DataError
from ..splits import Pair, one_line
from ..ui_clean import clean_pair

PACKAGE = "gcompris-qt-data"
CATALOGUE = "usr/share/gcompris-qt/translations/gcompris_es.qm"
MAGIC = bytes.fromhex("3CB86418CAEF9C95CD211CBF60A1BDDD")
MESSAGES, LANGUAGE = 0x69, 0xA7
END, TRANSLATION, OBSOLETE, SOURCE, CONTEXT, COMMENT = 1, 3, 5, 6, 7, 8
NONE = 0xFFFFFFFF  # a translation's length when there is none
_NUMBER = re.compile(r"(?=.*\d)[\d\s.,:;/%+×=()º°ª-]*(?:st|nd|rd|th|er|o|a)?", re.I)
"""A number, a time, a fraction or an ordinal, and nothing else."""


@dataclass(frozen=True)
class Message:
    """One message of a .qm: its context, English source (None without one), comment and
    translations (one, or the plural forms; None where a translation is absent)."""

    context: str
    source: str | None
    comment: str
    translations: tuple[str | None, ...]


def _sections(data: bytes, where: str) -> dict[int, bytes]:
    if data[:16] != MAGIC:
        raise DataError(f"{where} is not a Qt .qm file (no magic number): reinstall {PACKAGE}")
    sections, at = {}, 16
    while at < len(data):
        length = struct.unpack_from(">I", data, at + 1)[0] if at + 5 <= len(data) else None
        if length is None or at + 5 + length > len(data):
            raise DataError(f"{where}: truncated at byte {at}: reinstall {PACKAGE}")
        tag = data[at]
        sections[tag] = data[at + 5 : at + 5 + length]
        at += 5 + length
    return sections


def read_qm(data: bytes, where: str = "the .qm file") -> tuple[str, list[Message]]:
    """(language code, messages in the file's order) of a Qt .qm file (the module's format)."""
    sections = _sections(data, where)
    body = sections.get(MESSAGES, b"")
    messages: list[Message] = []
    fields: dict[int, str] = {}
    translations: list[str | None] = []
    at = 0
    while at < len(body):
        tag = body[at]
        at += 1
        if tag == END:
            messages.append(
                Message(
                    fields.get(CONTEXT, ""), fields.get(SOURCE), fields.get(COMMENT, ""),
                    tuple(translations),
                )
            )  # fmt: skip
            fields, translations = {}, []
            continue
        if tag == OBSOLETE:
            at += 4
            continue
        if tag not in (TRANSLATION, SOURCE, CONTEXT, COMMENT) or at + 4 > len(body):
            raise DataError(
                f"{where}: unknown message field {tag} at byte {at - 1} of the messages: not a "
                f"catalogue this reader knows; reinstall {PACKAGE}"
            )
        length = struct.unpack_from(">I", body, at)[0]
        at += 4
        if tag == TRANSLATION and length == NONE:
            translations.append(None)
            continue
        raw = body[at : at + length]
        at += length
        if tag == TRANSLATION:
            translations.append(raw.decode("utf-16-be", errors="replace"))
        else:
            fields[tag] = raw.decode("utf-8", errors="replace")
    language = sections.get(LANGUAGE, b"").decode("ascii", errors="replace")
    return language, messages


def same_or_number(spa: str, eng: str) -> str | None:
    """The reason to drop a pair that teaches no translation, or None."""
    if spa.casefold() == eng.casefold():
        return "Spanish equals the English (a name, a letter, a shared word)"
    if _NUMBER.fullmatch(spa) or _NUMBER.fullmatch(eng):
        return "a number only (1st, 12:30)"
    return None


def message_pair(message: Message) -> tuple[str | None, str, str]:
    """(reason to drop or None, Spanish, English) for one message (the module's rules)."""
    if message.source is None or not message.source.strip():
        return "no source text", "", ""
    if len(message.translations) > 1:
        return "plural forms (%n): one translation per number", "", ""
    spa = message.translations[0] if message.translations else None
    if not spa or not spa.strip():
        return "untranslated", "", ""
    reason, eng, spa = clean_pair(message.source, spa)
    if reason is None:
        eng, spa = one_line(eng), one_line(spa)
        reason = same_or_number(spa, eng)
    return reason, spa, eng


def gcompris_pairs(
    root: str | os.PathLike = "/", dropped: Counter | None = None, path: str | None = None
) -> list[Pair]:
    """The Spanish -> English pairs of ROOT/CATALOGUE (or of `path`), in the file's order; each
    message dropped is counted in `dropped` under its reason."""
    dropped = Counter() if dropped is None else dropped
    file = Path(path) if path else Path(root) / CATALOGUE
    if not file.is_file():
        raise DataError(f"{file} not found: apt-get install {PACKAGE}")
    language, messages = read_qm(file.read_bytes(), str(file))
    if language and language != "es":
        raise DataError(f"{file} is a catalogue for {language!r}, not Spanish (es)")
    pairs = []
    for message in messages:
        reason, spa, eng = message_pair(message)
        if reason:
            dropped[reason] += 1
        else:
            pairs.append(Pair(spa, eng, f"gcompris/{message.context}"))
    return pairs
