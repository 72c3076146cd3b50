"""Extractive question answering: an encoder picks each answer in its context, with a span head
(BERT on SQuAD: the answer's start and end token) or a sentence head (answer-sentence selection:
which sentences answer, for answers made of whole sentences); run by `answer`, scored by exact
match and F1 (`evaluate --squad`)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Scored, Task


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.arch == "encoder" and (model.span_head or model.sentence_head)


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import SentenceQA, SpanQA

    if config.objective == "qa_sentences":
        return SentenceQA(config, run_dir, dist, say, resume)
    return SpanQA(config, run_dir, dist, say, resume)


def infer(pipeline, questions, contexts, **settings):
    """`pipeline(questions, contexts)`: the answer of each question in its context
    (Pipeline.answer)."""
    return pipeline.answer(questions, contexts, **settings)


TASK = Task(
    name="question-answering",
    summary="extractive question answering: the answer's span in a context",
    described="a question-answering model",
    objectives=("qa", "qa_sentences"),
    family="encoder",
    runs=runs,
    prepare=prepare,
    infer=infer,
    command="answer",
    evaluate=(
        Scored("--squad", "question answering", "a question-answering model's exact match and F1"),
    ),
)
