"""Extractive question answering: an encoder picks each answer in its context, with a span head
(BERT on SQuAD: the answer's start and end token) or a sentence head (answer-sentence selection:
which sentences answer, for answers made of whole sentences); run by `answer`, scored by exact
match and F1 (`evaluate --squad`)."""

from __future__ import annotations

from pathlib import Path

from ..config import ANSWER_SETTINGS, ModelConfig, RunConfig
from .base import Scored, Task
from .evaluation import Evaluation, EvaluationError
from .reports import open_model


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


def evaluate_squad(e: Evaluation) -> None:
    """Exact match and F1 (SQuAD's) of a question-answering model's answers to --squad, and
    verse-level F1 where the file gives verses; --output writes the answers."""
    from ..data.lines import write_text
    from ..data.text import DataError
    from ..evaluation.scoring import score_squad
    from ..files import check_output
    from ..model.transformer import EncoderOnly

    if not Path(e.squad).is_file():
        raise EvaluationError(f"--squad {e.squad} not found: give a SQuAD-format JSON file")
    if e.output:
        check_output(e.output)
    pipeline = open_model(e)
    model = pipeline.model
    if not isinstance(model, EncoderOnly) or not (model.span_head or model.config.sentence_head):
        raise EvaluationError(
            "--squad is for question answering: this model has no span or sentence head "
            '(objective = "qa" or "qa_sentences")'
        )
    try:
        scores, answers = score_squad(pipeline, e.squad, **e.settings(ANSWER_SETTINGS))
    except DataError as error:
        raise EvaluationError(str(error)) from None
    if e.output:
        write_text(e.output, [" ".join(a.text.split()) for a in answers])
    verses = f"  verse F1 {scores['verse_f1']:.2f}" if "verse_f1" in scores else ""
    print(
        f"exact match {scores['exact_match']:.2f}  F1 {scores['f1']:.2f}{verses}  "
        f"({scores['questions']:,} questions of {e.squad})"
    )


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
        Scored(
            "--squad",
            "question answering",
            "a question-answering model's exact match and F1",
            run=evaluate_squad,
        ),
    ),
)
