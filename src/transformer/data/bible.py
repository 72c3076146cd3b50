"""Parallel corpora from the SWORD Bible modules that Debian packages (public domain texts).

`build_bible_corpus("spa", "eng", out_dir)` reads two modules with `pysword`, strips the OSIS
markup, aligns verses by book/chapter/verse, drops chapters whose verse numbering does not line
up and, in the others, the verses that do not translate each other (verse_align), splits whole
chapters into train/valid/test, and writes aligned files plus a provenance note.
`add_targets=("kjv",)` also trains on a second translation of the same verses: its pairs are
appended to the training split only, each source prefixed by a tag (`<kjv> `), so that untagged
input still asks for the main target's wording and tagged input for the other's.

`build_genre_corpus("eng", out_dir)` labels each verse of one module with the genre of its book
(GENRES: 8 labels over the 66 books) for text classification, with the same chapter splits.
"""

from __future__ import annotations

import functools
import hashlib
import html
import math
import os
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from .verse_align import aligned_verses, fit_length_model

Verse = tuple[str, int, int]  # (OSIS book, chapter, verse)


@dataclass(frozen=True)
class Module:
    code: str
    name: str  # SWORD module name
    package: str  # Debian package
    title: str
    language: str
    drop_caps: bool = False  # the first word of each chapter is printed in capitals ("EN el principio")


MODULES = {
    "spa": Module("spa", "spaRV1909eb", "sword-text-sparv", "Reina-Valera 1909", "Spanish", drop_caps=True),
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
_BLOCK = re.compile(r"</?(div|l|lg|lb|p|br|chapter|list|item|milestone|verse|title|table|row|cell)\b[^>]*>")
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
            raise BibleError(f"--sword-dir {sword_dir} does not exist: pass the SWORD module directory "
                             f"(the one holding mods.d/), or install the modules with: {INSTALL_ALL}")
        if not (path / "mods.d").is_dir():
            raise BibleError(f"--sword-dir {sword_dir} has no mods.d directory: pass the SWORD module directory "
                             f"(the one holding mods.d/), or install the modules with: {INSTALL_ALL}")
        return path
    candidates = [sword_dir] if sword_dir else [os.environ.get("SWORD_PATH"), *SWORD_DIRS]
    for candidate in candidates:
        if candidate and (Path(candidate).expanduser() / "mods.d").is_dir():
            return Path(candidate).expanduser()
    raise BibleError(f"no SWORD module directory found (looked in {', '.join(str(c) for c in candidates if c)}): "
                     f"install the modules with: {INSTALL_ALL}")


def read_module(code: str, sword_dir: str | os.PathLike | None = None) -> tuple[dict[Verse, str], str]:
    """All verses of one module as {(book, chapter, verse): plain text}, and the module's version."""
    module = MODULES[code]
    try:
        from pysword.modules import SwordModules
    except ImportError:
        raise BibleError("the Bible corpus needs pysword: pip install pysword (or pip install -e '.[data]')") from None
    root = find_sword_dir(sword_dir)
    modules = SwordModules(str(root))
    found = modules.parse_modules()
    if module.name not in found:
        raise BibleError(f"SWORD module {module.name} ({module.title}) is not installed in {root}: "
                         f"apt-get install -y {module.package}")
    bible = modules.get_bible_from_module(module.name)
    # pysword inflates the whole compressed block (a book) for every verse; keep the last few.
    bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
    structure = bible.get_structure()
    verses: dict[Verse, str] = {}
    for testament, books in structure.get_books().items():
        for book in books:
            for chapter, n_verses in enumerate(book.chapter_lengths, start=1):
                numbers = list(range(1, n_verses + 1))
                indices = structure.ref_to_indicies(books=[book.name], chapters=[chapter], verses=numbers)[testament]
                for number, index in zip(numbers, indices, strict=True):
                    text = clean_osis(bible._text_for_index(testament, index) or "")
                    verses[(book.osis_name, chapter, number)] = undo_drop_cap(text) if module.drop_caps else text
    return verses, str(found[module.name].get("version", "unknown"))


# --------------------------------------------------------------------------------------------
# Alignment and splits

Chapter = tuple[str, int]


@dataclass
class Alignment:
    pairs: dict[Verse, tuple[str, str]]
    dropped_chapters: dict[Chapter, str] = field(default_factory=dict)  # chapter -> reason
    dropped_verses: list[Verse] = field(default_factory=list)  # text on one side only
    misaligned_verses: list[Verse] = field(default_factory=list)  # text on both sides, not each other's (verse_align)
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
            shifted = max(_correlation(xs[shift:], ys[:-shift]), _correlation(xs[:-shift], ys[shift:]))
            if shifted > max(same + 0.3, 0.5):
                return f"verse lengths line up shifted by {shift} (correlation {shifted:.2f} vs {same:.2f})"
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
    kept: list[tuple[list[Verse], list[tuple[str, str]]]] = []  # chapters that pass the chapter checks
    for chapter, keys in chapters.items():
        if src_counts[chapter] != tgt_counts[chapter]:
            result.dropped_chapters[chapter] = f"{src_counts[chapter]} vs {tgt_counts[chapter]} verses"
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


def _check_pair(src: str, tgt: str, out_dir: str | os.PathLike, what: str) -> None:
    for code in (src, tgt):
        if code not in MODULES:
            raise BibleError(f"unknown text code {code!r}: choose from {', '.join(MODULES)}")
    if src == tgt:
        raise BibleError(f"--src and --tgt are both {src!r}: pick two different texts")
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise BibleError(f"--out {out_dir} is a file: give a directory for the {what}")


def target_tag(code: str) -> str:
    """The source prefix that asks for an added target's wording (`<kjv>`)."""
    return f"<{code}>"


def build_bible_corpus(src: str, tgt: str, out_dir: str | os.PathLike, sword_dir: str | os.PathLike | None = None,
                       add_targets: tuple[str, ...] = ()) -> dict:
    """Write out_dir/{train,valid,test}.{src,tgt} (+ .ids with verse references) and PROVENANCE.md.

    add_targets: more target texts for the training chapters only; their pairs follow the main
    ones in train.{src,tgt}, each source line prefixed by target_tag(code) and a space, their
    references in train.ids as `code:Book.chapter.verse`. valid and test hold `tgt` alone.
    """
    _check_pair(src, tgt, out_dir, "corpus")
    for code in add_targets:
        if code not in MODULES:
            raise BibleError(f"unknown text code {code!r} in --add-target: choose from {', '.join(MODULES)}")
        if code in (src, tgt):
            raise BibleError(f"--add-target {code} is already the {'source' if code == src else 'target'}: "
                             f"give a third text")
    if len(set(add_targets)) != len(add_targets):
        raise BibleError(f"--add-target names a text twice ({', '.join(add_targets)}): give each once")
    src_verses, src_version = read_module(src, sword_dir)
    tgt_verses, tgt_version = read_module(tgt, sword_dir)
    alignment = align(src_verses, tgt_verses)
    splits: dict[str, list[Verse]] = {"train": [], "valid": [], "test": []}
    for key in alignment.pairs:
        splits[split_of(key[:2])].append(key)
    lines = {name: ([alignment.pairs[k][0] for k in keys], [alignment.pairs[k][1] for k in keys],
                    [f"{b}.{c}.{v}" for b, c, v in keys]) for name, keys in splits.items()}
    versions = {src: src_version, tgt: tgt_version}
    added: dict[str, dict] = {}
    for code in add_targets:
        verses, versions[code] = read_module(code, sword_dir)
        extra = align(src_verses, verses)
        keys = [key for key in extra.pairs if split_of(key[:2]) == "train"]
        sources, targets, ids = lines["train"]
        sources += [f"{target_tag(code)} {extra.pairs[k][0]}" for k in keys]
        targets += [extra.pairs[k][1] for k in keys]
        ids += [f"{code}:{b}.{c}.{v}" for b, c, v in keys]
        added[code] = {"pairs": len(keys), "dropped_chapters": len(extra.dropped_chapters)}

    from ..files import atomic_write_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, (sources, targets, ids) in lines.items():
        atomic_write_text(out / f"{name}.{src}", "".join(line + "\n" for line in sources))
        atomic_write_text(out / f"{name}.{tgt}", "".join(line + "\n" for line in targets))
        atomic_write_text(out / f"{name}.ids", "".join(line + "\n" for line in ids))
    report = {
        "src": src, "tgt": tgt, "pairs": {name: len(keys) for name, keys in splits.items()},
        "dropped_chapters": {f"{b} {c}": why for (b, c), why in sorted(alignment.dropped_chapters.items())},
        "dropped_verses": len(alignment.dropped_verses), "misaligned_verses": len(alignment.misaligned_verses),
        "only_in_one": alignment.only_in_one,
        "versions": versions, "added": added,
    }
    atomic_write_text(out / "PROVENANCE.md", _provenance(report, alignment))
    return report


def _provenance(report: dict, alignment: Alignment) -> str:
    src, tgt = MODULES[report["src"]], MODULES[report["tgt"]]
    lines = [
        f"# Bible parallel corpus: {src.title} ({src.language}) -> {tgt.title} ({tgt.language})",
        "",
        "Built by `transformer data bible` from the SWORD modules packaged by Debian, read with pysword.",
        "",
        "| code | text | SWORD module | version | Debian package | licence |",
        "|---|---|---|---|---|---|",
    ]
    for module in (src, tgt, *(MODULES[code] for code in report["added"])):
        lines.append(f"| {module.code} | {module.title} | {module.name} | {report['versions'][module.code]} "
                     f"| {module.package} | Public Domain |")
    counts = report["pairs"]
    lines += [
        "",
        f"Verse pairs: train {counts['train']:,}, valid {counts['valid']:,}, test {counts['test']:,} "
        f"(total {sum(counts.values()):,}). Splits hold whole chapters, chosen by a hash of the chapter name.",
        "",
    ]
    for code, extra in report["added"].items():
        lines += [
            f"Added target {code} ({MODULES[code].title}): {extra['pairs']:,} more training pairs (the training "
            f"chapters' verses that line up with {src.code}; {extra['dropped_chapters']} chapters dropped for "
            f"misalignment), after the {counts['train']:,} above in train.{src.code} / train.{tgt.code}, each "
            f"source prefixed by `{target_tag(code)} `; their references in train.ids read `{code}:Book.chapter.verse`. "
            f"valid and test hold {tgt.code} alone. Translate with the prefix to ask for the {MODULES[code].title}'s wording.",
            "",
        ]
    lines += [
        "OSIS markup is stripped: footnotes, cross references, variant readings, headings and speaker labels",
        "are dropped; psalm titles are kept as text (the Reina-Valera has them in verse 1 too).",
        "",
        f"Verses with text on one side only (dropped): {report['dropped_verses']}; verses whose book or chapter "
        f"only one module has: {report['only_in_one']}.",
        "",
        f"Chapters dropped because their verse numbering does not line up: {len(report['dropped_chapters'])}",
        "",
    ]
    lines += [f"- {chapter}: {why}" for chapter, why in report["dropped_chapters"].items()]
    by_chapter: dict[Chapter, list[int]] = {}
    for book, chapter, verse in alignment.misaligned_verses:
        by_chapter.setdefault((book, chapter), []).append(verse)
    lines += [
        "",
        f"Verses dropped because they do not translate each other although their numbers match: "
        f"{report['misaligned_verses']} in {len(by_chapter)} chapters (a length-based alignment of each chapter's "
        "verses: a numbering that shifts mid-chapter, or a clause one text has and the other lacks).",
        "",
    ]
    lines += [f"- {book} {chapter}: {_ranges(verses)}" for (book, chapter), verses in sorted(by_chapter.items())]
    return "\n".join(lines) + "\n"


def _ranges(numbers: list[int]) -> str:
    """[15, 16, 17, 30] -> "15-17, 30"."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


# --------------------------------------------------------------------------------------------
# Genre classification: each verse labelled with the genre of its book
#
# Rules: the 66 books of the Protestant canon, in the conventional grouping, by OSIS name (as
# read_module keys them). Books outside the table (the WEB's deuterocanon: Tob, Jdt, Sir, 1Macc,
# ...) are skipped and their verses counted, not an error: a module's versification may hold
# them. Empty verses (variants the text omits, e.g. Acts 8:37 in the WEB) are dropped and
# counted. Splits are split_of(chapter): the genre test chapters are the translation ones.

GENRES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Law", ("Gen", "Exod", "Lev", "Num", "Deut")),
    ("History", ("Josh", "Judg", "Ruth", "1Sam", "2Sam", "1Kgs", "2Kgs", "1Chr", "2Chr", "Ezra", "Neh", "Esth")),
    ("Wisdom and Poetry", ("Job", "Ps", "Prov", "Eccl", "Song")),
    ("Major Prophets", ("Isa", "Jer", "Lam", "Ezek", "Dan")),
    ("Minor Prophets", ("Hos", "Joel", "Amos", "Obad", "Jonah", "Mic", "Nah", "Hab", "Zeph", "Hag", "Zech", "Mal")),
    ("Gospels and Acts", ("Matt", "Mark", "Luke", "John", "Acts")),
    ("Epistles", ("Rom", "1Cor", "2Cor", "Gal", "Eph", "Phil", "Col", "1Thess", "2Thess", "1Tim", "2Tim",
                  "Titus", "Phlm", "Heb", "Jas", "1Pet", "2Pet", "1John", "2John", "3John", "Jude")),
    ("Revelation", ("Rev",)),
)
GENRE_OF = {book: genre for genre, books in GENRES for book in books}  # OSIS book -> genre


@dataclass
class GenreSplits:
    examples: dict[str, list[tuple[Verse, str, str]]]  # split -> [(verse, genre, text)], in canonical order
    empty_verses: list[Verse] = field(default_factory=list)  # in a book of the table, no text
    skipped_books: dict[str, int] = field(default_factory=dict)  # book outside the table -> verses with text


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


def build_genre_corpus(lang: str, out_dir: str | os.PathLike, sword_dir: str | os.PathLike | None = None) -> dict:
    """Write out_dir/{train,valid,test}.tsv (`genre<TAB>verse`, + .ids with verse references) and PROVENANCE.md."""
    if lang not in MODULES:
        raise BibleError(f"unknown text code {lang!r}: choose from {', '.join(MODULES)}")
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise BibleError(f"--out {out_dir} is a file: give a directory for the dataset")
    verses, version = read_module(lang, sword_dir)
    splits = genre_splits(verses)

    from ..files import atomic_write_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, examples in splits.examples.items():
        atomic_write_text(out / f"{name}.tsv", "".join(f"{genre}\t{text}\n" for _, genre, text in examples))
        atomic_write_text(out / f"{name}.ids", "".join(f"{b}.{c}.{v}\n" for (b, c, v), _, _ in examples))
    counts = {name: {genre: 0 for genre, _ in GENRES} for name in splits.examples}
    for name, examples in splits.examples.items():
        for _, genre, _ in examples:
            counts[name][genre] += 1
    report = {
        "lang": lang, "version": version, "verses": {name: len(e) for name, e in splits.examples.items()},
        "genres": counts, "empty_verses": len(splits.empty_verses), "skipped_books": splits.skipped_books,
    }
    atomic_write_text(out / "PROVENANCE.md", _genre_provenance(report))
    return report


def _genre_provenance(report: dict) -> str:
    module, counts = MODULES[report["lang"]], report["genres"]
    lines = [
        f"# Bible genre classification: {module.title} ({module.language})",
        "",
        "Built by `transformer data bible-genre` from the SWORD module packaged by Debian, read with pysword:",
        f"{module.name} version {report['version']} ({module.package}, Public Domain).",
        "",
        "Each line of {train,valid,test}.tsv is `genre<TAB>verse text` ({split}.ids: the verse references).",
        "Splits hold whole chapters, chosen by a hash of the chapter name: the chapters of `transformer data",
        "bible` (its test chapters are these test chapters). Markup is stripped as in `data bible`.",
        "",
        "| genre | books | train | valid | test |",
        "|---|---|---|---|---|",
    ]
    for genre, books in GENRES:
        lines.append(f"| {genre} | {' '.join(books)} | {counts['train'][genre]:,} | {counts['valid'][genre]:,} "
                     f"| {counts['test'][genre]:,} |")
    totals = report["verses"]
    skipped = report["skipped_books"]
    lines += [
        f"| total | {len(GENRE_OF)} books | {totals['train']:,} | {totals['valid']:,} | {totals['test']:,} |",
        "",
        f"Empty verses dropped (variants the text omits): {report['empty_verses']}.",
        f"Books outside the 66, skipped: {len(skipped)} ({sum(skipped.values()):,} verses)"
        + (": " + ", ".join(f"{book} {n}" for book, n in skipped.items()) if skipped else "") + ".",
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Text-to-text: several tasks in one TSV, each named by a prefix of the input (T5's way)
#
# Rules: translation both ways on the aligned verse pairs of `data bible`, and the genre task of
# `data bible-genre` on the target text's verses, written as text ("genre: <verse>" -> "Gospels
# and Acts"); splits are the same chapters (split_of), so no test chapter is seen in training by
# any task. Lines are `input<TAB>target`, tasks one after another (training shuffles).


def t2t_prefixes(src: str, tgt: str) -> dict[str, str]:
    """Task name -> the prefix its inputs start with."""
    a, b = MODULES[src].language, MODULES[tgt].language
    return {f"{src}-{tgt}": f"translate {a} to {b}: ", f"{tgt}-{src}": f"translate {b} to {a}: ",
            "genre": "genre: "}


def task_of(text: str, prefixes: dict[str, str]) -> str | None:
    """The task whose prefix starts this input (None: none does)."""
    return next((task for task, prefix in prefixes.items() if text.startswith(prefix)), None)


def build_t2t_corpus(src: str, tgt: str, out_dir: str | os.PathLike, sword_dir: str | os.PathLike | None = None) -> dict:
    """Write out_dir/{train,valid,test}.tsv (`input<TAB>target`, + .ids: task and verse), {train,valid}.txt
    (the split's verses in both languages, one per line: text for span-corruption pretraining) and PROVENANCE.md."""
    _check_pair(src, tgt, out_dir, "dataset")
    src_verses, src_version = read_module(src, sword_dir)
    tgt_verses, tgt_version = read_module(tgt, sword_dir)
    alignment = align(src_verses, tgt_verses)
    genres = genre_splits(tgt_verses)
    prefixes = t2t_prefixes(src, tgt)
    forward, backward = list(prefixes)[:2]
    rows: dict[str, list[tuple[str, Verse, str, str]]] = {"train": [], "valid": [], "test": []}
    for key, (a, b) in alignment.pairs.items():
        a, b = " ".join(a.split()), " ".join(b.split())  # tabs and newlines would break the TSV
        rows[split_of(key[:2])].append((forward, key, prefixes[forward] + a, b))
    for key, (a, b) in alignment.pairs.items():
        a, b = " ".join(a.split()), " ".join(b.split())
        rows[split_of(key[:2])].append((backward, key, prefixes[backward] + b, a))
    for split, examples in genres.examples.items():
        rows[split] += [("genre", key, prefixes["genre"] + text, genre) for key, genre, text in examples]

    from ..files import atomic_write_text

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, examples in rows.items():
        atomic_write_text(out / f"{name}.tsv", "".join(f"{x}\t{y}\n" for _, _, x, y in examples))
        atomic_write_text(out / f"{name}.ids", "".join(f"{task}\t{b}.{c}.{v}\n" for task, (b, c, v), _, _ in examples))
        if name != "test":  # monolingual text for pretraining: never the test chapters
            pairs = [(x.removeprefix(prefixes[forward]), y) for task, _, x, y in examples if task == forward]
            atomic_write_text(out / f"{name}.txt", "".join(f"{a}\n" for a, _ in pairs) + "".join(f"{b}\n" for _, b in pairs))
    counts = {name: {task: sum(1 for t, *_ in examples if t == task) for task in prefixes}
              for name, examples in rows.items()}
    report = {"src": src, "tgt": tgt, "prefixes": prefixes, "examples": counts,
              "versions": {src: src_version, tgt: tgt_version},
              "dropped_chapters": len(alignment.dropped_chapters), "misaligned_verses": len(alignment.misaligned_verses)}
    atomic_write_text(out / "PROVENANCE.md", _t2t_provenance(report))
    return report


def _t2t_provenance(report: dict) -> str:
    src, tgt = MODULES[report["src"]], MODULES[report["tgt"]]
    lines = [
        f"# Bible text-to-text mixture: {src.title} ({src.language}) and {tgt.title} ({tgt.language})",
        "",
        "Built by `transformer data bible-t2t` from the SWORD modules packaged by Debian, read with pysword:",
        f"{src.name} {report['versions'][src.code]} and {tgt.name} {report['versions'][tgt.code]} (Public Domain).",
        "",
        "Each line of {train,valid,test}.tsv is `input<TAB>target`; the input starts with its task's prefix",
        "({split}.ids: the task and the verse). Translation both ways uses the verse pairs of `transformer data",
        f"bible` ({report['dropped_chapters']} misaligned chapters and {report['misaligned_verses']} misaligned verses "
        f"dropped); the genre task, the {tgt.language} "
        "verses of `transformer data bible-genre`. Splits are the same whole chapters for every task.",
        f"{{train,valid}}.txt: the split's verse pairs as plain text, the {src.language} verses then the "
        f"{tgt.language} ones, one per line (for span-corruption pretraining; none from the test chapters).",
        "",
        "| task | prefix | train | valid | test |",
        "|---|---|---:|---:|---:|",
    ]
    counts = report["examples"]
    for task, prefix in report["prefixes"].items():
        lines.append(f"| {task} | `{prefix.strip()}` | {counts['train'][task]:,} | {counts['valid'][task]:,} "
                     f"| {counts['test'][task]:,} |")
    return "\n".join(lines) + "\n"
