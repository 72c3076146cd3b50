"""Genre classification (`transformer data bible-genre`): each verse labelled with the genre of
its book.

Rules: the 66 books of the Protestant canon, in the conventional grouping, by OSIS name (as
read_module keys them). Books outside the table (the WEB's deuterocanon: Tob, Jdt, Sir, 1Macc,
...) are skipped and their verses counted, not an error: a module's versification may hold
them. Empty verses (variants the text omits, e.g. Acts 8:37 in the WEB) are dropped and
counted. Splits are split_of(chapter): the genre test chapters are the translation ones.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ....files import atomic_write_text
from .align import split_of
from .sword import MODULES, BibleError, Verse, read_module

GENRES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Law", ("Gen", "Exod", "Lev", "Num", "Deut")),
    (
        "History",
        (
            "Josh",
            "Judg",
            "Ruth",
            "1Sam",
            "2Sam",
            "1Kgs",
            "2Kgs",
            "1Chr",
            "2Chr",
            "Ezra",
            "Neh",
            "Esth",
        ),
    ),
    ("Wisdom and Poetry", ("Job", "Ps", "Prov", "Eccl", "Song")),
    ("Major Prophets", ("Isa", "Jer", "Lam", "Ezek", "Dan")),
    (
        "Minor Prophets",
        ("Hos", "Joel", "Amos", "Obad", "Jonah", "Mic", "Nah", "Hab", "Zeph", "Hag", "Zech", "Mal"),
    ),
    ("Gospels and Acts", ("Matt", "Mark", "Luke", "John", "Acts")),
    (
        "Epistles",
        (
            "Rom",
            "1Cor",
            "2Cor",
            "Gal",
            "Eph",
            "Phil",
            "Col",
            "1Thess",
            "2Thess",
            "1Tim",
            "2Tim",
            "Titus",
            "Phlm",
            "Heb",
            "Jas",
            "1Pet",
            "2Pet",
            "1John",
            "2John",
            "3John",
            "Jude",
        ),
    ),
    ("Revelation", ("Rev",)),
)
GENRE_OF = {book: genre for genre, books in GENRES for book in books}  # OSIS book -> genre


@dataclass
class GenreSplits:
    examples: dict[
        str, list[tuple[Verse, str, str]]
    ]  # split -> [(verse, genre, text)], in canonical order
    empty_verses: list[Verse] = field(default_factory=list)  # in a book of the table, no text
    skipped_books: dict[str, int] = field(
        default_factory=dict
    )  # book outside the table -> verses with text


def genre_splits(verses: dict[Verse, str]) -> GenreSplits:
    """Label verses with their book's genre and split whole chapters with split_of."""
    result = GenreSplits(examples={"train": [], "valid": [], "test": []})
    for key, text in verses.items():
        genre = GENRE_OF.get(key[0])
        text = " ".join(text.split())  # tabs and newlines would break the TSV
        if genre is None:
            if text:
                result.skipped_books[key[0]] = result.skipped_books.get(key[0], 0) + 1
        elif not text:
            result.empty_verses.append(key)
        else:
            result.examples[split_of(key[:2])].append((key, genre, text))
    return result


def build_genre_corpus(
    lang: str, out_dir: str | os.PathLike, sword_dir: str | os.PathLike | None = None
) -> dict:
    """Write out_dir/{train,valid,test}.tsv (`genre<TAB>verse`, + .ids with verse references) and
    PROVENANCE.md."""
    if lang not in MODULES:
        raise BibleError(f"unknown text code {lang!r}: choose from {', '.join(MODULES)}")
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise BibleError(f"--out {out_dir} is a file: give a directory for the dataset")
    verses, version = read_module(lang, sword_dir)
    splits = genre_splits(verses)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, examples in splits.examples.items():
        atomic_write_text(
            out / f"{name}.tsv", "".join(f"{genre}\t{text}\n" for _, genre, text in examples)
        )
        atomic_write_text(
            out / f"{name}.ids", "".join(f"{b}.{c}.{v}\n" for (b, c, v), _, _ in examples)
        )
    counts = {name: {genre: 0 for genre, _ in GENRES} for name in splits.examples}
    for name, examples in splits.examples.items():
        for _, genre, _ in examples:
            counts[name][genre] += 1
    report = {
        "lang": lang,
        "version": version,
        "verses": {name: len(e) for name, e in splits.examples.items()},
        "genres": counts,
        "empty_verses": len(splits.empty_verses),
        "skipped_books": splits.skipped_books,
    }
    atomic_write_text(out / "PROVENANCE.md", _genre_provenance(report))
    return report


def _genre_provenance(report: dict) -> str:
    module, counts = MODULES[report["lang"]], report["genres"]
    lines = [
        f"# Bible genre classification: {module.title} ({module.language})",
        "",
        "Built by `transformer data bible-genre` from the SWORD module packaged by Debian, read "
        "with pysword:",
        f"{module.name} version {report['version']} ({module.package}, Public Domain).",
        "",
        "Each line of {train,valid,test}.tsv is `genre<TAB>verse text` ({split}.ids: the verse "
        "references).",
        "Splits hold whole chapters, chosen by a hash of the chapter name: the chapters of "
        "`transformer data",
        "bible` (its test chapters are these test chapters). Markup is stripped as in `data "
        "bible`.",
        "",
        "| genre | books | train | valid | test |",
        "|---|---|---|---|---|",
    ]
    for genre, books in GENRES:
        lines.append(
            f"| {genre} | {' '.join(books)} | {counts['train'][genre]:,} | "
            f"{counts['valid'][genre]:,} "
            f"| {counts['test'][genre]:,} |"
        )
    totals = report["verses"]
    skipped = report["skipped_books"]
    lines += [
        f"| total | {len(GENRE_OF)} books | {totals['train']:,} | {totals['valid']:,} | "
        f"{totals['test']:,} |",
        "",
        f"Empty verses dropped (variants the text omits): {report['empty_verses']}.",
        f"Books outside the 66, skipped: {len(skipped)} ({sum(skipped.values()):,} verses)"
        + (": " + ", ".join(f"{book} {n}" for book, n in skipped.items()) if skipped else "")
        + ".",
    ]
    return "\n".join(lines) + "\n"
