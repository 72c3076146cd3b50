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

Answers (Best): in each window the candidate spans are pairs of the N_BEST highest start logits
and the N_BEST highest end logits over the window's context tokens, with start <= end < start +
max_answer_tokens; a span scores start logit + end logit, and a question's answer is its best
span over all its windows (as Hugging Face's question-answering pipeline and the BERT reference
code choose), the characters of the context from its first token's start to its last token's
end. decoding.answer runs a model over the windows; the qa objective's validation reads the same
spans off its loss's logits.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .text import DataError
from .tokenizer import EncoderTokens, Tokenizer

N_BEST = 20
"""Start and end candidates per window (the BERT reference code's n_best_size)."""

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


# --------------------------------------------------------------------------------------------
# Answers: the best span of each question over its windows


@dataclass(frozen=True)
class Answer:
    """The best span of a context: its text, its characters [start, end) and its score."""

    text: str
    start: int
    end: int
    score: float


def question_windows(
    tokenizer: Tokenizer,
    tokens: EncoderTokens,
    pairs: Sequence[tuple[str, str]],
    window: int,
    stride: int,
    answers: Sequence[tuple[int, int] | None] | None = None,
) -> list[Window]:
    """The windows of each (question, context) pair, in order; each context is tokenised once.
    answers: each pair's gold character span, for training targets."""
    contexts: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
    rows = []
    for n, (question, context) in enumerate(pairs):
        if context not in contexts:
            contexts[context] = tokenizer.encode_offsets(context)
        ids, offsets = contexts[context]
        rows += make_windows(
            n,
            tokenizer.encode(question),
            ids,
            offsets,
            tokens.cls,
            tokens.sep,
            window,
            stride,
            answers[n] if answers else None,
        )
    return rows


def best_span(
    start: torch.Tensor, end: torch.Tensor, first: int, n: int, max_tokens: int
) -> tuple[float, int, int] | None:
    """The best (score, first token, last token) of one window: start and end are its logits (L,),
    the context tokens are positions first .. first + n - 1; token numbers count from the first
    context token."""
    if n <= 0:
        return None
    start, end = start[first : first + n].float(), end[first : first + n].float()
    k = min(N_BEST, n)
    starts, ends = start.topk(k).indices.tolist(), end.topk(k).indices.tolist()
    start, end = start.tolist(), end.tolist()  # Python floats: no tensor op per candidate pair
    best = None
    for s in starts:
        for e in ends:
            if s <= e < s + max_tokens:
                score = start[s] + end[e]
                if best is None or score > best[0]:
                    best = (score, s, e)
    return best


class Best:
    """The best span of each question so far, over the windows seen (see the module doc)."""

    def __init__(self, contexts: Sequence[str], max_answer_tokens: int):
        self.contexts = contexts
        self.max_tokens = max_answer_tokens
        self.best: list[tuple[float, int, int] | None] = [None] * len(contexts)

    def see(self, row: Window, start: torch.Tensor, end: torch.Tensor) -> None:
        """One window's start and end logits (L,)."""
        span = best_span(start, end, row.first, len(row.offsets), self.max_tokens)
        if span is not None:
            score, s, e = span
            known = self.best[row.question]
            if known is None or score > known[0]:
                self.best[row.question] = (score, row.offsets[s][0], row.offsets[e][1])

    def answers(self) -> list[Answer]:
        out = []
        for context, found in zip(self.contexts, self.best, strict=True):
            if found is None:
                out.append(Answer("", 0, 0, float("-inf")))
                continue
            score, a, b = found
            while a < b and context[a].isspace():  # byte-level BPE spans start at the space before
                a += 1
            out.append(Answer(context[a:b], a, b, score))
        return out
