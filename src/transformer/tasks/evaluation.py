"""One `transformer evaluate` run as a typed record (Evaluation), read by the evaluate function of
the task that scores the model (each task's `Scored` rows hold theirs: see base.py).

The rules:
- An Evaluation says where it runs (the model directory, device, threads, precision), holds every
  input and option evaluate takes (None or the default where not given) and the decoding settings
  that were given, by name; a setting left out keeps the model's decode.json.
- An evaluate function prints the scores on standard output (and writes --output). An error a
  user can fix is an EvaluationError (a ValueError): the CLI prints it as one line.
- A confusion matrix to draw (--plot) is returned as a Confusion, not drawn: the caller draws it
  and says where.
- Model directories are opened through the record's `models` (decoding.pipeline's open_pipeline
  and Pipeline.load, handed in by the caller): decoding/ stands on the table of tasks, so tasks/
  does not import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..evaluation.metrics import ClassificationScores


class EvaluationError(ValueError):
    """An evaluation a user asked for that cannot run as given; the message says why and what to
    give instead, in one line."""


@dataclass(frozen=True)
class Models:
    """How an evaluation opens model directories (decoding.pipeline's functions)."""

    open: Callable[..., Any]
    """open_pipeline(model_dir, device, threads, precision, command, task): the model evaluated."""
    load: Callable[[str], Any]
    """Pipeline.load(model_dir): another model an evaluation reads (--classifier)."""


@dataclass(frozen=True)
class Evaluation:
    """Where an evaluation runs, what it reads and the options it was given (the flags of
    `transformer evaluate`, each described there)."""

    model_dir: str
    models: Models
    device: str = "auto"
    threads: int | None = None
    precision: str | None = None
    src: str | None = None
    ref: str | None = None
    text: str | None = None
    documents: str = "file"
    window: int | None = None
    stride: int | None = None
    per_line: bool = False
    tsv: str | None = None
    pairs: str | None = None
    chat: str | None = None
    squad: str | None = None
    audio: str | None = None
    detection: str | None = None
    per_query: bool = False
    metric: str = "bleu"
    images: str | None = None
    plot: str | None = None
    classifier: str | None = None
    samples: int = 50
    limit: int | None = None
    seed: int | None = None
    output: str | None = None
    decode: dict[str, Any] = field(default_factory=dict)
    """The decoding settings given, by name (those left out keep the model's)."""

    def settings(self, names: tuple[str, ...]) -> dict[str, Any]:
        """The decoding settings given among `names`, by name."""
        return {name: self.decode[name] for name in names if self.decode.get(name) is not None}


@dataclass(frozen=True)
class Confusion:
    """A confusion matrix an evaluation asks to draw to its --plot, with the figure's title."""

    scores: ClassificationScores
    title: str
