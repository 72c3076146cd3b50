"""`transformer data ui-strings`: Spanish -> English software messages from the system's gettext
catalogs (LOCALE_DIR/es*/LC_MESSAGES/*.mo), read with the standard library.

Rules:
- Catalogs: every *.mo under es/LC_MESSAGES and es_*/LC_MESSAGES (es_ES, es_MX ...). A file
  with the same bytes as one already read (iso-codes installs iso_3166.mo as a link to
  iso_3166-1.mo) is skipped; real files are read before links, then by name.
- Entries: msgid (English) -> msgstr (Spanish); the header (empty msgid) is skipped; a message
  context (`ctx\\x04msgid`) is removed; a plural entry gives its singular, msgid -> form 0.
  Each entry is cleaned by ui_clean.clean_pair (accelerators, markup, placeholders, size).
- Translations: one per English string, the most frequent across catalogs (ties: the first in
  catalog order); the others are dropped as conflicting.
- Splits: whole catalogs, by sha256 of the domain without a version suffix (postgres-15 ->
  postgres, gstreamer-1.0 -> gstreamer, iso_3166-2 -> iso_3166), VALID_PERCENT and TEST_PERCENT
  of the hash range, so valid and test strings come from software never trained on (and no
  valid or test English string occurs in train, see splits.py). OUT/test.domains names the test
  catalogs.
"""

from __future__ import annotations

import gettext
import hashlib
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..text import DataError
from . import packages
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
from .ui_clean import MAX_CHARS, MAX_LINES, MAX_SAME_WORDS, MAX_TAGS, clean_pair

LOCALE_DIR = "/usr/share/locale"
VALID_PERCENT = 3.0  # of the hash range over catalog groups: chosen so that valid and test
TEST_PERCENT = 9.0  # each hold several catalogs and thousands of pairs on Debian 12
INSTALL = (
    "install translated packages (e.g. apt-get install -y iso-codes; language-pack-es on Ubuntu) "
    "and check that no file in /etc/dpkg/dpkg.cfg.d/ excludes /usr/share/locale"
)


@dataclass
class Catalog:
    path: Path
    language: str  # es, es_ES ...
    domain: str  # gtk30, postgres-15 ...
    package: str = packages.UNKNOWN
    project: str = ""  # the header's Project-Id-Version
    entries: int = 0  # messages read (singular forms)
    pairs: int = 0  # kept by clean_pair
    skipped: str = ""  # why the whole catalog was not read
    dropped: Counter = field(default_factory=Counter)

    @property
    def name(self) -> str:
        return self.domain if self.language == "es" else f"{self.language}/{self.domain}"


def group_of(domain: str) -> str:
    """The held-out group of a catalog: its domain without a version suffix."""
    return re.sub(r"-\d+(\.\d+)*$", "", domain)


def ui_split(domain: str) -> str:
    return split_of(group_of(domain), VALID_PERCENT, TEST_PERCENT)


def find_catalogs(locale_dir: str | os.PathLike | None = None) -> list[Catalog]:
    """The Spanish catalogs under locale_dir, real files before links, then by name."""
    root = Path(locale_dir or LOCALE_DIR)
    if locale_dir and not root.is_dir():
        raise DataError(
            f"--locale-dir {locale_dir} does not exist: give the directory holding "
            f"es/LC_MESSAGES (default {LOCALE_DIR})"
        )
    found = [
        Catalog(path, path.parents[1].name, path.stem)
        for language in sorted(root.glob("es*"))
        if language.name == "es" or language.name.startswith(("es_", "es@"))
        for path in sorted((language / "LC_MESSAGES").glob("*.mo"))
    ]
    if not found:
        raise DataError(f"no Spanish gettext catalogs under {root}/es/LC_MESSAGES: {INSTALL}")
    return sorted(found, key=lambda c: (c.path.is_symlink(), c.language, c.domain))


def read_catalog(catalog: Catalog) -> list[tuple[str, str]]:
    """(msgid, msgstr) of each message, singular forms only, contexts removed."""
    entries, info = read_mo(catalog.path)
    catalog.project = info.get("project-id-version", "")
    return entries


def read_mo(path: str | os.PathLike) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """A compiled gettext catalog (*.mo): (msgid, msgstr) of each message in file order, singular
    forms only, contexts removed; and its header's fields (lower-case names)."""
    with open(path, "rb") as f:
        translations = gettext.GNUTranslations(f)
    entries = []
    for key, msgstr in translations._catalog.items():
        if isinstance(key, tuple):
            if key[1] != 0:
                continue
            key = key[0]
        msgid = key.split("\x04")[-1]
        if msgid:
            entries.append((msgid, msgstr))
    return entries, translations.info()


def build_ui_corpus(
    out_dir: str | os.PathLike, locale_dir: str | os.PathLike | None = None
) -> dict:
    """Write OUT/{train,valid,test}.{spa,eng}, OUT/test.domains and PROVENANCE.md; return a
    report (pairs per split, catalogs, what was dropped)."""
    out = check_out(out_dir, "UI strings")
    catalogs = find_catalogs(locale_dir)
    dropped: Counter = Counter()
    pairs: list[Pair] = []
    digests: dict[str, str] = {}
    for catalog in catalogs:
        digest = hashlib.sha256(catalog.path.read_bytes()).hexdigest()
        if digest in digests:
            catalog.skipped = f"same file as {digests[digest]}"
            continue
        digests[digest] = catalog.name
        try:
            entries = read_catalog(catalog)
        except (OSError, UnicodeDecodeError, ValueError, LookupError) as e:
            catalog.skipped = f"unreadable ({e})"
            continue
        catalog.entries = len(entries)
        for msgid, msgstr in entries:
            reason, eng, spa = clean_pair(msgid, msgstr)
            if reason:
                catalog.dropped[reason] += 1
            else:
                catalog.pairs += 1
                pairs.append(Pair(spa, eng, catalog.domain))
        dropped.update(catalog.dropped)
    read = [c for c in catalogs if not c.skipped]
    if not pairs:
        raise DataError(
            f"the {len(read)} Spanish catalogs under {Path(locale_dir or LOCALE_DIR)} hold no "
            f"translated message: {INSTALL}"
        )
    splits = assign(pairs, ui_split, dropped, one_translation=True)
    owner = packages.owners(c.path for c in catalogs)
    for catalog in catalogs:
        catalog.package = owner.get(str(catalog.path), packages.UNKNOWN)
    test_domains = sorted({c.name for c in read if ui_split(c.domain) == "test"})
    report = {
        "pairs": {name: len(splits[name]) for name in SPLITS},
        "catalogs": {name: sum(ui_split(c.domain) == name for c in read) for name in SPLITS},
        "skipped_catalogs": {c.name: c.skipped for c in catalogs if c.skipped},
        "dropped": dropped,
        "sentences": {name: sum(map(is_sentence, splits[name])) for name in SPLITS},
    }
    write_corpus(
        out,
        splits,
        _provenance(catalogs, splits, report),
        {"test.domains": "".join(name + "\n" for name in test_domains)},
    )
    return report


def is_sentence(pair: tuple[str, str]) -> bool:
    """A full sentence: the English starts with a capital, ends with . ! or ?, 4 words or more."""
    eng = pair[1]
    return eng[:1].isupper() and eng.endswith((".", "!", "?")) and len(eng.split()) >= 4


def _provenance(catalogs: list[Catalog], splits: dict, report: dict) -> str:
    version = packages.versions(c.package for c in catalogs)
    licences = {p: packages.licence(p) for p in {c.package for c in catalogs} - {packages.UNKNOWN}}
    sentences = report["sentences"]
    lines = [
        "# Software UI strings: Spanish -> English (gettext catalogs)",
        "",
        "Built by `transformer data ui-strings` from the Spanish gettext catalogs (`*.mo`) that "
        "this machine's packages installed, read with Python's gettext module. Each msgid "
        "(English) and its msgstr (Spanish) is one pair: `.spa` lines are the source, `.eng` "
        "lines the target. The translations are human ones (the projects' translation teams).",
        "",
        f"Pairs: {counts_line(splits, 'pairs')}.",
        f"Catalogs: train {report['catalogs']['train']}, valid {report['catalogs']['valid']}, "
        f"test {report['catalogs']['test']} (test.domains lists the test ones).",
        f"Full sentences (English starts with a capital, ends with . ! or ?, 4+ words): train "
        f"{sentences['train']:,}, valid {sentences['valid']:,}, test {sentences['test']:,}; the "
        "rest are labels, menu items, names and message fragments.",
        "",
        "## Splits",
        "",
        split_rule(
            "catalogs, keyed by the domain without a version suffix: postgres-15 -> postgres",
            VALID_PERCENT,
            TEST_PERCENT,
        ),
        "One translation per English string: the most frequent across catalogs (ties: the first "
        "in catalog order); the other translations are dropped as conflicting.",
        "",
        "## Cleaning",
        "",
        "- the header entry, message contexts and plural forms other than the singular are not "
        "read",
        f"- dropped: empty msgstr; more than {MAX_LINES} lines or {MAX_CHARS} characters; no "
        "letters besides placeholders; a different set of placeholders on the two sides "
        "(printf, %(name)s, %1, {name}); different markup tags on the two sides or more than "
        f"{MAX_TAGS}; msgstr = msgid when more than {MAX_SAME_WORDS} words (shorter identical "
        "pairs such as names, Error, Normal are kept)",
        "- stripped on both sides: simple markup tags (<b>, <i>, <span>, <a> ...), accelerator "
        "marks (GTK `_`, Qt `&`; identifiers like sh_link and AT&T are left alone); whitespace "
        "runs become one space",
        "",
        "Dropped:",
        "",
        *dropped_lines(report["dropped"]),
        "",
        "## Catalogs",
        "",
        "Each catalog is under its package's licence (from /usr/share/doc/PACKAGE/copyright).",
        "",
        "| catalog | split | package | version | licence | project | messages | "
        "pairs after cleaning | note |",
        "|---|---|---|---|---|---|---:|---:|---|",
    ]
    for c in sorted(catalogs, key=lambda c: c.name):
        lines.append(
            f"| {c.name} | {'-' if c.skipped else ui_split(c.domain)} | {c.package} | "
            f"{version.get(c.package, packages.UNKNOWN)} | "
            f"{licences.get(c.package, packages.UNKNOWN)} | {c.project} | {c.entries:,} | "
            f"{c.pairs:,} | {c.skipped} |"
        )
    return "\n".join(lines) + "\n"
