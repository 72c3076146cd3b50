"""Reading the SWORD Bible modules that Debian packages (public domain texts) with pysword, and
their OSIS markup stripped to one line of plain text per verse.
"""

from __future__ import annotations

import functools
import html
import os
import re
from dataclasses import dataclass
from pathlib import Path

Verse = tuple[str, int, int]  # (OSIS book, chapter, verse)


@dataclass(frozen=True)
class Module:
    code: str
    name: str  # SWORD module name
    package: str  # Debian package
    title: str
    language: str
    drop_caps: bool = (
        False  # the first word of each chapter is printed in capitals ("EN el principio")
    )


MODULES = {
    "spa": Module(
        "spa", "spaRV1909eb", "sword-text-sparv", "Reina-Valera 1909", "Spanish", drop_caps=True
    ),
    "eng": Module("eng", "engWEB2015eb", "sword-text-web", "World English Bible", "English"),
    "kjv": Module("kjv", "engKJV2006eb", "sword-text-kjv", "King James Version", "English"),
}
SWORD_DIRS = ("/usr/share/sword", "~/.sword")
INSTALL_ALL = "apt-get install -y " + " ".join(m.package for m in MODULES.values())


class BibleError(ValueError):
    """The Bible modules or pysword are missing, or the request is invalid."""


# --------------------------------------------------------------------------------------------
# OSIS markup -> plain text

# Elements dropped with their content: footnotes and cross references (with their references,
# variant readings and catch words), speaker labels and headings. Psalm titles are text.
_DROP = re.compile(
    r"<(note|speaker)\b[^>]*>.*?</\1>"
    r"|<title\b(?![^>]*type=\"psalm\")[^>]*>.*?</title>"
    r"|<(rdg|catchWord)\b[^>]*>.*?</\2>",
    re.S,
)
# Block-level and milestone elements separate words; inline ones (w, transChange, divineName,
# q, seg, foreign, name, hi, title) wrap words and vanish without a trace.
_BLOCK = re.compile(
    r"</?(div|l|lg|lb|p|br|chapter|list|item|milestone|verse|title|table|row|cell)\b[^>]*>"
)
_TAG = re.compile(r"<[^>]+>")
_SPACE_BEFORE = re.compile(r"\s+([,.;:!?)\]”’»])")
_SPACE_AFTER = re.compile(r"([(\[“¿¡«])\s+")
_DROP_CAP = re.compile(r"^([¡¿(“\"]*)([A-ZÁÉÍÓÚÑÜ]{2,})(?=[\s,;:]+[^\s]*[a-záéíóúñü])")


def clean_osis(raw: str) -> str:
    """OSIS verse markup -> one line of plain text, without gluing words together."""
    glossary = re.search(r"<div\b[^>]*type=\"glossary\"", raw)
    if glossary:  # the WEB appends its glossary to the last verse of Revelation
        raw = raw[: glossary.start()]
    text = _DROP.sub(" ", raw)
    text = _BLOCK.sub(" ", text)
    text = _TAG.sub("", text)
    text = html.unescape(text).replace("¶", " ")
    text = " ".join(text.split())
    text = _SPACE_BEFORE.sub(r"\1", text)
    return _SPACE_AFTER.sub(r"\1", text).strip()


def undo_drop_cap(text: str) -> str:
    """'EN el principio' -> 'En el principio': a chapter's first word printed in capitals."""
    return _DROP_CAP.sub(lambda m: m.group(1) + m.group(2).capitalize(), text)


# --------------------------------------------------------------------------------------------
# Reading modules


def find_sword_dir(sword_dir: str | os.PathLike | None = None) -> Path:
    if sword_dir:  # asked for by name: say what is wrong with it
        path = Path(sword_dir).expanduser()
        if not path.is_dir():
            raise BibleError(
                f"--sword-dir {sword_dir} does not exist: pass the SWORD module directory "
                f"(the one holding mods.d/), or install the modules with: {INSTALL_ALL}"
            )
        if not (path / "mods.d").is_dir():
            raise BibleError(
                f"--sword-dir {sword_dir} has no mods.d directory: pass the SWORD module directory "
                f"(the one holding mods.d/), or install the modules with: {INSTALL_ALL}"
            )
        return path
    candidates = [sword_dir] if sword_dir else [os.environ.get("SWORD_PATH"), *SWORD_DIRS]
    for candidate in candidates:
        if candidate and (Path(candidate).expanduser() / "mods.d").is_dir():
            return Path(candidate).expanduser()
    raise BibleError(
        "no SWORD module directory found (looked in "
        f"{', '.join(str(c) for c in candidates if c)}): "
        f"install the modules with: {INSTALL_ALL}"
    )


def read_module(
    code: str, sword_dir: str | os.PathLike | None = None
) -> tuple[dict[Verse, str], str]:
    """All verses of one module as {(book, chapter, verse): plain text}, and the module's
    version."""
    module = MODULES[code]
    if sword_dir and not Path(sword_dir).expanduser().exists():
        find_sword_dir(sword_dir)  # a --sword-dir that does not exist is said first, pysword or not
    try:
        from pysword.modules import SwordModules
    except ImportError:
        raise BibleError(
            "the Bible corpus needs pysword: pip install pysword (or pip install -e '.[data]')"
        ) from None
    root = find_sword_dir(sword_dir)
    modules = SwordModules(str(root))
    found = modules.parse_modules()
    if module.name not in found:
        raise BibleError(
            f"SWORD module {module.name} ({module.title}) is not installed in {root}: "
            f"apt-get install -y {module.package}"
        )
    bible = modules.get_bible_from_module(module.name)
    # pysword inflates the whole compressed block (a book) for every verse; keep the last few.
    bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
    structure = bible.get_structure()
    verses: dict[Verse, str] = {}
    for testament, books in structure.get_books().items():
        for book in books:
            for chapter, n_verses in enumerate(book.chapter_lengths, start=1):
                numbers = list(range(1, n_verses + 1))
                indices = structure.ref_to_indicies(
                    books=[book.name], chapters=[chapter], verses=numbers
                )[testament]
                for number, index in zip(numbers, indices, strict=True):
                    text = clean_osis(bible._text_for_index(testament, index) or "")
                    verses[(book.osis_name, chapter, number)] = (
                        undo_drop_cap(text) if module.drop_caps else text
                    )
    return verses, str(found[module.name].get("version", "unknown"))
