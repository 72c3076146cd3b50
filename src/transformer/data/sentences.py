"""Answer-sentence selection over SQuAD-format data: the answer is a run of whole sentences.

Each context is cut into sentences: the verses a file gives (`verse_starts`, as `transformer data
commentary-qa` writes), else at each sentence end (., ! or ?, any closing quotes or brackets, then
white space). An encoder with a sentence head reads each (question, sentence) pair as [CLS]
question [SEP] sentence [SEP] (token types 0, then 1) and gives one logit: is this sentence part
of the answer. In training, a sentence's target is 1 when more than half of its characters lie in
the gold answer.

A question's answer is the run of consecutive sentences whose logits sum highest (the maximum
subarray, Kadane's rule): a sentence whose log-odds are negative still joins the run when the
sentences on both sides outweigh it, so answers stay contiguous as gold answers are; when every
logit is negative, the single most likely sentence. Its text runs from the run's first character
to its last sentence's end, so the verse-level and word-level scores of extractive QA apply
unchanged (evaluation.scoring.score_squad).

For answers that are whole passages (a commentary heading's 7 verses) this reads every sentence
once per question with its question, where a span head reads 512-token windows and learns only
from the windows that hold the whole answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .squad import QUESTION_TOKENS, Answer
from .text import DataError
from .tokenizer import EncoderTokens, Tokenizer

SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*\s+")
"""Where a sentence ends: the space after ., ! or ? (and any closing quotes or brackets)."""


def sentence_bounds(context: str, starts: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """The characters [start, end) of each sentence of context, white space trimmed: from starts
    (each sentence's first character, ascending; a file's verse_starts) when given, else cut at
    SENTENCE_END. Sentences of white space alone are left out."""
    if starts:
        if list(starts) != sorted(set(starts)) or starts[0] < 0 or starts[-1] >= len(context):
            raise DataError(
                "sentence starts must be ascending character offsets inside the context"
            )
        cuts = list(starts)
    else:
        cuts = [0] + [m.end() for m in SENTENCE_END.finditer(context) if m.end() < len(context)]
    bounds = []
    for a, b in zip(cuts, [*cuts[1:], len(context)], strict=True):
        while a < b and context[a].isspace():
            a += 1
        while b > a and context[b - 1].isspace():
            b -= 1
        if a < b:
            bounds.append((a, b))
    return bounds


@dataclass
class SentenceRow:
    """One (question, sentence) pair the encoder reads."""

    question: int
    sentence: int
    """The sentence's number in its context's sentence_bounds."""
    ids: list[int]
    types: list[int]
    label: float = 0.0
    """Training target: 1.0 when more than half of the sentence lies in the gold answer."""


def sentence_rows(
    tokenizer: Tokenizer,
    tokens: EncoderTokens,
    questions: Sequence[str],
    bounds: Sequence[list[tuple[int, int]]],
    contexts: Sequence[str],
    max_len: int,
    answers: Sequence[tuple[int, int]] | None = None,
) -> list[SentenceRow]:
    """The rows of each question (its sentences in order); bounds: each question's sentence
    bounds in its context; a sentence is cut to the max_len tokens a row may hold; answers: each
    question's gold character span [start, end), for the targets."""
    encoded: dict[str, list[int]] = {}
    rows = []
    for n, (question, sentences, context) in enumerate(
        zip(questions, bounds, contexts, strict=True)
    ):
        head = [tokens.cls, *tokenizer.encode(question)[:QUESTION_TOKENS], tokens.sep]
        room = max_len - len(head) - 1
        if room < 1:
            raise DataError(
                f"rows of {max_len} tokens leave no room for a sentence after a question of "
                f"{len(head) - 2} tokens: raise data.max_len"
            )
        for k, (a, b) in enumerate(sentences):
            text = context[a:b]
            if text not in encoded:
                encoded[text] = tokenizer.encode(text)
            body = encoded[text][:room] + [tokens.sep]
            row = SentenceRow(n, k, head + body, [0] * len(head) + [1] * len(body))
            if answers is not None:
                start, end = answers[n]
                inside = max(0, min(b, end) - max(a, start))
                row.label = float(2 * inside > b - a)
            rows.append(row)
    return rows


def best_run(logits: Sequence[float]) -> tuple[int, int, float]:
    """(first, last, sum) of the consecutive logits with the highest sum (the first such run on a
    tie); when every logit is negative, the single highest."""
    if not logits:
        raise ValueError("best_run needs at least one logit")
    best = (0, 0, logits[0])
    begin, total = 0, 0.0
    for k, value in enumerate(logits):
        if total <= 0:
            begin, total = k, 0.0
        total += value
        if total > best[2]:
            best = (begin, k, total)
    return best


def selected(context: str, bounds: list[tuple[int, int]], logits: Sequence[float]) -> Answer:
    """The answer of one question: its sentences' logits (in order) -> the best run's text."""
    if not bounds:
        return Answer("", 0, 0, float("-inf"))
    first, last, score = best_run(logits)
    start, end = bounds[first][0], bounds[last][1]
    return Answer(context[start:end], start, end, score)
