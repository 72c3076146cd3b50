"""The table of tasks: every objective is trained by a task, every task has each part, and the
table's two questions (which task a run trains, which task a model runs) agree on every preset in
configs/, so a task missing a part, or one the table orders wrongly, fails here."""

from __future__ import annotations

import argparse
import inspect
from dataclasses import replace
from pathlib import Path

import pytest

from transformer.config import OBJECTIVES, load_config
from transformer.decoding.pipeline import Pipeline
from transformer.tasks import TASKS, Task, model_task, run_task
from transformer.tasks.base import wrong_task

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.toml"))
FAMILIES = {"encoder-decoder", "decoder", "encoder", "speech", "detection", "captioning",
            "image-generation"}


def test_every_objective_is_trained_by_a_task_and_every_task_trains_a_known_objective():
    trained = {o for task in TASKS.values() for o in task.objectives}
    assert trained == set(OBJECTIVES)


def test_the_settings_an_objective_reads_are_the_gated_ones():
    from transformer.config.objectives import GATED

    assert {name for o in OBJECTIVES.values() for name in o.reads} == set(GATED)


@pytest.mark.parametrize("task", TASKS.values(), ids=list(TASKS))
def test_every_task_has_each_part(task: Task):
    assert task.name and task.summary and task.described.split()[0] in ("a", "an")
    assert task.family in FAMILIES
    assert callable(task.runs) and callable(task.prepare) and callable(task.trains)
    assert list(inspect.signature(task.prepare).parameters) == [
        "config", "run_dir", "dist", "say", "resume"]
    assert (task.score is not None) == (task.test_files > 0)
    assert all(r.startswith("/v1/") or r in ("/translate", "/languages") for r in task.paths)
    assert wrong_task(task, "nothing").startswith(f"this is {task.described}: ")


def test_every_route_of_a_task_is_served_and_every_evaluate_flag_exists():
    pytest.importorskip("fastapi")
    from transformer.cli import build_parser
    from transformer.serve.routes import ROUTES

    routes = {r for task in TASKS.values() for r in task.paths}
    assert routes <= set(ROUTES), routes - set(ROUTES)
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = sub.choices["evaluate"]._option_string_actions
    for task in TASKS.values():
        assert all(s.flag in flags for s in task.evaluate), (task.name, task.evaluate)
        # a command runs it: a CLI command, or (an image generator) a Pipeline method
        assert task.command is None or task.command in sub.choices or callable(
            getattr(Pipeline, task.command, None)
        ), task.command


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_each_preset_loads_and_the_task_it_trains_is_the_task_its_model_runs(path):
    config = load_config(str(path))
    task = run_task(config)
    assert config.objective in task.objectives
    if config.train.init_from is None:  # the model's config is the preset's own
        model = config.model  # with what training adds: a classifier's classes, a span head
        if config.objective == "classify":
            model = replace(model, n_classes=2)
        if config.objective == "qa":
            model = replace(model, span_head=True)
        assert model_task(model, pixels=config.objective == "image_lm") is task


def test_two_tasks_of_one_objective_split_its_runs_by_their_data(tmp_path):
    images = [t for t in TASKS.values() if "classify" in t.objectives]
    assert len(images) == 2
    for path in CONFIGS:
        config = load_config(str(path))
        if config.objective == "classify":
            assert sum(t.trains(config) for t in images) == 1


def test_evaluate_has_a_function_for_every_input_of_every_task():
    for task in TASKS.values():
        for scored in task.evaluate:
            assert callable(scored.run), (task.name, scored.flag)
            assert list(inspect.signature(scored.run).parameters) == ["e"], (task.name, scored.flag)
