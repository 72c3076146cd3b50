"""`transformer data debian-descriptions`: Spanish -> English Debian package descriptions, from the
Translation-es and Translation-en indexes apt keeps under /var/lib/apt/lists (the Debian
Description Translation Project's translations).

Rules:
- Indexes: every LISTS/*_i18n_Translation-es[.gz|.xz|.bz2|.lz4|.zst] and -en likewise, plain
  files too; .lz4 and .zst are read through `/usr/lib/apt/apt-helper cat-file`. Stanzas are
  deb822: Package, Description-md5, Description-LANG (a title line, then lines that start with
  a space; " ." separates paragraphs).
- Pairing: a Spanish description with the English one of the same Description-md5 (the md5 of
  the English text it translates, so a stale translation never pairs). Several packages sharing
  one description are read once, under the first package name in alphabetical order.
- Segments: the title pair; then, when both sides have as many paragraphs, each paragraph pair
  (otherwise the body is dropped and counted, the title kept). A paragraph is prose, list items
  (a line starting with *, - or +) and verbatim blocks (lines indented by two spaces or more;
  lines indented deeper than an item continue it); the two sides must have the same sequence of
  these, else the paragraph is dropped. Items and verbatim blocks pair 1:1. Prose pairs sentence
  by sentence (sentences.split_sentences) when both sides have as many sentences; otherwise a
  prose block of under SHORT_WORDS English words is kept whole, a longer one aligned by lengths
  (sentences.align_sentences).
- Filters: a pair identical on both sides (code, names, untranslated), one without letters, or
  one whose lengths are more than 4 standard deviations apart under the length model fitted on
  the paragraph pairs (verse_align.fit_length_model) is dropped.
- Splits: by package (the description's package name), VALID_PERCENT and TEST_PERCENT; see
  splits.py for deduplication.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..text import DataError
from . import packages
from .bible.verse_align import MISMATCH_COST, LengthModel, fit_length_model
from .sentences import align_sentences, split_sentences
from .splits import (
    SPLITS,
    Pair,
    assign,
    check_out,
    counts_line,
    dropped_lines,
    one_line,
    split_of,
    split_rule,
    write_corpus,
)

LISTS_DIR = "/var/lib/apt/lists"
APT_HELPER = "/usr/lib/apt/apt-helper"
VALID_PERCENT = 3.0
TEST_PERCENT = 3.0
SHORT_WORDS = 60
UPDATE = "run `sudo apt-get -o Acquire::Languages=es,en update`"
_BULLET = re.compile(r"[*+-]\s+")


@dataclass
class Description:
    package: str
    title: str
    paragraphs: list[list[str]]  # each paragraph's lines, the deb822 leading space removed


def find_indexes(lists_dir: str | os.PathLike | None, language: str) -> list[Path]:
    root = Path(lists_dir or LISTS_DIR)
    if lists_dir and not root.is_dir():
        raise DataError(
            f"--lists {lists_dir} does not exist: give the directory holding the "
            f"*_i18n_Translation-es files (default {LISTS_DIR})"
        )
    if not root.is_dir():
        return []  # the default directory on a system without apt
    name = re.compile(rf".*Translation-{language}(\.(gz|xz|bz2|lz4|zst))?")
    return sorted(p for p in root.iterdir() if p.is_file() and name.fullmatch(p.name))


def read_index(path: Path) -> str:
    """The text of an index, plain or compressed."""
    openers = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}
    if path.suffix in openers:
        with openers[path.suffix](path, "rb") as f:
            return f.read().decode("utf-8")
    if path.suffix in (".lz4", ".zst"):
        if not os.access(APT_HELPER, os.X_OK):
            raise DataError(f"cannot read {path}: {path.suffix} indexes need {APT_HELPER} (apt)")
        done = subprocess.run([APT_HELPER, "cat-file", str(path)], capture_output=True, check=False)
        if done.returncode:
            raise DataError(f"{APT_HELPER} cat-file {path} failed: {done.stderr.decode().strip()}")
        return done.stdout.decode("utf-8")
    return path.read_text(encoding="utf-8")


def parse_index(text: str, language: str) -> dict[str, Description]:
    """{Description-md5: Description} of one index; a description several packages share is kept
    under the first package name in alphabetical order."""
    found: dict[str, Description] = {}
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, list[str]] = {}
        key = None
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key].append(line[1:])
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = [value.strip()]
        body = fields.get(f"Description-{language}")
        if not body or "Description-md5" not in fields or "Package" not in fields:
            continue
        paragraphs: list[list[str]] = [[]]
        for line in body[1:]:
            if line.strip() == ".":
                paragraphs.append([])
            else:
                paragraphs[-1].append(line.rstrip())
        md5, package = fields["Description-md5"][0], fields["Package"][0]
        if md5 not in found or package < found[md5].package:
            found[md5] = Description(package, body[0], [p for p in paragraphs if p])
    return found


def blocks(lines: list[str]) -> list[tuple[str, str]]:
    """A paragraph as (kind, text) blocks: "prose", "item" (a bulleted line and the lines
    indented under it) or "verbatim" (a run of lines at one indentation of 1 or more)."""
    found: list[list] = []  # [kind, indentation, lines]
    for line in lines:
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        bullet = _BULLET.match(text)
        last = found[-1] if found else None
        if bullet:
            found.append(["item", indent, [text[bullet.end() :]]])
        elif indent == 0 and last and last[0] == "prose":
            last[2].append(text)
        elif indent == 0:
            found.append(["prose", 0, [text]])
        elif last and (
            (last[0] == "item" and indent > last[1])
            or (last[0] == "verbatim" and indent == last[1])
        ):
            last[2].append(text)
        else:
            found.append(["verbatim", indent, [text]])
    return [(kind, one_line(" ".join(texts))) for kind, _, texts in found]


def pair_prose(spa: str, eng: str, model: LengthModel, how: Counter) -> list[tuple[str, str]]:
    """Sentence pairs of one prose block (the module's rule)."""
    spa_sentences, eng_sentences = split_sentences(spa), split_sentences(eng)
    if len(spa_sentences) == len(eng_sentences):
        how["sentence pairs (same number of sentences)"] += len(eng_sentences)
        return list(zip(spa_sentences, eng_sentences, strict=True))
    if len(eng.split()) < SHORT_WORDS:
        how[f"whole prose blocks under {SHORT_WORDS} words (sentence counts differ)"] += 1
        return [(spa, eng)]
    pairs, alone = align_sentences(eng_sentences, spa_sentences, model)  # model: eng -> spa
    how["sentence groups aligned by length"] += len(pairs)
    how["sentences without a counterpart (dropped by the aligner)"] += alone
    return [(spa_group, eng_group) for eng_group, spa_group in pairs]


def pair_description(
    spa: Description, eng: Description, model: LengthModel, dropped: Counter, how: Counter
) -> list[tuple[str, str]]:
    """(Spanish, English) segments of one description pair (the module's rules)."""
    pairs = [(one_line(spa.title), one_line(eng.title))]
    how["titles"] += 1
    if len(spa.paragraphs) != len(eng.paragraphs):
        dropped["description body: paragraph counts differ (title kept)"] += 1
        return pairs
    for spa_lines, eng_lines in zip(spa.paragraphs, eng.paragraphs, strict=True):
        spa_blocks, eng_blocks = blocks(spa_lines), blocks(eng_lines)
        if [k for k, _ in spa_blocks] != [k for k, _ in eng_blocks]:
            dropped["paragraph: its prose, list items and verbatim blocks differ"] += 1
            continue
        for (kind, spa_text), (_, eng_text) in zip(spa_blocks, eng_blocks, strict=True):
            if kind == "prose":
                pairs += pair_prose(spa_text, eng_text, model, how)
            else:
                how[f"{kind} blocks"] += 1
                pairs.append((spa_text, eng_text))
    return pairs


def keep(spa: str, eng: str, model: LengthModel) -> str | None:
    """Why a segment pair is dropped, or None."""
    if spa == eng:
        return "identical on both sides (code, names, untranslated)"
    if not any(c.isalpha() for c in spa) or not any(c.isalpha() for c in eng):
        return "no letters"
    if model.cost(len(eng), len(spa)) > MISMATCH_COST:
        return "lengths more than 4 standard deviations apart"
    return None


def build_debian_corpus(
    out_dir: str | os.PathLike, lists_dir: str | os.PathLike | None = None
) -> dict:
    """Write OUT/{train,valid,test}.{spa,eng} and PROVENANCE.md; return a report."""
    out = check_out(out_dir, "Debian descriptions")
    where = Path(lists_dir or LISTS_DIR)
    files = {lang: find_indexes(lists_dir, lang) for lang in ("es", "en")}
    for lang, found in files.items():
        if not found:
            raise DataError(f"no Translation-{lang} index under {where}: {UPDATE}")
    spanish: dict[str, Description] = {}
    english: dict[str, Description] = {}
    for path in files["es"]:
        for md5, d in parse_index(read_index(path), "es").items():
            spanish.setdefault(md5, d)
    for path in files["en"]:
        for md5, d in parse_index(read_index(path), "en").items():
            english.setdefault(md5, d)
    matched = [(spanish[k], english[k]) for k in spanish if k in english]
    if not matched:
        raise DataError(
            f"none of the {len(spanish):,} Spanish descriptions under {where} has its English "
            f"original there: {UPDATE}"
        )
    model = fit_length_model(
        [
            (one_line(" ".join(e)), one_line(" ".join(s)))
            for s_desc, e_desc in matched
            if len(s_desc.paragraphs) == len(e_desc.paragraphs)
            for s, e in zip(s_desc.paragraphs, e_desc.paragraphs, strict=True)
        ]
    )
    dropped: Counter = Counter()
    how: Counter = Counter()
    if len(spanish) > len(matched):
        dropped["Spanish description without its English original in the en index"] = len(
            spanish
        ) - len(matched)
    pairs = []
    for spa_desc, eng_desc in matched:
        for spa, eng in pair_description(spa_desc, eng_desc, model, dropped, how):
            reason = keep(spa, eng, model)
            if reason:
                dropped[reason] += 1
            else:
                pairs.append(Pair(spa, eng, spa_desc.package))
    splits = assign(pairs, debian_split, dropped)
    report = {
        "pairs": {name: len(splits[name]) for name in SPLITS},
        "descriptions": {
            name: sum(debian_split(s.package) == name for s, _ in matched) for name in SPLITS
        },
        "spanish": len(spanish),
        "dropped": dropped,
        "how": how,
        "model": model,
        "files": [p for found in files.values() for p in found],
    }
    write_corpus(out, splits, _provenance(splits, report, where))
    return report


def debian_split(package: str) -> str:
    return split_of(package, VALID_PERCENT, TEST_PERCENT)


def _release(index: Path) -> str:
    """ "Debian 12.15 (bookworm, 2026-...)" from the InRelease file beside an index."""
    prefix = index.name.split("_i18n_")[0].rsplit("_", 1)[0]
    for name in (f"{prefix}_InRelease", f"{prefix}_Release"):
        try:
            head = (index.parent / name).read_text(encoding="utf-8", errors="replace")[:4000]
        except OSError:
            continue
        field = dict(re.findall(r"^(Origin|Version|Codename|Suite|Date): (.*)$", head, re.M))
        return (
            f"{field.get('Origin', '?')} {field.get('Version', '')} "
            f"({field.get('Codename', field.get('Suite', '?'))}, {field.get('Date', '?')})"
        )
    return packages.UNKNOWN


def _provenance(splits: dict, report: dict, where: Path) -> str:
    apt = packages.versions(["apt"]).get("apt", packages.UNKNOWN)
    model: LengthModel = report["model"]
    d = report["descriptions"]
    lines = [
        "# Debian package descriptions: Spanish -> English",
        "",
        "Built by `transformer data debian-descriptions` from apt's description indexes under "
        f"{where} (read with apt {apt}'s apt-helper where compressed with lz4 or zstd). The "
        "Spanish texts are human translations made in the Debian Description Translation "
        "Project (https://ddtp.debian.org) of the descriptions in the packages' debian/control "
        "files.",
        "",
        "Licence: no single licence covers the corpus. Each description is part of its "
        "package and distributed under that package's terms (see its copyright file); the "
        "translations are contributed to Debian through the DDTP. Check before redistributing.",
        "",
        "| index | release | bytes |",
        "|---|---|---:|",
        *(f"| {p.name} | {_release(p)} | {p.stat().st_size:,} |" for p in report["files"]),
        "",
        f"Pairs: {counts_line(splits, 'segment pairs')}.",
        f"Descriptions paired (Spanish with its English original by Description-md5): train "
        f"{d['train']:,}, valid {d['valid']:,}, test {d['test']:,}, of {report['spanish']:,} "
        "Spanish descriptions.",
        "",
        "## Splits",
        "",
        split_rule("packages, keyed by the package name", VALID_PERCENT, TEST_PERCENT),
        "",
        "## Segments",
        "",
        "Each description gives its title pair and, when both sides have as many paragraphs, "
        "its paragraphs: list items and verbatim blocks pair one to one, prose sentence by "
        f"sentence when the sentence counts agree, whole when under {SHORT_WORDS} English words, "
        "else by a length-based alignment (Gale & Church; Spanish/English length ratio "
        f"{model.ratio:.3f}, variance {model.variance:.2f} per character, fitted on the "
        "paragraph pairs). Segments made (before the filters and deduplication):",
        "",
        *(f"- {count:,}: {what}" for what, count in report["how"].most_common()),
        "",
        "Dropped:",
        "",
        *dropped_lines(report["dropped"]),
    ]
    return "\n".join(lines) + "\n"
