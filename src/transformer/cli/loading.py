"""What the commands over a model directory share, below them: the image files a command was
given, and each family's check that the model directory is one of it (a captioner, a detector, a
speech model, a dual encoder) with the one-line error naming the command to use instead. Each
takes a ModelRun (a command's typed arguments) or the parsed flags (evaluate's parts)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from .common import (
    ModelRun,
    UserError,
    load_pipeline,
)

if TYPE_CHECKING:  # the table is imported when a command runs, not when it is parsed
    from ..tasks import Task


def image_files(paths: list[str], flag: str = "--input") -> list[str]:
    """Image files named, and those inside named folders (recursively, sorted); errors name them
    after `flag` (empty: positional arguments)."""
    from ..data.images import IMAGE_SUFFIXES

    files = []
    for name in paths:
        path, named = Path(name), f"{flag} {name}".strip()
        if path.is_dir():
            found = sorted(str(f) for f in path.rglob("*") if f.suffix.lower() in IMAGE_SUFFIXES)
            if not found:
                raise UserError(f"{named} has no image file ({'/'.join(IMAGE_SUFFIXES)})")
            files += found
        elif path.is_file():
            files.append(name)
        else:
            raise UserError(f"{named} not found: give image files or folders of them")
    return files


def is_captioner_dir(path: str) -> bool:
    """Whether a model directory's config.json is an image captioner's (arch encoder-decoder with
    [model.vision]); False for anything unreadable (its own command then says what is wrong)."""
    file = Path(path) / "config.json"  # model.io.CONFIG_FILE
    try:
        values = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(values, dict)
        and values.get("arch") == "encoder-decoder"
        and values.get("vision") is not None
    )


def task_pipeline(args: argparse.Namespace | ModelRun, command: str, task: Task):
    """The model directory as a Pipeline, which must run `task` (a record of transformer.tasks):
    else one line naming what it is and the command that runs it."""
    from ..tasks.base import wrong_task

    pipeline = load_pipeline(args, command)
    if pipeline.task is not task:
        raise UserError(
            f"{args.model_dir} is not {task.described}; " + wrong_task(pipeline.task, command)
        )
    return pipeline


def captioner(args: argparse.Namespace | ModelRun, command: str):
    """An image captioner's Pipeline."""
    from ..tasks import captioning

    return task_pipeline(args, command, captioning.TASK)


def detector(args: argparse.Namespace | ModelRun, command: str):
    """A detector's Pipeline."""
    from ..tasks import detection

    return task_pipeline(args, command, detection.TASK)


def speech_pipeline(args: argparse.Namespace | ModelRun, command: str):
    """A speech model's Pipeline."""
    from ..tasks import speech

    return task_pipeline(args, command, speech.TASK)


def is_contrastive(model_dir: str) -> bool:
    """Whether a model directory's config.json describes a dual encoder (False when unreadable:
    the other commands then say what is wrong with it)."""
    from ..model.io import ModelFileError
    from ..model_dir import load_config

    try:
        return load_config(model_dir).contrastive is not None
    except ModelFileError:
        return False


def dual_encoder(args: argparse.Namespace | ModelRun, command: str):
    """A text-image dual encoder's Pipeline."""
    from ..tasks import contrastive

    return task_pipeline(args, command, contrastive.TASK)
