"""The parallel corpus of `transformer data bible`: aligned verse pairs of two texts, split by
chapter, written as line-aligned files with a provenance note.

`add_targets=("kjv",)` also trains on a second translation of the same verses: its pairs are
appended to the training split only, each source prefixed by a tag (`<kjv> `), so that untagged
input still asks for the main target's wording and tagged input for the other's.
"""

from __future__ import annotations

import os
from pathlib import Path

from ....files import atomic_write_text
from .align import Alignment, Chapter, align, split_of
from .sword import MODULES, BibleError, Verse, read_module


def check_pair(src: str, tgt: str, out_dir: str | os.PathLike, what: str) -> None:
    """Refuse unknown or equal text codes, and an --out that is a file."""
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


def build_bible_corpus(
    src: str,
    tgt: str,
    out_dir: str | os.PathLike,
    sword_dir: str | os.PathLike | None = None,
    add_targets: tuple[str, ...] = (),
) -> dict:
    """Write out_dir/{train,valid,test}.{src,tgt} (+ .ids with verse references) and PROVENANCE.md.

    add_targets: more target texts for the training chapters only; their pairs follow the main
    ones in train.{src,tgt}, each source line prefixed by target_tag(code) and a space, their
    references in train.ids as `code:Book.chapter.verse`. valid and test hold `tgt` alone.
    """
    check_pair(src, tgt, out_dir, "corpus")
    for code in add_targets:
        if code not in MODULES:
            raise BibleError(
                f"unknown text code {code!r} in --add-target: choose from {', '.join(MODULES)}"
            )
        if code in (src, tgt):
            raise BibleError(
                f"--add-target {code} is already the {'source' if code == src else 'target'}: "
                f"give a third text"
            )
    if len(set(add_targets)) != len(add_targets):
        raise BibleError(
            f"--add-target names a text twice ({', '.join(add_targets)}): give each once"
        )
    src_verses, src_version = read_module(src, sword_dir)
    tgt_verses, tgt_version = read_module(tgt, sword_dir)
    alignment = align(src_verses, tgt_verses)
    splits: dict[str, list[Verse]] = {"train": [], "valid": [], "test": []}
    for key in alignment.pairs:
        splits[split_of(key[:2])].append(key)
    lines = {
        name: (
            [alignment.pairs[k][0] for k in keys],
            [alignment.pairs[k][1] for k in keys],
            [f"{b}.{c}.{v}" for b, c, v in keys],
        )
        for name, keys in splits.items()
    }
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

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, (sources, targets, ids) in lines.items():
        atomic_write_text(out / f"{name}.{src}", "".join(line + "\n" for line in sources))
        atomic_write_text(out / f"{name}.{tgt}", "".join(line + "\n" for line in targets))
        atomic_write_text(out / f"{name}.ids", "".join(line + "\n" for line in ids))
    report = {
        "src": src,
        "tgt": tgt,
        "pairs": {name: len(keys) for name, keys in splits.items()},
        "dropped_chapters": {
            f"{b} {c}": why for (b, c), why in sorted(alignment.dropped_chapters.items())
        },
        "dropped_verses": len(alignment.dropped_verses),
        "misaligned_verses": len(alignment.misaligned_verses),
        "only_in_one": alignment.only_in_one,
        "versions": versions,
        "added": added,
    }
    atomic_write_text(out / "PROVENANCE.md", _provenance(report, alignment))
    return report


def _provenance(report: dict, alignment: Alignment) -> str:
    src, tgt = MODULES[report["src"]], MODULES[report["tgt"]]
    lines = [
        f"# Bible parallel corpus: {src.title} ({src.language}) -> {tgt.title} ({tgt.language})",
        "",
        "Built by `transformer data bible` from the SWORD modules packaged by Debian, read with "
        "pysword.",
        "",
        "| code | text | SWORD module | version | Debian package | licence |",
        "|---|---|---|---|---|---|",
    ]
    for module in (src, tgt, *(MODULES[code] for code in report["added"])):
        lines.append(
            f"| {module.code} | {module.title} | {module.name} | {report['versions'][module.code]} "
            f"| {module.package} | Public Domain |"
        )
    counts = report["pairs"]
    lines += [
        "",
        f"Verse pairs: train {counts['train']:,}, valid {counts['valid']:,}, test "
        f"{counts['test']:,} "
        f"(total {sum(counts.values()):,}). Splits hold whole chapters, chosen by a hash of the "
        "chapter name.",
        "",
    ]
    for code, extra in report["added"].items():
        lines += [
            f"Added target {code} ({MODULES[code].title}): {extra['pairs']:,} more training pairs "
            "(the training "
            f"chapters' verses that line up with {src.code}; {extra['dropped_chapters']} chapters "
            "dropped for "
            f"misalignment), after the {counts['train']:,} above in train.{src.code} / "
            f"train.{tgt.code}, each "
            f"source prefixed by `{target_tag(code)} `; their references in train.ids read "
            f"`{code}:Book.chapter.verse`. "
            f"valid and test hold {tgt.code} alone. Translate with the prefix to ask for the "
            f"{MODULES[code].title}'s wording.",
            "",
        ]
    lines += [
        "OSIS markup is stripped: footnotes, cross references, variant readings, headings and "
        "speaker labels",
        "are dropped; psalm titles are kept as text (the Reina-Valera has them in verse 1 too).",
        "",
        f"Verses with text on one side only (dropped): {report['dropped_verses']}; verses whose "
        "book or chapter "
        f"only one module has: {report['only_in_one']}.",
        "",
        "Chapters dropped because their verse numbering does not line up: "
        f"{len(report['dropped_chapters'])}",
        "",
    ]
    lines += [f"- {chapter}: {why}" for chapter, why in report["dropped_chapters"].items()]
    by_chapter: dict[Chapter, list[int]] = {}
    for book, chapter, verse in alignment.misaligned_verses:
        by_chapter.setdefault((book, chapter), []).append(verse)
    lines += [
        "",
        f"Verses dropped because they do not translate each other although their numbers match: "
        f"{report['misaligned_verses']} in {len(by_chapter)} chapters (a length-based alignment "
        "of each chapter's "
        "verses: a numbering that shifts mid-chapter, or a clause one text has and the other "
        "lacks).",
        "",
    ]
    lines += [
        f"- {book} {chapter}: {_ranges(verses)}"
        for (book, chapter), verses in sorted(by_chapter.items())
    ]
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
