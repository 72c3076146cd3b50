"""`transformer data manuals`: Spanish -> English sentence pairs of manual prose, from the six
Debian manuals that ship the same pages in both languages (translated with po4a or itstool, so
the two sides have the same structure). Every other translated manual in Debian is left out on
purpose: it is a test set no one trains on.

Rules:
- Manuals (MANUALS): gnome-user-docs (Mallard, /usr/share/help/C and es, its gnome-help and
  system-admin-guide), LibreOffice's help (libreoffice-help-en-us and -es, HTML), the Debian
  installation guide (installation-guide-amd64, HTML), the Debian Reference (debian-reference-en
  and -es, HTML), the Debian New Maintainers' Guide (maint-guide and maint-guide-es, HTML) and the
  Linux man-pages (manpages and manpages-es, roff, gzipped). A manual is read when dpkg's file
  lists (ROOT/var/lib/dpkg/info/PACKAGE.list) show both its packages installed, and only the
  files those lists name are read, so pages other packages put in the same folders (another
  program's help, a man page that manpages-es translates for coreutils) never enter. A missing
  manual is skipped and named in the report with its apt-get line.
- A document is one page present in both languages under the same relative name (the language
  part of the path or name mapped: C <-> es, en-US <-> es, .en.html <-> .es.html, man/manN <->
  man/es/manN). Links (symbolic, or a man page that is only `.so other`) are skipped. Its text
  blocks come from manual_text (paragraphs, items, titles; code, tables and page furniture
  dropped; inline code kept verbatim).
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
- Splits: whole documents, by sha256 of "manual/relative path" (splits.split_of),
  VALID_PERCENT and TEST_PERCENT; splits.assign deduplicates and keeps valid and test English out
  of train. With max_share below 1, a manual's training pairs beyond that share of all training
  pairs are dropped, whole documents at a time in hash order (valid and test keep theirs).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..text import DataError
from . import packages
from .bible.verse_align import LengthModel, fit_length_model
from .manual_text import Block, html_blocks, mallard_blocks, roff_blocks
from .sentences import align_sentences, split_sentences
from .splits import (
    SPLITS,
    Pair,
    assign,
    check_out,
    counts_line,
    dropped_lines,
    split_of,
    split_rule,
    write_corpus,
)

VALID_PERCENT = 3.0
TEST_PERCENT = 3.0
MIN_WORDS = 3
MAX_CHARS = 400
RATIO_RANGE = (0.5, 2.2)  # Spanish / English characters
ID_SHARE = 0.5  # of the blocks with an id, for a by_id manual's page to pair by id
Unequal = Literal["align", "skip"]


@dataclass(frozen=True)
class Manual:
    """One manual: its two packages, where each puts its pages (relative to the root), which
    files are pages, how a page reads and how an English page's path becomes the Spanish one."""

    name: str
    english: str
    spanish: str
    english_dir: str
    page: str  # a regular expression over the path relative to english_dir
    reader: Callable[[bytes, Counter], list[Block]]
    to_spanish: Callable[[str], str]  # the English page's absolute path -> the Spanish one
    by_id: bool = False  # blocks pair by their HTML id (LibreOffice's par_id, hd_id ...)


def _read_man(data: bytes, dropped: Counter) -> list[Block]:
    return roff_blocks(gzip.decompress(data).decode("utf-8", errors="replace"), dropped)


def _swap(old: str, new: str) -> Callable[[str], str]:
    return lambda path: path.replace(old, new, 1)


MANUALS = (
    Manual(
        "gnome-user-docs", "gnome-user-docs", "gnome-user-docs", "usr/share/help/C",
        r"(gnome-help|system-admin-guide)/[^/]+\.page", mallard_blocks,
        _swap("/usr/share/help/C/", "/usr/share/help/es/"),
    ),
    Manual(
        "libreoffice-help", "libreoffice-help-en-us", "libreoffice-help-es",
        "usr/share/libreoffice/help/en-US", r"text/.+\.html", html_blocks,
        _swap("/help/en-US/", "/help/es/"), by_id=True,
    ),
    Manual(
        "installation-guide", "installation-guide-amd64", "installation-guide-amd64",
        "usr/share/doc/installation-guide-amd64/en", r"[^/]+\.html", html_blocks,
        _swap("/installation-guide-amd64/en/", "/installation-guide-amd64/es/"),
    ),
    Manual(
        "debian-reference", "debian-reference-en", "debian-reference-es",
        "usr/share/debian-reference", r"[^/]+\.en\.html", html_blocks,
        lambda path: path[: -len(".en.html")] + ".es.html",
    ),
    Manual(
        "maint-guide", "maint-guide", "maint-guide-es", "usr/share/doc/maint-guide/html",
        r"[^/]+\.en\.html", html_blocks,
        lambda path: path.replace("/maint-guide/", "/maint-guide-es/")[: -len(".en.html")]
        + ".es.html",
    ),
    Manual(
        "manpages", "manpages", "manpages-es", "usr/share/man", r"man\d/[^/]+\.gz", _read_man,
        _swap("/usr/share/man/man", "/usr/share/man/es/man"),
    ),
)  # fmt: skip


@dataclass
class Found:
    """What one manual gave."""

    documents: int = 0  # pages present in both languages
    how: Counter = field(default_factory=Counter)  # documents paired by id, position, aligner;
    # skipped: unequal block counts with unequal="skip", or a page without blocks
    pairs: dict[str, int] = field(default_factory=lambda: {name: 0 for name in SPLITS})
    licence: str = packages.UNKNOWN
    versions: str = ""


def package_files(root: Path, package: str) -> set[str] | None:
    """The paths in dpkg's file list of an installed package; None when it is not installed."""
    info = root / "var/lib/dpkg/info"
    for name in (f"{package}.list", *(p.name for p in info.glob(f"{package}:*.list"))):
        try:
            return set((info / name).read_text(encoding="utf-8").splitlines())
        except OSError:
            continue
    return None


def documents(root: Path, manual: Manual) -> list[tuple[str, Path, Path]] | None:
    """(relative name, English file, Spanish file) of each page in both languages (sorted), or
    None when a package of the manual is not installed."""
    english, spanish = package_files(root, manual.english), package_files(root, manual.spanish)
    if english is None or spanish is None:
        return None
    base = "/" + manual.english_dir + "/"
    page = re.compile(manual.page)
    found = []
    for path in sorted(english):
        relative = path[len(base) :]
        if not path.startswith(base) or not page.fullmatch(relative):
            continue
        other = manual.to_spanish(path)
        en_file, es_file = root / path.lstrip("/"), root / other.lstrip("/")
        if other in spanish and en_file.is_file() and es_file.is_file():
            if not en_file.is_symlink() and not es_file.is_symlink():
                found.append((relative, en_file, es_file))
    return found


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


def manual_split(group: str) -> str:
    return split_of(group, VALID_PERCENT, TEST_PERCENT)


def _install_line(manuals: list[Manual]) -> str:
    names = dict.fromkeys(p for m in manuals for p in (m.english, m.spanish))
    return "apt-get install -y " + " ".join(names)


def build_manuals_corpus(
    out_dir: str | os.PathLike,
    root: str | os.PathLike = "/",
    unequal: Unequal = "align",
    max_share: float = 1.0,
) -> dict:
    """Write OUT/{train,valid,test}.{spa,eng} and PROVENANCE.md; return a report."""
    out = check_out(out_dir, "manual pairs")
    base = Path(root)
    if not base.is_dir():
        raise DataError(
            f"--root {root} does not exist: give the directory the packages were installed under "
            "(default /)"
        )
    found: dict[str, Found] = {}
    skipped: list[Manual] = []
    pages: list[tuple[Manual, str, list[str], list[str]]] = []
    dropped: Counter = Counter()
    blocks_dropped: Counter = Counter()
    for manual in MANUALS:
        docs = documents(base, manual)
        if docs is None:
            skipped.append(manual)
            continue
        found[manual.name] = Found(documents=len(docs))
        for relative, en_file, es_file in docs:
            english = manual.reader(en_file.read_bytes(), blocks_dropped)
            spanish = manual.reader(es_file.read_bytes(), blocks_dropped)
            pages.append((manual, relative, english, spanish))
    if not found:
        raise DataError(f"none of the manuals is installed: {_install_line(list(MANUALS))}")
    model = fit_length_model(
        [(en.text, es.text) for _, _, english, spanish in pages if len(english) == len(spanish)
         for en, es in zip(english, spanish, strict=True)]
    )  # fmt: skip
    pairs: list[Pair] = []
    for manual, relative, english, spanish in pages:
        report = found[manual.name]
        keyed = pairs_by_id(english, spanish) if manual.by_id else None
        if keyed is not None:
            how, blocks = "id", keyed
            unmatched = len(english) + len(spanish) - 2 * len(keyed)
            dropped["block without an id, or whose id has no counterpart (pairing by id)"] += (
                unmatched
            )
        else:
            how, blocks = block_pairs(english, spanish, unequal, model)
        report.how[how] += 1
        if how == "skipped":
            why = "no text blocks" if not english or not spanish else "block counts differ"
            dropped[f"document: {why}"] += 1
            continue
        group = f"{manual.name}/{relative}"
        for spa_block, eng_block in blocks:
            for spa, eng in sentence_pairs(spa_block, eng_block, model, dropped):
                reason = reason_to_drop(spa, eng)
                if reason:
                    dropped[reason] += 1
                else:
                    pairs.append(Pair(spa, eng, group))
    splits = assign(pairs, manual_split, dropped)
    manual_of = {(p.spa, p.eng): p.group.split("/", 1)[0] for p in pairs}
    if max_share < 1.0:
        splits["train"] = _cap(splits["train"], manual_of, pairs, max_share, dropped)
    for name, kept in splits.items():
        for pair in kept:
            found[manual_of[pair]].pairs[name] += 1
    installed = packages.versions(
        (p for m in MANUALS if m.name in found for p in (m.english, m.spanish)), base
    )
    for manual in MANUALS:
        if manual.name in found:
            found[manual.name].licence = packages.licence(manual.english, base / "usr/share/doc")
            found[manual.name].versions = ", ".join(
                f"{p} {installed.get(p, packages.UNKNOWN)}"
                for p in dict.fromkeys((manual.english, manual.spanish))
            )
    report = {
        "pairs": {name: len(splits[name]) for name in SPLITS},
        "manuals": found,
        "skipped": [m.name for m in skipped],
        "install": _install_line(skipped) if skipped else "",
        "dropped": dropped,
        "blocks_dropped": blocks_dropped,
        "model": model,
    }
    write_corpus(out, splits, _provenance(splits, report, unequal, max_share))
    return report


def _cap(
    train: list[tuple[str, str]],
    manual_of: dict[tuple[str, str], str],
    pairs: list[Pair],
    max_share: float,
    dropped: Counter,
) -> list[tuple[str, str]]:
    """Train without each manual's pairs beyond max_share of the training pairs (whole documents,
    in sha256 order of their keys)."""
    per_manual = Counter(manual_of[p] for p in train)
    others = {name: len(train) - count for name, count in per_manual.items()}
    group_of = {(p.spa, p.eng): p.group for p in pairs}
    kept_groups: set[str] = set()
    for name, count in per_manual.items():
        limit = int(max_share / (1 - max_share) * others[name]) if max_share < 1 else count
        if count <= limit:
            kept_groups |= {group_of[p] for p in train if manual_of[p] == name}
            continue
        sizes = Counter(group_of[p] for p in train if manual_of[p] == name)
        total = 0
        for group in sorted(sizes, key=lambda g: hashlib.sha256(g.encode()).hexdigest()):
            if total + sizes[group] <= limit:
                kept_groups.add(group)
                total += sizes[group]
    kept = [p for p in train if group_of[p] in kept_groups]
    if len(kept) < len(train):
        dropped[f"train pair beyond a manual's share of {max_share:g} (--max-share)"] += len(
            train
        ) - len(kept)
    return kept


def _provenance(splits: dict, report: dict, unequal: Unequal, max_share: float) -> str:
    model: LengthModel = report["model"]
    rows = [
        f"| {name} | {f.versions} | {f.licence} | {f.documents:,} | {f.how['id']:,} | "
        f"{f.how['position']:,} | {f.how['aligner']:,} | {f.how['skipped']:,} | "
        f"{f.pairs['train']:,} | {f.pairs['valid']:,} | "
        f"{f.pairs['test']:,} |"
        for name, f in report["manuals"].items()
    ]
    skipped = (
        [f"Not installed, skipped: {', '.join(report['skipped'])} ({report['install']}).", ""]
        if report["skipped"]
        else []
    )
    lines = [
        "# Debian manuals: Spanish -> English",
        "",
        "Built by `transformer data manuals` from manuals that Debian packages install in English "
        "and Spanish (translations made with po4a or itstool, so both sides share the page "
        "structure). Only these six manuals are read; every other translated manual in Debian "
        "is kept out as an unseen test set.",
        "",
        "Licence: each manual keeps its own licence (below, from the English package's "
        "copyright file; the Spanish translation is distributed under the same terms). Check "
        "before redistributing.",
        "",
        "| manual | packages | licence | documents in both | by id | by position | by aligner | "
        "skipped | train | valid | test |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        *skipped,
        f"Pairs: {counts_line(splits, 'sentence pairs')}.",
        "",
        "## Splits",
        "",
        split_rule("documents, keyed by manual/relative path", VALID_PERCENT, TEST_PERCENT),
        *(
            [f"Training pairs of one manual are capped at {max_share:g} of all training pairs."]
            if max_share < 1
            else []
        ),
        "",
        "## Segments",
        "",
        "A document is one page present in both languages. Its text blocks (paragraphs, list "
        "items, titles; code, commands, tables and page furniture dropped; inline code kept) "
        "pair by their HTML id in LibreOffice's help (the same in every language; its pages "
        "order some sections by their translated names), elsewhere by position when both "
        "sides have as many, otherwise "
        + (
            "by a length-based alignment of the blocks (Gale & Church)"
            if unequal == "align"
            else "the document is skipped"
        )
        + ". Each block pair is cut into sentences and aligned by length (Gale & Church; "
        f"Spanish/English length ratio {model.ratio:.3f}, variance {model.variance:.2f} per "
        f"character, fitted on the position-paired blocks); beads with sentences on both sides "
        "are pairs. Filters: Spanish equal to the English or containing it, fewer than "
        f"{MIN_WORDS} English words, "
        f"more than {MAX_CHARS} characters, a length ratio outside {RATIO_RANGE[0]}-"
        f"{RATIO_RANGE[1]}.",
        "",
        "Blocks dropped while reading pages (both languages):",
        "",
        *dropped_lines(report["blocks_dropped"]),
        "",
        "Dropped:",
        "",
        *dropped_lines(report["dropped"]),
    ]
    return "\n".join(lines) + "\n"
