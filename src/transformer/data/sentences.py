"""Answer-sentence selection over SQuAD-format data: the answer is a run of whole sentences.

Each context is cut into sentences: the verses a file gives (`verse_starts`, as `transformer data
commentary-qa` writes), else at each sentence end (., ! or ?, any closing quotes or brackets, then
white space). An encoder with a sentence head (model.heads.SentenceHead) embeds each sentence and
each question alone, [CLS] text [SEP], and gives each (question, sentence) pair a logit: is this
sentence part of the answer. The sentences of a context are read once for all its questions
(ContextRows). In training, a sentence's target is 1 when more than half of its characters lie in
the gold answer.

A question's answer is the run of consecutive sentences whose log-odds above a threshold
(decode.sentence_threshold, a probability: 0.5 by default) sum highest (the maximum subarray,
Kadane's rule): a sentence below the threshold still joins the run when the sentences on both
sides outweigh it, so answers stay contiguous as gold answers are; when every sentence is below
it, the single most likely sentence. A lower threshold gives longer answers. The answer's text
runs from the run's first character to its last sentence's end, so the verse-level and word-level
scores of extractive QA apply unchanged (evaluation.scoring.score_squad).

For answers that are whole passages (a commentary heading's 7 verses) this reads each sentence
once, where a span head reads 512-token windows and learns only from the windows that hold the
whole answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .batching import batch_indices, pad_rows
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
class ContextRows:
    """One context's sentences and the questions asked of it, as the encoder reads them."""

    sentences: list[list[int]]
    """[CLS] sentence [SEP] ids of each sentence, in order."""
    questions: list[list[int]]
    """[CLS] question [SEP] ids of each question."""
    numbers: list[int]
    """Each question's number in the list it came from."""
    labels: list[list[float]] | None = None
    """Training targets, (question, sentence): 1.0 when more than half of the sentence lies in the
    question's gold answer."""

    @property
    def tokens(self) -> int:
        return sum(map(len, self.sentences)) + sum(map(len, self.questions))


def inside(bounds: list[tuple[int, int]], answer: tuple[int, int]) -> list[float]:
    """1.0 for each sentence (its characters [a, b)) more than half inside answer [start, end)."""
    start, end = answer
    return [float(2 * max(0, min(b, end) - max(a, start)) > b - a) for a, b in bounds]


def context_rows(
    tokenizer: Tokenizer,
    tokens: EncoderTokens,
    questions: Sequence[str],
    bounds: Sequence[list[tuple[int, int]]],
    contexts: Sequence[str],
    max_len: int,
    answers: Sequence[tuple[int, int]] | None = None,
) -> list[ContextRows]:
    """The questions grouped by context (the same text cut the same way), in order of first
    appearance; bounds: each question's sentence bounds in its context; rows are cut to max_len
    tokens; answers: each question's gold character span [start, end), for the targets."""
    if max_len < 3:
        raise DataError(f"rows of {max_len} tokens hold no text: raise data.max_len")

    def row(text: str, limit: int) -> list[int]:
        return [tokens.cls, *tokenizer.encode(text)[: min(limit, max_len - 2)], tokens.sep]

    groups: dict[tuple[str, tuple], ContextRows] = {}
    for n, (question, cuts, context) in enumerate(zip(questions, bounds, contexts, strict=True)):
        key = (context, tuple(cuts))
        if key not in groups:
            groups[key] = ContextRows([row(context[a:b], max_len) for a, b in cuts], [], [])
            if answers is not None:
                groups[key].labels = []
        group = groups[key]
        group.questions.append(row(question, QUESTION_TOKENS))
        group.numbers.append(n)
        if answers is not None:
            group.labels.append(inside(cuts, answers[n]))
    return list(groups.values())


def embedded(
    rows: list[list[int]],
    pad: int,
    batch_tokens: int,
    embed: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """embed(ids (B, L), mask (B, L)) -> (B, C), applied to rows padded in batches of similar
    length (batch_tokens padded tokens at most): the (N, C) embeddings in the rows' order."""
    out: list[torch.Tensor | None] = [None] * len(rows)
    for indices in batch_indices([len(r) for r in rows], batch_tokens, 0, 0, shuffle=False):
        ids, mask = pad_rows([rows[i] for i in indices], pad)
        for i, vector in zip(indices, embed(ids, mask), strict=True):
            out[i] = vector
    return torch.stack(out) if out else torch.zeros(0, 0)


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


def selected(
    context: str, bounds: list[tuple[int, int]], logits: Sequence[float], threshold: float = 0.5
) -> Answer:
    """The answer of one question: its sentences' logits (in order) -> the text of the best run of
    log-odds above threshold's."""
    if not bounds:
        return Answer("", 0, 0, float("-inf"))
    bias = math.log(threshold / (1 - threshold))
    first, last, score = best_run([z - bias for z in logits])
    start, end = bounds[first][0], bounds[last][1]
    return Answer(context[start:end], start, end, score)
