"""`transformer data phrases`: read the skills (skills.py: the rules), split, and write the
corpus with its report (report.py)."""

from __future__ import annotations

import os

from ...text import DataError
from ..splits import assign, check_out, write_corpus
from .report import provenance, skills_tsv, summary
from .skills import (
    ENGLISH,
    INSTALL,
    LETTER,
    SPANISH,
    Reading,
    find_skills,
    phrases_split,
    read_skill,
)


def build_phrases_corpus(
    out_dir: str | os.PathLike, skill_dirs: list[str | os.PathLike] | None = None
) -> dict:
    """Write OUT/{train,valid,test}.{spa,eng}, english-only.eng, skills.tsv and PROVENANCE.md;
    return the report (pairs per split and the counts of the module's rules)."""
    out = check_out(out_dir, "phrases")
    skills = find_skills(skill_dirs)
    reading = Reading()
    for skill in skills:
        read_skill(skill, reading)
    if not reading.pairs:
        raise DataError(
            f"the {len(skills)} skills found hold no {SPANISH} file that pairs with its "
            f"{ENGLISH} one: {INSTALL}"
        )
    candidates = []
    for pair, auto in reading.pairs:
        if auto and phrases_split(pair.group) != "train":
            reading.dropped["machine-translated Spanish in a valid or test skill"] += 1
        else:
            candidates.append(pair)
    splits = assign(candidates, phrases_split, reading.dropped)
    paired_english = {eng for pairs in splits.values() for _, eng in pairs}
    english_only: list[str] = []
    seen: set[str] = set()
    for text in reading.english_only:
        if text and LETTER.search(text) and "|" not in text and text not in seen:
            seen.add(text)
            if text not in paired_english:
                english_only.append(text)
    report = summary(skills, reading, splits, english_only)
    write_corpus(
        out,
        splits,
        provenance(skills, report),
        {
            "english-only.eng": "".join(line + "\n" for line in english_only),
            "skills.tsv": skills_tsv(skills),
        },
    )
    return report
