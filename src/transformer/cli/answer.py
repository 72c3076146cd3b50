"""`transformer answer`: extractive question answering with a span-head encoder (objective qa).
The handler is `answer`; its parser is derived from its signature (cli.args), the decoding
settings' flags from DecodeConfig (ANSWER_SETTINGS)."""

from __future__ import annotations

import argparse
import json
from typing import Annotated

from ..config import ANSWER_SETTINGS, DecodeConfig
from ..data.lines import read_text
from .args import Arg, Settings, command
from .common import ModelRun, UserError, load_pipeline


def answer(
    run: ModelRun,
    context: Annotated[str, Arg("the text to answer from (a file; - for standard input)")],
    question: Annotated[list[str] | None, Arg("a question (repeatable)")] = None,
    questions: Annotated[str | None, Arg("a file of questions, one per line")] = None,
    as_json: Annotated[
        bool,
        Arg(
            "print a JSON object per question: answer, start and end (character offsets in the "
            "context), score",
            flag="--json",
        ),
    ] = False,
    decode: Annotated[dict, Settings(DecodeConfig, ANSWER_SETTINGS)] = None,
) -> None:
    """The span of the context that answers each question: one line per question (--json: the
    text, its character offsets and score)."""
    asked = list(question or [])
    if questions:
        asked += [q for q in read_text(questions, "--questions") if q.strip()]
    if not asked:
        raise UserError("give a question: --question TEXT (repeatable) or --questions FILE")
    text = "\n".join(read_text(context, "--context")).strip()
    if not text:
        raise UserError(f"--context {context} is empty: give the text to answer from")
    pipeline = load_pipeline(run, "answer")
    answers = pipeline.answer(asked, text, **(decode or {}))
    for q, a in zip(asked, answers, strict=True):
        if as_json:
            record = {"question": q, "answer": a.text, "start": a.start}
            record |= {"end": a.end, "score": round(a.score, 4)}
            print(json.dumps(record, ensure_ascii=False))
        else:
            print(a.text)


def register(sub: argparse._SubParsersAction) -> None:
    """`answer`."""
    command(
        sub,
        "answer",
        answer,
        help="answer questions with a span of a text (a model trained with objective qa)",
    )
