"""`transformer data dictionary`: Spanish -> English words and phrases from the FreeDict
Spanish-English dictionary that Debian packages for dictd (dict-freedict-spa-eng).

Rules:
- Files: DIR/freedict-spa-eng.index (headword TAB offset TAB length, the numbers in dictd's
  base64) and DIR/freedict-spa-eng.dict.dz (gzip; a plain .dict is read too). The
  00database* entries are the dictionary's own description, not words.
- An entry is `headword /IPA/` and then its senses: one line `a, b, c` or numbered lines
  `1. a, b`. The headword is taken from the entry (it keeps its capitals: Colonia -> Cologne,
  colonia -> colony), without its pronunciation.
- Translations per headword: at most MAX_PER_HEADWORD, the first of each sense in order, then
  the second of each, and so on; each one pair, one line.
- Glued words: the source glued many multi-word translations into one word ("infrontof",
  "intheCubanway"; its changelog says so). A one-word translation is re-spaced when it splits
  into known words (the words of the dictionary's translations, fewest pieces, no article last
  or before a function word) and two or more pieces are function words (GLUE_WORDS) or the last
  is one of END_WORDS (of, to, for, with, from, oneself, one's). A capital after a small letter
  or an apostrophe always starts a new word (NewYorkCity, AllSaints'Day); a capitalised piece
  sheds only trailing function words (Bayof -> Bay of; Costa stays). Others stay as they are,
  so some glued ones remain ("bychance", "Javanesewoman"): see PROVENANCE.md.
- Training data only: no valid or test split (a word list, to add to a sentence corpus).
"""

from __future__ import annotations

import gzip
import os
import re
from collections import Counter
from pathlib import Path

from ..text import DataError
from . import packages
from .splits import Pair, assign, check_out, counts_line, dropped_lines, one_line, write_corpus

DICT_DIR = "/usr/share/dictd"
NAME = "freedict-spa-eng"
MAX_PER_HEADWORD = 3
INSTALL = "install dict-freedict-spa-eng (apt-get install dict-freedict-spa-eng)"
GLUE_WORDS = frozenset("a an the of to in at on by for with from and into oneself one's".split())
ARTICLES = frozenset("a an the".split())
END_WORDS = frozenset("of to for with from oneself one's".split())
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64_number(text: str) -> int:
    """A dictd index number: base 64 digits, most significant first."""
    value = 0
    for c in text:
        value = value * 64 + _B64.index(c)
    return value


def find_dictionary(dict_dir: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """(index, dict) paths, or a DataError saying what to install."""
    root = Path(dict_dir or DICT_DIR)
    if dict_dir and not root.is_dir():
        raise DataError(
            f"--dict {dict_dir} does not exist: give the directory holding {NAME}.index and "
            f"{NAME}.dict.dz (default {DICT_DIR}), or {INSTALL}"
        )
    index = root / f"{NAME}.index"
    data = next((p for p in (root / f"{NAME}.dict.dz", root / f"{NAME}.dict") if p.is_file()), None)
    if not index.is_file() or data is None:
        raise DataError(f"no {NAME}.index and {NAME}.dict.dz under {root}: {INSTALL}")
    return index, data


def read_entries(index: Path, data: Path) -> list[tuple[str, str]]:
    """(index headword, text) of every entry in index order, the 00database* ones included."""
    raw = gzip.open(data).read() if data.suffix == ".dz" else data.read_bytes()
    entries = []
    for number, line in enumerate(index.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 3:
            raise DataError(f"{index} line {number}: expected headword<TAB>offset<TAB>length")
        offset, length = b64_number(fields[1]), b64_number(fields[2])
        entries.append((fields[0], raw[offset : offset + length].decode("utf-8")))
    return entries


def parse_entry(text: str) -> tuple[str, list[list[str]]]:
    """(headword, senses: each a list of translations) of one entry."""
    lines = [line.strip() for line in text.strip("\n").splitlines() if line.strip()]
    headword = re.sub(r"\s*/[^/]*/\s*$", "", lines[0])
    senses = [re.sub(r"^\d+\.\s*", "", line) for line in lines[1:]]
    return one_line(headword), [[one_line(t) for t in s.split(",") if t.strip()] for s in senses]


def vocabulary(entries: list[tuple[str, list[list[str]]]]) -> set[str]:
    """The English words the dictionary itself uses: pieces glued words may split into."""
    words = set(GLUE_WORDS)
    for _, senses in entries:
        for translation in (t for sense in senses for t in sense):
            words.update(w.lower() for w in re.findall(r"[A-Za-z']+", translation))
    return words


def _pieces(word: str, known: set[str]) -> list[str] | None:
    """word as the fewest known words (2 or more, each of 2+ letters or "a"), or None."""
    low, n = word.lower(), len(word)
    best: list[list[int] | None] = [[]] + [None] * n  # best[j]: cut points of word[:j]
    for i in range(n):
        if best[i] is None:
            continue
        for j in range(i + 1, n + 1):
            piece = low[i:j]
            if (i, j) == (0, n) or piece not in known or (len(piece) == 1 and piece != "a"):
                continue
            if best[j] is None or len(best[j]) > len(best[i]) + 1:
                best[j] = [*best[i], j]
    cuts = best[n]
    return [word[i:j] for i, j in zip([0, *cuts], cuts, strict=False)] if cuts else None


def _fits(pieces: list[str]) -> bool:
    """No article at the end or before a function word ("pot a to", "ban an a" are no split)."""
    words = [p.lower() for p in pieces]
    return all(
        w not in ARTICLES or (k + 1 < len(words) and words[k + 1] not in GLUE_WORDS)
        for k, w in enumerate(words)
    )


def unglue(translation: str, known: set[str]) -> str:
    """A glued multi-word translation re-spaced (the module's rule), others unchanged."""
    match = re.fullmatch(r"([A-Za-z']+)([?!.]?)", translation)
    if not match or len(match.group(1)) < 5:
        return translation
    word, end = match.groups()
    chunks = re.split(r"(?<=[a-z'])(?=[A-Z])", word)  # BayofBiscay -> Bayof, Biscay
    if len(chunks) == 1:
        pieces = _pieces(word, known)
        if not pieces or not _fits(pieces):
            return translation
        glue = [p for p in pieces if p.lower() in GLUE_WORDS]
        if len(glue) >= 2 or pieces[-1].lower() in END_WORDS:
            return " ".join(pieces) + end
        return translation
    pieces = []
    for chunk in chunks:
        split = _pieces(chunk, known) or [chunk]
        if chunk[0].isupper() and any(
            p.lower() not in GLUE_WORDS or p.lower() in ARTICLES for p in split[1:]
        ):
            split = [chunk]  # a capitalised chunk only sheds function words: Bayof, not Cost a
        pieces += split
    return " ".join(pieces if _fits(pieces) else chunks) + end


def choose(senses: list[list[str]]) -> list[str]:
    """Up to MAX_PER_HEADWORD translations: each sense's first, then each one's second ..."""
    chosen: list[str] = []
    for rank in range(max(map(len, senses), default=0)):
        for sense in senses:
            if rank < len(sense) and sense[rank] not in chosen:
                chosen.append(sense[rank])
    return chosen[:MAX_PER_HEADWORD]


def build_dictionary_corpus(
    out_dir: str | os.PathLike, dict_dir: str | os.PathLike | None = None
) -> dict:
    """Write OUT/train.spa, OUT/train.eng and PROVENANCE.md; return a report."""
    out = check_out(out_dir, "dictionary")
    index, data = find_dictionary(dict_dir)
    texts = read_entries(index, data)
    info = next((t for h, t in texts if h == "00databaseinfo"), "")
    entries = [parse_entry(t) for h, t in texts if not h.startswith("00database") and t.strip()]
    known = vocabulary(entries)
    dropped: Counter = Counter()
    respaced: dict[str, str] = {}
    pairs = []
    for headword, senses in entries:
        if not headword or not any(senses):
            dropped["entry without a headword or a translation"] += 1
            continue
        all_translations = sum(len(s) for s in senses)
        chosen = choose(senses)
        if all_translations > len(chosen):
            dropped[f"translations beyond the {MAX_PER_HEADWORD} chosen per headword"] += (
                all_translations - len(chosen)
            )
        for translation in chosen:
            fixed = unglue(translation, known)
            if fixed != translation:
                respaced[translation] = fixed
            pairs.append(Pair(headword, fixed, "dictionary"))
    splits = assign(pairs, lambda _: "train", dropped)
    report = {
        "pairs": len(splits["train"]),
        "headwords": len(entries),
        "respaced": respaced,
        "dropped": dropped,
    }
    owner = packages.owners([index]).get(str(index), packages.UNKNOWN)
    provenance = _provenance({"train": splits["train"]}, report, index, data, owner, info)
    write_corpus(out, {"train": splits["train"]}, provenance)
    return report


def _provenance(
    splits: dict, report: dict, index: Path, data: Path, package: str, info: str
) -> str:
    version = packages.versions([package]).get(package, packages.UNKNOWN)
    edition = re.search(r"^Edition:\s*(.+)$", info, re.M)
    availability = re.search(r"Available under the terms of (.+?version)", one_line(info))
    respaced = sorted(report["respaced"].items())
    lines = [
        "# Spanish -> English dictionary pairs (FreeDict)",
        "",
        f"Built by `transformer data dictionary` from {index} and {data}: the FreeDict "
        f"Spanish-English dictionary (edition {edition.group(1) if edition else 'unknown'}, "
        "generated from Ergane), installed by the Debian package "
        f"{package} {version}.",
        "",
        "Licence: "
        + (
            availability.group(1)
            if availability
            else packages.licence(package)
            if package != packages.UNKNOWN
            else packages.UNKNOWN
        )
        + f" (the package's copyright file: {packages.licence(package)}).",
        "",
        f"Pairs: {counts_line(splits, 'headword -> translation pairs')} from "
        f"{report['headwords']:,} headwords: at most {MAX_PER_HEADWORD} per headword, the first "
        "translation of each sense, then the second of each, and so on.",
        "",
        "No valid or test split: this is a word and phrase list to add to the training data of "
        "a sentence corpus (data ui-strings, data debian-descriptions, data bible), whose valid "
        "and test sets measure translation.",
        "",
        f"Glued words re-spaced ({len(respaced):,}; the source glued many multi-word "
        "translations into one word; a heuristic, see transformer/data/sources/freedict.py; "
        "others stay glued, e.g. bychance, Javanesewoman):",
        "",
        ", ".join(f"{a} -> {b}" for a, b in respaced) or "none",
        "",
        "Dropped:",
        "",
        *dropped_lines(report["dropped"]),
    ]
    return "\n".join(lines) + "\n"
