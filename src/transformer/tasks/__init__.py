"""The tasks a user trains and runs, each in one module, listed in one table (TASKS).

Config checks, `prepare_objective`, `evaluate`, sweeps, `Pipeline` and the server ask this table
instead of dispatching on objectives or model families by hand. Adding a task is one module (a
`Task` record: see base.py) and one line here. The order is the order `model_task` tries them in:
the special families before the plain ones they are built on.

- image_generation.py: Image GPT (decoder over pixel tokens)
- detection.py: DETR
- captioning.py: a ViT under a text decoder
- speech.py: Whisper-style speech recognition
- contrastive.py: CLIP-style dual encoders
- qa.py: extractive question answering (span head)
- classification.py: labels for texts and for images
- masked_lm.py: BERT's masked-LM
- translation.py: translation, text-to-text, T5's span corruption
- lm.py: language models

Beside them: base.py (the Task record), evaluation.py (one `transformer evaluate` run as a typed
record, read by the evaluate function each `Scored` row holds) and reports.py (what those
functions share).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..config import OBJECTIVES, ConfigError, ModelConfig, RunConfig
from . import (
    captioning,
    classification,
    contrastive,
    detection,
    image_generation,
    lm,
    masked_lm,
    qa,
    speech,
    translation,
)
from .base import Scored, Task

TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        image_generation.TASK,
        detection.TASK,
        captioning.TASK,
        speech.TASK,
        contrastive.TASK,
        qa.TASK,
        classification.IMAGES,
        classification.TEXTS,
        masked_lm.TASK,
        translation.TASK,
        lm.TASK,
    )
}

__all__ = ["TASKS", "Scored", "Task", "model_task", "prepare_objective", "run_task"]


def run_task(config: RunConfig) -> Task:
    """The task a training run trains: train.task's, else the one of its objective (and its data,
    where two tasks share one)."""
    if config.train.task is not None:
        task = TASKS.get(config.train.task)
        if task is None:
            raise ConfigError(
                f"train.task={config.train.task!r} is not a task of transformer.tasks.TASKS: give "
                f"one of {', '.join(TASKS)}, or leave it unset"
            )
        if config.objective not in task.objectives:
            raise ConfigError(
                f"train.task={task.name!r} trains with objective "
                f"{' or '.join(map(repr, task.objectives))}, not {config.objective!r}: set "
                "train.objective to one of them"
            )
        return task
    for task in TASKS.values():
        if config.objective in task.objectives and task.trains(config):
            return task
    raise ConfigError(
        f"train.objective={config.objective!r} is not an objective this trainer knows"
    )


def model_task(model: ModelConfig, pixels: bool = False, trained_for: str | None = None) -> Task:
    """The task a model runs: the one that trained it (trained_for: its directory's task.json),
    else the first in TASKS whose `runs` holds (pixels: the model directory has pixels.json, an
    image generator's token layout)."""
    if trained_for is not None:
        if trained_for not in TASKS:
            raise ConfigError(
                f"the model was trained for task {trained_for!r} (its task.json), which is not in "
                f"transformer.tasks.TASKS ({', '.join(TASKS)}): add the task's module to the table"
            )
        return TASKS[trained_for]
    for task in TASKS.values():
        if task.runs(model, pixels):
            return task
    raise ConfigError(f"no task runs a model of arch {model.arch!r}")  # every arch has one


def prepare_objective(
    config: RunConfig,
    run_dir: Path,
    dist,
    say: Callable[[str], None],
    resume: bool = False,
):
    """The run's objective (training.objectives) with its data prepared (tokenizers trained or
    loaded, corpora built), made by the task the run trains."""
    if config.train.init_from and not resume:
        _check_init_from(config)
    return run_task(config).prepare(config, run_dir, dist, say, resume)


def _check_init_from(config: RunConfig) -> None:
    """init_from must be a model of the family the objective trains."""
    from ..model_dir import load_config

    cfg = load_config(config.train.init_from)
    needs = OBJECTIVES[config.objective].arch
    if cfg.arch != needs:
        raise ConfigError(
            f"train.init_from={config.train.init_from} is an arch={cfg.arch!r} model: "
            f"objective {config.objective!r} needs arch={needs!r}"
        )
