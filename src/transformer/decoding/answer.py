"""Extractive question answering: what Pipeline.answer and `transformer answer` do.

With a span head (BERT for SQuAD), each question is read with its context in windows
(data.squad.question_windows), the model gives each window's start and end logits, and
data.squad.Best keeps each question's best span over its windows (the rule is in data/squad.py).
With a sentence head, each question and each sentence of its context are embedded alone (a
context's sentences once for all its questions), and the answer is the best run of sentences
(data/sentences.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..data.batching import pad_rows
from ..data.sentences import context_rows, embedded, selected, sentence_bounds
from ..data.squad import Answer, Best, Window, question_windows
from ..data.tokenizer import EncoderTokens, Tokenizer
from ..model.transformer import EncoderOnly
from .search.step import inference

__all__ = ["Answer", "answer_questions", "answer_sentences", "answer_windows"]


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


def embed_rows(model: EncoderOnly, rows: list[list[int]], pad: int, batch_tokens: int):
    """The sentence embeddings (N, C) of [CLS] text [SEP] rows, read batch_tokens at a time."""
    device = next(model.parameters()).device
    with inference(model):
        return embedded(
            rows,
            pad,
            batch_tokens,
            lambda ids, mask: model.sentence_embeddings(ids.to(device), mask.to(device)),
        )


def answer_sentences(
    model: EncoderOnly,
    tokenizer: Tokenizer,
    tokens: EncoderTokens,
    questions: Sequence[str],
    contexts: Sequence[str],
    starts: Sequence[Sequence[int] | None],
    max_len: int,
    threshold: float = 0.5,
    batch_tokens: int = 8192,
) -> list[Answer]:
    """The best run of sentences of each question's context; starts: each context's sentence
    starts (character offsets), or None to cut it at sentence ends; rows of at most max_len
    tokens; threshold: the probability a sentence counts for the answer above. Each context's
    sentences are embedded once for all the questions asked of it."""
    bounds = [sentence_bounds(c, s) for c, s in zip(contexts, starts, strict=True)]
    items = context_rows(tokenizer, tokens, questions, bounds, contexts, max_len)
    sentences = embed_rows(model, [r for c in items for r in c.sentences], tokens.pad, batch_tokens)
    asked = embed_rows(model, [r for c in items for r in c.questions], tokens.pad, batch_tokens)
    answers: list[Answer | None] = [None] * len(questions)
    s = q = 0
    for item in items:
        width, n = len(item.sentences), len(item.questions)
        with inference(model):
            logits = model.sentence_head(asked[q : q + n], sentences[s : s + width])  # (n, width)
        for number, row in zip(item.numbers, logits.float().tolist(), strict=True):
            answers[number] = selected(contexts[number], bounds[number], row, threshold)
        s, q = s + width, q + n
    return answers


def answer(pipeline, questions, contexts, sentences=None, **decode):
    """What Pipeline.answer does: the answer span (an Answer) of each question in its context, one
    or a list, under the model's answer settings with `decode` overrides; sentences: a sentence-head
    model's sentence starts, one list of character offsets for every context or one each (default:
    cut at sentence ends)."""
    from .inputs import PipelineError

    model = pipeline.model
    if not isinstance(model, EncoderOnly) or not (model.span_head or model.config.sentence_head):
        raise PipelineError(
            "this model has no answer head: answer needs an encoder trained with objective = "
            '"qa" or "qa_sentences"'
        )
    if sentences is not None and not model.config.sentence_head:
        raise PipelineError(
            "sentences are for a sentence-head model (objective qa_sentences): this one answers "
            "with spans; leave sentences out"
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
    if model.config.sentence_head:
        if sentences is None or (sentences and isinstance(sentences[0], int)):
            sentences = [sentences] * len(contexts)
        if len(sentences) != len(contexts):
            raise PipelineError(
                f"{len(contexts)} contexts but {len(sentences)} lists of sentence starts: give "
                "one list for all or one each"
            )
        answers = answer_sentences(
            model,
            pipeline.source_tokenizer,
            tokens,
            questions,
            contexts,
            sentences,
            window,
            s.sentence_threshold,
        )
        return answers[0] if one else answers
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
