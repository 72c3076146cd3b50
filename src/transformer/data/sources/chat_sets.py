"""Chat conversations from the task datasets the other builders write, for chat fine-tuning
(objective chat; data/chat.py reads them): one JSONL line {"messages": [...]} per example, a user
turn that asks and an assistant turn that answers, split by split as the source dataset splits.

What each kind of dataset becomes (found from the files in the source directory):
- text-to-text pairs, {split}.tsv of input<TAB>target (wiki-summaries, commentary-headings):
  user "{instruction}\n\n{input}", assistant the target;
- aligned translation files, {split}.spa + {split}.eng (bible, ui-strings, manuals, phrases, ...):
  user "{instruction} {source}" ("Translate to English: ..."), assistant the translation;
- SQuAD JSON, {split}.json (commentary-qa): user "{instruction}\n\n{context}\n\nQuestion:
  {question}", assistant the first gold answer.
An optional system turn comes first. The splits stay the source's: a test split stays unseen.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...files import atomic_write_text
from ..squad import read_squad
from ..text import DataError
from .splits import SPLITS, check_out

KINDS = ("pairs", "translation", "qa")
LANGUAGES = {"eng": "English", "spa": "Spanish"}
INSTRUCTIONS = {
    "pairs": "Summarize this text in one sentence.",
    "translation": "Translate to {target}:",
    "qa": "Answer the question with the passage of the text that answers it.",
}
"""Each kind's default instruction ({target}: the target language's name)."""


def find_kind(source: Path) -> str:
    """Which kind of dataset `source` holds, from its files (module doc)."""
    for kind, pattern in (("pairs", "{}.tsv"), ("translation", "{}.spa"), ("qa", "{}.json")):
        if any((source / pattern.format(split)).is_file() for split in SPLITS):
            return kind
    raise DataError(
        f"{source} holds no dataset to turn into conversations: expected train.tsv "
        "(input<TAB>target), train.spa + train.eng (translation) or train.json (SQuAD), as "
        "transformer data wiki-summaries, bible, ui-strings or commentary-qa write"
    )


def examples(source: Path, kind: str, split: str, reverse: bool) -> list[tuple[str, str]] | None:
    """(input, answer) pairs of one split (None when the split is absent); for QA the input is
    (context, question) joined by the caller's rule."""
    if kind == "pairs":
        file = source / f"{split}.tsv"
        if not file.is_file():
            return None
        rows = []
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if line:
                if "\t" not in line:
                    raise DataError(f"{file} line {number}: expected input<TAB>target")
                rows.append(tuple(line.split("\t", 1)))
        return rows
    if kind == "translation":
        src, tgt = source / f"{split}.spa", source / f"{split}.eng"
        if not src.is_file() or not tgt.is_file():
            return None
        a = src.read_text(encoding="utf-8").splitlines()
        b = tgt.read_text(encoding="utf-8").splitlines()
        if len(a) != len(b):
            raise DataError(f"{src} has {len(a)} lines, {tgt} {len(b)}: they must be aligned")
        return list(zip(b, a, strict=True)) if reverse else list(zip(a, b, strict=True))
    file = source / f"{split}.json"
    if not file.is_file():
        return None
    return [
        (f"{q.context}\n\nQuestion: {q.question}", q.answers[0][0])
        for q in read_squad(file)
        if q.answers
    ]


def build_chat_corpus(
    out_dir: str | os.PathLike,
    source_dir: str | os.PathLike,
    instruction: str | None = None,
    system: str | None = None,
    reverse: bool = False,
) -> dict:
    """Write OUT/{split}.jsonl for each split of the dataset in source_dir, and PROVENANCE.md;
    return the kind and the counts. reverse: translation from English to Spanish."""
    out, source = check_out(out_dir, "conversations"), Path(source_dir)
    if not source.is_dir():
        raise DataError(f"--source {source} is not a directory: give a dataset's directory")
    kind = find_kind(source)
    target = "Spanish" if reverse else "English"
    ask = (instruction or INSTRUCTIONS[kind]).replace("{target}", target)
    joiner = " " if kind == "translation" else "\n\n"
    counts = {}
    out.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        rows = examples(source, kind, split, reverse)
        if rows is None:
            continue
        lines = []
        for question, answer in rows:
            messages = [{"role": "system", "content": system}] if system else []
            messages += [
                {"role": "user", "content": f"{ask}{joiner}{question}"},
                {"role": "assistant", "content": answer},
            ]
            lines.append(json.dumps({"messages": messages}, ensure_ascii=False) + "\n")
        atomic_write_text(out / f"{split}.jsonl", "".join(lines))
        counts[split] = len(lines)
    atomic_write_text(
        out / "PROVENANCE.md",
        f"# Conversations for chat fine-tuning\n\nFrom `{source}` ({kind}), one JSONL line "
        f'{{"messages": [...]}} per example: the user asks "{ask}" followed by the input, the '
        f"assistant answers with the target{'; a system turn first: ' + system if system else ''}"
        f". Splits as the source's: {', '.join(f'{s} {n:,}' for s, n in counts.items())}.\n",
    )
    return {"kind": kind, "conversations": counts, "instruction": ask}
