"""`transformer data dialogue`: Spanish -> English spoken dialogue from translated games, the
everyday register the other corpora lack (questions, small talk, requests: "¿Dónde las
encontraste?" -> "Where did you find them?").

Rules:
- Sources, each read from the files its Debian packages put under ROOT (an installed system, or
  a folder sources.debs unpacked them into): *Beneath a Steel Sky* (bass.py: beneath-a-steel-sky
  with scummvm's executable for its text tree), *Cataclysm: Dark Days Ahead* (cataclysm.py:
  cataclysm-dda-data's es_ES and es_AR catalogs, filtered to dialogue and sentences about
  everyday things) and *Drascula* (drascula.py: scummvm-data's drascula.dat). A source whose
  package is missing is skipped and named in the report with its install line; none of them is
  a DataError.
- Casing, both sides: a line written wholly in capitals (Drascula's) is put in sentence case,
  and the all-caps emphasis words inside a mixed-case line are lowercased when the games write
  the same word in lower case somewhere (casing.py: "FIND" is, "STANAG" is not), so the model
  learns the text as users type it.
- Length: a pair with more than MAX_WORDS words on either side is dropped (a game's long
  narration or a book inside it is not dialogue).
- Splits: whole groups (a BASS block of 32 consecutive lines, a Drascula scene, a CDDA message
  with its variants) by sha256 of the group key (splits.split_of) with each game's own
  percentages (PERCENTS): a few hundred test lines from each game, not thousands of CDDA's. The
  valid and test splits hold the es_ES Spanish only: es_AR's translation of a held-out message
  is dropped (one Spanish line per English one, and the model sees neither in training).
- splits.assign then deduplicates and keeps valid and test English out of train.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ...text import DataError
from .. import packages
from ..splits import (
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
from . import bass, cataclysm, drascula
from .casing import lowercase_words, sentence_case, soften_caps

MAX_WORDS = 40
PERCENTS = {"bass": (5.0, 10.0), "cataclysm": (2.0, 3.0), "drascula": (10.0, 10.0)}
"""(valid, test) percent of each source's groups."""


@dataclass(frozen=True)
class Game:
    """One source: its reader(root, dropped) -> pairs, the Debian packages it reads, its title,
    and whether its pairs are for training only."""

    read: Callable[[Path, Counter], list[Pair]]
    packages: tuple[str, ...]
    title: str
    train_only: bool = False


SOURCES = {
    "bass": Game(bass.bass_pairs, ("beneath-a-steel-sky", "scummvm"), "Beneath a Steel Sky"),
    "cataclysm": Game(
        partial(cataclysm.cataclysm_pairs, variants=("es_ES",)),
        ("cataclysm-dda-data",),
        "Cataclysm: DDA (es_ES)",
    ),
    "cataclysm-es_AR": Game(
        partial(cataclysm.cataclysm_pairs, variants=("es_AR",)),
        ("cataclysm-dda-data",),
        "Cataclysm: DDA (es_AR)",
        train_only=True,
    ),
    "drascula": Game(drascula.drascula_pairs, ("scummvm-data",), "Drascula"),
}
"""The games read, by name (a pair's group starts with its reader's prefix: bass/, cataclysm/,
drascula/; both Cataclysm variants share their messages' groups)."""
INSTALL = (
    "apt-get install beneath-a-steel-sky scummvm cataclysm-dda-data scummvm-data (or apt-get "
    "download them and dpkg-deb -x each into DIR, then --root DIR)"
)


def dialogue_split(group: str) -> str:
    """train / valid / test of a group key "SOURCE/...": the source's own percentages."""
    valid, test = PERCENTS[group.split("/", 1)[0]]
    return split_of(group, valid, test)


def recase(text: str, vocabulary: set[str] | None = None) -> str:
    """Sentence case for a wholly upper-case line, emphasis lowercased in a mixed one (only
    words the vocabulary holds in lower case, when one is given)."""
    letters = [c for c in text if c.isalpha()]
    if letters and all(c.isupper() for c in letters) and len(letters) > 1:
        return sentence_case(text)
    return soften_caps(text, vocabulary)


def build_dialogue_corpus(out_dir: str | os.PathLike, root: str | os.PathLike = "/") -> dict:
    """Write OUT/{train,valid,test}.{spa,eng} and PROVENANCE.md (the rules above); return the
    report: pairs per split, pairs per source, what was dropped and what was skipped."""
    out = check_out(out_dir, "dialogue pairs")
    root = Path(root)
    dropped: Counter = Counter()
    pairs: list[Pair] = []
    read: dict[str, int] = {}
    source_of: dict[tuple[str, str], str] = {}
    skipped: dict[str, str] = {}
    found: dict[str, list[Pair]] = {}
    for name, game in SOURCES.items():
        try:
            found[name] = game.read(root, dropped)
        except DataError as e:
            skipped[name] = str(e)
    spanish = lowercase_words(p.spa for pairs_ in found.values() for p in pairs_)
    english = lowercase_words(p.eng for pairs_ in found.values() for p in pairs_)
    for name, game_pairs in found.items():
        game, kept = SOURCES[name], 0
        for pair in game_pairs:
            spa = one_line(recase(pair.spa, spanish))
            eng = one_line(recase(pair.eng, english))
            if max(len(spa.split()), len(eng.split())) > MAX_WORDS:
                dropped[f"more than {MAX_WORDS} words"] += 1
            elif not spa or not eng:
                dropped["empty after cleaning"] += 1
            elif game.train_only and dialogue_split(pair.group) != "train":
                dropped[f"{game.title}: a valid or test message (its other variant is kept)"] += 1
            else:
                pairs.append(Pair(spa, eng, pair.group))
                source_of[spa, eng] = name
                kept += 1
        read[name] = kept
    if not read:
        raise DataError(f"none of the games' data is under {root}: {INSTALL}")
    if skipped and set(skipped) >= {"cataclysm"}:
        skipped.pop("cataclysm-es_AR", None)  # one package, said once
    splits = assign(pairs, dialogue_split, dropped)
    per_source = {
        name: {split: sum(source_of[pair] == name for pair in splits[split]) for split in SPLITS}
        for name in read
    }
    report = {
        "pairs": {name: len(splits[name]) for name in SPLITS},
        "sources": per_source,
        "dropped": dropped,
        "skipped": skipped,
        "install": INSTALL if skipped else "",
    }
    write_corpus(out, splits, _provenance(report, splits, root))
    return report


def _provenance(report: dict, splits: dict, root: Path) -> str:
    wanted = [p for name in report["sources"] for p in SOURCES[name].packages]
    version = packages.versions(wanted, root)
    rows = []
    for name, counts in report["sources"].items():
        names, title = SOURCES[name].packages, SOURCES[name].title
        valid, test = PERCENTS[name.split("-")[0]]
        rows.append(
            f"| {title} | {', '.join(f'{p} {version.get(p, packages.UNKNOWN)}' for p in names)} "
            f"| {packages.licence(names[0], root / 'usr/share/doc')} | {valid:g} / {test:g} | "
            f"{counts['train']:,} | {counts['valid']:,} | {counts['test']:,} |"
        )
    skipped = [f"- {name}: {why}" for name, why in report["skipped"].items()]
    return (
        "\n".join(
            [
                "# Everyday dialogue: Spanish -> English (translated games)",
                "",
                "Built by `transformer data dialogue` from the text of translated games that "
                "Debian ships: each line of the game's Spanish text with the same line of its "
                "English. The translations are human ones (the games' translators).",
                "",
                f"Pairs: {counts_line(splits, 'pairs')}.",
                "",
                "| game | packages | licence (the first package's copyright file) | valid / test % "
                "of groups | train | valid | test |",
                "|---|---|---|---|---:|---:|---:|",
                *rows,
                "",
                "## Splits",
                "",
                split_rule(
                    "a Beneath a Steel Sky block of 32 consecutive lines, a Drascula scene, a "
                    "Cataclysm message with its two Spanish variants",
                    0,
                    0,
                ).replace("under 0 is valid, under 0 test", "the table's percentages per game"),
                "Valid and test hold the es_ES Spanish only (the es_AR translation of a held-out "
                "message is dropped).",
                "",
                "## Cleaning",
                "",
                "- both sides: a wholly upper-case line in sentence case; all-caps emphasis words "
                "in a mixed-case line lowercased where the games also write them in lower case; "
                "whitespace runs one space",
                f"- dropped: more than {MAX_WORDS} words on a side, and what each game's reader "
                "drops (below)",
                "",
                "Dropped:",
                "",
                *dropped_lines(report["dropped"]),
                *(["", "Not read:", "", *skipped] if skipped else []),
            ]
        )
        + "\n"
    )
