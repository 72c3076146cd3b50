"""What a task is: the record each `tasks/` module fills in once, and the facts every caller asks
of it (which runs it trains, which model directories it runs, how it is evaluated and served).

The rules:
- A task is what a user trains and runs. Its *training* side is one or more `train.objective`
  values (their model family and training data are config/'s facts: `OBJECTIVES`, a record
  each); `trains(config)` picks it among tasks that share an objective (a classifier
  of texts or of images).
- Its *running* side is a model directory: `runs(model)` says whether a loaded model is this
  task's, judged from the model's config and the files beside it (`pixels` for an image
  generator). TASKS is ordered so that the first task whose `runs` holds is the model's: the
  special cases (image generation, detection, captioning, speech, dual encoders, span heads) come
  before the plain families they are built on.
- `infer` is its inference entry (`pipeline(inputs)` runs it), `command` the CLI command that runs
  it (the name a user's error message gives), `routes` the server's endpoints (none: the server
  only describes it), `evaluate` the `transformer evaluate` inputs that score it, each with the
  function that scores and prints (`run(evaluation)`: evaluation.py).
- `tokenizers` says whether its model directories hold text tokenizers (Pipeline loads them);
  `inputs` is the trainer's words for what its models read, `cost` the lines `transformer info`
  prints of their FLOPs (inputs.py), `attention` the figure `transformer attention` draws of them
  (figures.py).
- `prepare` makes the training objective with its data; `score` is what a sweep reports of a
  finished run (validation and test splits), both imported lazily so that reading the table costs
  nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import OBJECTIVES, ModelConfig, RunConfig
from .evaluation import Confusion, Evaluation
from .figures import Figure
from .inputs import per_token, tokens

Prepare = Callable[[RunConfig, Path, Any, Callable[[str], None], bool], Any]
"""(config, run_dir, dist, say, resume) -> the run's Objective, its data prepared."""
Score = Callable[[Any, RunConfig, Any, str], dict[str, float]]
"""(pipeline, config, path or (src, ref), split) -> a sweep row's scores of one split."""
Evaluate = Callable[[Evaluation], Confusion | None]
"""(evaluation) -> None, or the confusion matrix its --plot asks to draw; the scores printed."""


@dataclass(frozen=True)
class Scored:
    """An input `transformer evaluate` scores a task's models on: its flag, a short name of what
    it gives (in the list of inputs), what it gives (when it is given with another) and the
    function that scores a model on it and prints the scores."""

    flag: str
    short: str
    what: str
    run: Evaluate


@dataclass(frozen=True)
class Route:
    """A server endpoint of a task: its path, and for an endpoint the task answers itself, the
    answer: (pipeline, the request's JSON object) -> the JSON reply, run on the server's worker
    thread (a ValueError is the client's mistake: 422 with its message). The server mounts every
    route with an answer as POST at its path. The built-in tasks' endpoints are written out in
    serve/ (their schemas, batching and streaming), so their routes hold the path only."""

    path: str
    answer: Callable[[Any, dict], Any] | None = None


@dataclass(frozen=True)
class Task:
    """One task: what trains it, what runs it, how it is evaluated and served."""

    name: str
    """The table's key (e.g. "translation")."""
    summary: str
    """One line for a user: what the task does."""
    described: str
    """What a user's error message calls its models: "this is {described}: use ..."."""
    objectives: tuple[str, ...]
    """The train.objective values that train it (config's OBJECTIVES)."""
    family: str
    """What the server and /v1/model call its models (e.g. "encoder-decoder", "speech")."""
    runs: Callable[[ModelConfig, bool], bool]
    """Whether a loaded model (its config, and whether it came with pixels.json) is this task's."""
    prepare: Prepare
    command: str | None = None
    """The CLI command and Pipeline method that runs it (None: none)."""
    infer: Callable[..., Any] | None = None
    """Its inference entry, what `pipeline(inputs, **settings)` runs: (pipeline, inputs,
    **settings) -> outputs (None: the task has none; its model is fine-tuned for another)."""
    routes: tuple[Route, ...] = ()
    """The server's endpoints that serve it, its own first (none: /v1/model only)."""
    evaluate: tuple[Scored, ...] = ()
    """What `transformer evaluate` reads to score it: its input flags, each with what it gives."""
    score: Score | None = None
    """What a sweep reports of a finished run on a split; None: the validation loss only."""
    batch_size: int = 0
    """Inputs its inference call runs together when decode.batch_size is unset (images, audio
    windows; 0: batched by tokens instead)."""
    test_files: int = 0
    """How many files a sweep's --test takes (translation: SRC and REF; 0: none)."""
    trains: Callable[[RunConfig], bool] = lambda config: True
    """Among the tasks of one objective, whether this one trains `config`."""
    tokenizers: bool = True
    """Whether its models read or write text (a model directory then holds its tokenizers)."""
    inputs: Callable[[ModelConfig], str] = tokens
    """What its models read, in the words of the trainer's first line (inputs.py)."""
    cost: Callable[[ModelConfig, int], list[str]] = per_token
    """The lines `transformer info` prints of a model's FLOPs, at a sequence length (inputs.py)."""
    attention: Figure | None = None
    """The figure `transformer attention` draws of its models (figures.py; None: none)."""

    @property
    def paths(self) -> tuple[str, ...]:
        """The paths of its routes, its own first."""
        return tuple(route.path for route in self.routes)

    @property
    def archs(self) -> tuple[str, ...]:
        """The model families its objectives train."""
        return tuple(dict.fromkeys(OBJECTIVES[o].arch for o in self.objectives))


def wrong_task(task: Task, command: str) -> str:
    """One line for a model asked to do what its task does not: what it is and what runs it."""
    if task.command is None and task.infer is not None:
        served = f" or serve it ({', '.join(task.paths)})" if task.paths else ""
        return (
            f"this is {task.described}: run it as Pipeline.load(MODEL_DIR)(inputs){served}, not "
            f"{command}"
        )
    if task.command is None:
        return (
            f"this is {task.described}: no command runs it, not {command}; fine-tune it for a "
            "task (train.init_from)"
        )
    return f"this is {task.described}: use {task.command}, not {command}"
