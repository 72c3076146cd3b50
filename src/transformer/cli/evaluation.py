"""`transformer evaluate`: BLEU and chrF, perplexity, a classifier's scores or a text-to-text
model's scores per task. The handler is `evaluate`; its parser is derived from its signature
(cli.args, the flags in evaluate_flags). It makes one typed record of the evaluation
(tasks.evaluation.Evaluation), finds the model's task in the table of tasks, and runs the
evaluate function that task's row holds for the input given (`Scored.run`); a confusion matrix
that function returns is drawn to --plot here (viz/ stands above tasks/)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from ..config import (
    ANSWER_SETTINGS,
    EVALUATE_SEARCH,
    IMAGE_SAMPLING_SETTINGS,
    SPEECH_SEARCH,
    DecodeConfig,
)
from . import evaluate_flags as F
from .args import Settings, command
from .common import ModelRun, UserError

if TYPE_CHECKING:  # the table is imported when evaluate runs, not when it is parsed
    from ..tasks import Task
    from ..tasks.evaluation import Evaluation


def cmd_evaluate(e: Evaluation) -> None:
    """Score a model on what it is evaluated by: the table of tasks names each task's inputs
    (transformer.tasks: --src/--ref, --pairs, --text, --tsv, --images, --squad, --audio,
    --detection) and the function that scores each; the input given must be one of the model's
    task's."""
    from ..tasks import TASKS
    from ..tasks.reports import open_model

    inputs = {s.flag: s for task in TASKS.values() for s in task.evaluate}
    given = [flag for flag in inputs if getattr(e, flag[2:])]
    for flag, needs in COMPANIONS.items():
        if getattr(e, flag[2:].replace("-", "_")) and not set(needs) & set(given):
            raise UserError(f"{flag} {COMPANION_WHAT[flag]}: it goes with {' or '.join(needs)}")
    if not given or given == ["--src"] and not e.ref:
        names = [f"{f} and --ref" if f == "--src" else f for f in inputs]
        listed = [f"{n} ({s.short})" for n, s in zip(names, inputs.values(), strict=True)]
        raise UserError(f"give {', '.join(listed[:-1])} or {listed[-1]}")
    task = _model_task(e.model_dir, given[0])
    own = {s.flag: s for s in task.evaluate}
    if len(given) > 1:
        first = given[0]
        what = (own.get(first) or inputs[first]).what
        raise UserError(f"give {first} ({what}) alone, without {', '.join(given[1:])}")
    flag = given[0]
    if flag not in own:
        open_model(e)  # a broken model directory is said first
        needs = " or ".join(
            t.described for t in TASKS.values() if flag in {s.flag for s in t.evaluate}
        )
        use = " or ".join(f"{s.flag} ({s.short})" for s in task.evaluate) or "nothing: train it on"
        raise UserError(
            f"{inputs[flag].short} ({flag}) needs {needs}; this is {task.described}: use {use}"
        )
    figure = own[flag].run(e)
    if figure is not None:
        from ..viz.confusion import plot_confusion

        plot_confusion(figure.scores, e.plot, title=figure.title)
        print(f"wrote {e.plot}")


COMPANIONS = {
    "--per-query": ("--detection",),
    "--classifier": ("--images",),
    "--plot": ("--tsv", "--images"),
    "--ref": ("--src",),
}
"""Flags that only go with some inputs."""
COMPANION_WHAT = {
    "--per-query": "ranks a detector's predictions",
    "--classifier": "names an image generator's samples",
    "--plot": "draws a classifier's confusion matrix",
    "--ref": "holds the references of --src",
}


def _model_task(model_dir: str, flag: str) -> Task:
    """The task of the model in model_dir (transformer.tasks); when it cannot be read, the first
    task scored by `flag` (its own loading then says what is wrong with the directory)."""
    from ..model.io import ModelFileError
    from ..model_dir import load_config
    from ..model_records import PIXELS_FILE, load_task
    from ..tasks import TASKS, model_task

    try:
        config, trained_for = load_config(model_dir), load_task(model_dir)
    except (ModelFileError, OSError, ValueError):
        return next(t for t in TASKS.values() if flag in {s.flag for s in t.evaluate})
    return model_task(config, (Path(model_dir) / PIXELS_FILE).is_file(), trained_for)


GROUPS = ("search", "speech", "answers", "sampling")
"""evaluate's parameters that take decoding settings."""
SPEECH_NOTE = "with --audio; default from the model's decode.json"
SAMPLES_NOTE = "with --classifier: the samples'; default from the model's decode.json"


def evaluate(
    run: ModelRun,
    src: F.SRC = None,
    ref: F.REF = None,
    text: F.TEXT = None,
    documents: F.DOCUMENTS = "file",
    window: F.WINDOW = None,
    stride: F.STRIDE = None,
    per_line: F.PER_LINE = False,
    tsv: F.TSV = None,
    pairs: F.PAIRS = None,
    chat: F.CHAT = None,
    squad: F.SQUAD = None,
    audio: F.AUDIO = None,
    detection: F.DETECTION = None,
    per_query: F.PER_QUERY = False,
    metric: F.METRIC = "bleu",
    images: F.IMAGES_IN = None,
    plot: F.PLOT = None,
    classifier: F.CLASSIFIER = None,
    samples: F.SAMPLES = 50,
    limit: F.LIMIT = None,
    seed: F.SEED = None,
    sampling: Annotated[
        dict, Settings(DecodeConfig, IMAGE_SAMPLING_SETTINGS, note=SAMPLES_NOTE, group=F.GENERATOR)
    ] = None,
    output: F.OUTPUT = None,
    search: Annotated[dict, Settings(DecodeConfig, EVALUATE_SEARCH)] = None,
    speech: Annotated[dict, Settings(DecodeConfig, SPEECH_SEARCH, note=SPEECH_NOTE)] = None,
    answers: Annotated[dict, Settings(DecodeConfig, ANSWER_SETTINGS)] = None,
) -> None:
    """Score a model on what it is evaluated by (cmd_evaluate): BLEU and chrF (--src, --ref),
    perplexity (--text), or the scores of the model's task on its input. The decoding settings
    (search, speech, answers, sampling) are those given, by name; the others keep the model's."""
    flags = {k: v for k, v in locals().items() if k not in ("run", *GROUPS)}
    from ..decoding.pipeline import Pipeline, open_pipeline  # after `flags`: locals() are them
    from ..tasks.evaluation import Evaluation, Models

    decode = {
        name: value
        for group in (search, speech, answers, sampling)
        for name, value in (group or {}).items()
        if value is not None
    }
    models = Models(open_pipeline, Pipeline.load)
    return cmd_evaluate(
        Evaluation(**dataclasses.asdict(run), models=models, **flags, decode=decode)
    )


def register(sub: argparse._SubParsersAction) -> None:
    """`evaluate`, its parser derived from `evaluate`'s signature."""
    command(
        sub,
        "evaluate",
        evaluate,
        help="BLEU and chrF (--src, --ref) or perplexity (--text) of a model directory",
    )
