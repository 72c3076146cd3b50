"""The table of tasks (TASKS), in the order `model_task` tries them, and the questions every
caller asks of it: which task a run trains, which task a model runs, the run's objective made."""

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
from .base import Task

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
