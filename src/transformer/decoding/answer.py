"""Extractive question answering with an encoder's span head (BERT for SQuAD): what
Pipeline.answer and `transformer answer` do. Each question is read with its context in windows
(data.squad.question_windows), the model gives each window's start and end logits, and
data.squad.Best keeps each question's best span over its windows (the rule is in data/squad.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..data.batching import pad_rows
from ..data.squad import Answer, Best, Window, question_windows
from ..data.tokenizer import EncoderTokens, Tokenizer
from ..model.transformer import EncoderOnly
from .step import inference

__all__ = ["Answer", "answer_questions", "answer_windows"]


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


def answer(pipeline, questions, contexts, **decode):
    """What Pipeline.answer does: the answer span (an Answer) of each question in its context, one
    or a list, under the model's answer settings with `decode` overrides."""
    from .inputs import PipelineError

    model = pipeline.model
    if not isinstance(model, EncoderOnly) or model.span_head is None:
        raise PipelineError(
            'this model has no span head: answer needs an encoder trained with objective = "qa"'
        )
    one = isinstance(questions, str)
    questions = [questions] if one else list(questions)
    contexts = [contexts] * len(questions) if isinstance(contexts, str) else list(contexts)
    if len(contexts) != len(questions):
        raise PipelineError(
            f"{len(questions)} questions but {len(contexts)} contexts: give one context for "
            "all or one each"
        )
    s = pipeline.settings(**decode)
    window = s.answer_window
    if model.config.positional in ("sinusoidal", "learned"):
        window = min(window, model.config.max_positions)
    tokens = EncoderTokens(pipeline.source_tokenizer, pipeline.special_tokens)
    answers = answer_questions(
        model,
        pipeline.source_tokenizer,
        tokens,
        list(zip(questions, contexts, strict=True)),
        window,
        s.answer_stride,
        s.max_answer_tokens,
    )
    return answers[0] if one else answers
