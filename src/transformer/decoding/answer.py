"""Extractive question answering with an encoder's span head (BERT for SQuAD): what
Pipeline.answer, `transformer answer` and the qa objective's validation do.

Each question is read with its context in windows (data.squad.make_windows). In each window the
candidate spans are pairs of the n_best highest start logits and the n_best highest end logits
over the window's context tokens, with start <= end < start + max_answer_tokens; a span scores
start logit + end logit, and the question's answer is the best span over all its windows (as
Hugging Face's question-answering pipeline and the BERT reference code choose), returned as the
characters of the context from its first token's start to its last token's end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..data.batching import pad_rows
from ..data.squad import Window, make_windows
from ..data.tokenizer import EncoderTokens, Tokenizer
from ..model.transformer import EncoderOnly
from .step import inference

N_BEST = 20
"""Start and end candidates per window (the BERT reference code's n_best_size)."""


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
    best = None
    for s in starts:
        for e in ends:
            if s <= e < s + max_tokens:
                score = float(start[s] + end[e])
                if best is None or score > best[0]:
                    best = (score, s, e)
    return best


def answer_windows(
    model: EncoderOnly,
    tokens: EncoderTokens,
    rows: list[Window],
    contexts: Sequence[str],
    max_answer_tokens: int,
    batch_tokens: int = 8192,
) -> list[Answer]:
    """The best answer of each question over its windows (rows, from question_windows); contexts:
    each question's context. A question whose windows hold no valid span gets an empty answer
    scored -inf."""
    device = next(model.parameters()).device
    typed = bool(model.config.n_token_types)
    best = Best(contexts, max_answer_tokens)
    per_batch = max(1, batch_tokens // max(len(r.ids) for r in rows)) if rows else 1
    for begin in range(0, len(rows), per_batch):
        batch = rows[begin : begin + per_batch]
        ids, mask = pad_rows([r.ids for r in batch], tokens.pad)
        types = pad_rows([r.types for r in batch], 0)[0].to(device) if typed else None
        with inference(model):
            start, end = model.spans(ids.to(device), mask.to(device), types)
        for j, row in enumerate(batch):
            best.see(row, start[j], end[j])
    return best.answers()


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


def answer_questions(
    model: EncoderOnly,
    tokenizer: Tokenizer,
    tokens: EncoderTokens,
    pairs: Sequence[tuple[str, str]],
    window: int,
    stride: int,
    max_answer_tokens: int,
) -> list[Answer]:
    """The best span of each (question, context) pair's context."""
    rows = question_windows(tokenizer, tokens, pairs, window, stride)
    return answer_windows(model, tokens, rows, [c for _, c in pairs], max_answer_tokens)
