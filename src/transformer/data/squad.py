"""Extractive question answering data in SQuAD's JSON format (Rajpurkar et al. 2016), and the
windows an encoder reads: [CLS] question [SEP] context-window [SEP].

A file is {"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question",
"answers": [{"text", "answer_start"}]}]}]}]} (SQuAD 1.1; `transformer data commentary-qa` writes
it, with the additions `verse_starts` per paragraph and `verses` per question, which are kept).

Windows (BERT's way for SQuAD, Devlin et al. 2019, and Hugging Face's run_qa): the question is cut
to QUESTION_TOKENS tokens; a context longer than the window is read in windows of
`window - len(question) - 3` context tokens, each starting `stride` tokens after the one before,
so neighbouring windows overlap and every token is read with context on both sides in some
window. In training, a window's target is the answer's first and last token when the whole answer
lies inside it, else [CLS] (position 0: "not in this window").
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .text import DataError

QUESTION_TOKENS = 64
"""A question longer than this many tokens is cut to it."""


@dataclass(frozen=True)
class Question:
    """One question on a context, with its gold answers (text, character offset)."""

    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...] = ()
    verses: tuple[int, int] | None = None
    """commentary-qa: the first and last verse the gold answer covers."""
    verse_starts: tuple[int, ...] | None = None
    """commentary-qa: the character offset of each verse of the context (verse 1 first)."""


@dataclass
class Window:
    """One row the encoder reads, for question number `question`."""

    question: int
    ids: list[int]
    types: list[int]
    """Token types: 0 for [CLS] question [SEP], 1 for the context and the last [SEP]."""
    first: int
    """The row position of the window's first context token."""
    offsets: list[tuple[int, int]]
    """The character span in the context of each context token of the window."""
    start: int = 0
    end: int = 0
    """Training targets: the row positions of the answer's first and last token, or 0 ([CLS])."""


def read_squad(path: str | os.PathLike, need_answers: bool = True) -> list[Question]:
    """Every question of a SQuAD-format file, in order; a DataError naming the file and what is
    wrong (not JSON, no data list, a question without an answer, an answer not in its context)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} not found: give a SQuAD-format JSON file")
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path} is not UTF-8 JSON ({e}): give a SQuAD-format file") from None
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list):
        raise DataError(
            f'{path} has no "data" list: a SQuAD file is {{"data": [{{"paragraphs": [{{"context", '
            '"qas": [...]}]}]}'
        )
    questions = []
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(_list(article, "paragraphs", path, f"data[{a}]")):
            where = f"data[{a}].paragraphs[{p}]"
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            if not isinstance(context, str) or not context.strip():
                raise DataError(f"{path}: {where} has no context text")
            starts = paragraph.get("verse_starts")
            for q, qa in enumerate(_list(paragraph, "qas", path, where)):
                questions.append(_question(qa, context, starts, path, f"{where}.qas[{q}]"))
                if need_answers and not questions[-1].answers:
                    raise DataError(
                        f"{path}: {where}.qas[{q}] has no answer: training and scoring need "
                        "one (SQuAD 1.1)"
                    )
    if not questions:
        raise DataError(f"{path} holds no question")
    return questions


def _list(parent, key: str, path: Path, where: str) -> list:
    value = parent.get(key) if isinstance(parent, dict) else None
    if not isinstance(value, list):
        raise DataError(f'{path}: {where} has no "{key}" list')
    return value


def _question(qa, context: str, starts, path: Path, where: str) -> Question:
    if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
        raise DataError(f"{path}: {where} has no question text")
    answers = []
    for k, answer in enumerate(qa.get("answers") or []):
        text = answer.get("text") if isinstance(answer, dict) else None
        start = answer.get("answer_start") if isinstance(answer, dict) else None
        if not isinstance(text, str) or not isinstance(start, int):
            raise DataError(f"{path}: {where}.answers[{k}] needs text and answer_start")
        if context[start : start + len(text)] != text:
            raise DataError(
                f"{path}: {where}.answers[{k}] {text[:40]!r} is not at character {start} of its "
                "context"
            )
        answers.append((text, start))
    verses = qa.get("verses")
    return Question(
        str(qa.get("id", where)),
        qa["question"],
        context,
        tuple(answers),
        tuple(verses) if isinstance(verses, list) and len(verses) == 2 else None,
        tuple(starts) if isinstance(starts, list) else None,
    )


def token_span(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """The first and last token (indices into offsets) covering characters [start, end), or
    None when no token does."""
    first = next((i for i, (_, b) in enumerate(offsets) if b > start), None)
    last = next((i for i in range(len(offsets) - 1, -1, -1) if offsets[i][0] < end), None)
    if first is None or last is None or last < first:
        return None
    return first, last


def make_windows(
    number: int,
    question_ids: list[int],
    context_ids: list[int],
    offsets: list[tuple[int, int]],
    cls: int,
    sep: int,
    window: int,
    stride: int,
    answer: tuple[int, int] | None = None,
) -> list[Window]:
    """The rows of one question (see the module doc); answer: the gold answer's character span
    [start, end), for the training targets."""
    question_ids = question_ids[:QUESTION_TOKENS]
    room = window - len(question_ids) - 3
    if room < 1:
        raise DataError(
            f"a window of {window} tokens leaves no room for the context after a question of "
            f"{len(question_ids)} tokens: raise decode.answer_window"
        )
    gold = token_span(offsets, *answer) if answer else None
    rows = []
    head = [cls, *question_ids, sep]
    begin = 0
    while True:
        end = min(begin + room, len(context_ids))
        ids = head + context_ids[begin:end] + [sep]
        row = Window(
            number, ids, [0] * len(head) + [1] * (end - begin + 1), len(head), offsets[begin:end]
        )
        if gold and begin <= gold[0] and gold[1] < end:
            row.start, row.end = gold[0] - begin + len(head), gold[1] - begin + len(head)
        rows.append(row)
        if end >= len(context_ids):
            return rows
        begin += min(stride, room)
