"""`transformer answer`: extractive question answering with a span-head encoder (objective qa);
the parser beside the handler."""

from __future__ import annotations

import argparse
import json

from ..config import ANSWER_SETTINGS
from .common import (
    UserError,
    add_decode_args,
    add_device_args,
    add_precision_arg,
    decode_overrides,
    load_pipeline,
    read_text,
)


def cmd_answer(args: argparse.Namespace) -> None:
    """The span of the context that answers each question: one line per question (--json: the
    text, its character offsets and score)."""
    questions = list(args.question or [])
    if args.questions:
        questions += [q for q in read_text(args.questions, "--questions") if q.strip()]
    if not questions:
        raise UserError("give a question: --question TEXT (repeatable) or --questions FILE")
    context = "\n".join(read_text(args.context, "--context")).strip()
    if not context:
        raise UserError(f"--context {args.context} is empty: give the text to answer from")
    pipeline = load_pipeline(args, "answer")
    answers = pipeline.answer(questions, context, **decode_overrides(args, ANSWER_SETTINGS))
    for question, answer in zip(questions, answers, strict=True):
        if args.json:
            record = {"question": question, "answer": answer.text, "start": answer.start}
            record |= {"end": answer.end, "score": round(answer.score, 4)}
            print(json.dumps(record, ensure_ascii=False))
        else:
            print(answer.text)


def register(sub: argparse._SubParsersAction) -> None:
    """`answer`."""
    p = sub.add_parser(
        "answer",
        help="answer questions with a span of a text (a model trained with objective qa)",
    )
    p.add_argument("model_dir")
    p.add_argument("--question", action="append", help="a question (repeatable)")
    p.add_argument("--questions", help="a file of questions, one per line")
    p.add_argument(
        "--context", required=True, help="the text to answer from (a file; - for standard input)"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print a JSON object per question: answer, start and end (character offsets in the "
        "context), score",
    )
    add_decode_args(p, ANSWER_SETTINGS)
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_answer)
