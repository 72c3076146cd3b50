"""What the tasks' evaluate functions share: the model opened where the evaluation runs and the
table of scores per task (--pairs, --chat, --metric rouge).

Rules: the model is opened as every command opens one (the evaluation's `models.open`, decoding's
open_pipeline: "auto"'s choices said on stderr as notes of `evaluate`); the table has a row per
task and a column per score, then the share of exact matches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .evaluation import Evaluation

if TYPE_CHECKING:
    from .base import Task


def open_model(evaluation: Evaluation, task: Task | None = None):
    """The evaluation's model directory as a Pipeline on its device in its precision; with `task`
    (a task's record), one line saying what it is unless it runs that task."""
    e = evaluation
    return e.models.open(e.model_dir, e.device, e.threads, e.precision, "evaluate", task)


def print_pair_scores(scores: dict[str, dict[str, float]]) -> None:
    """The table of score_pairs: a row per task, a column per score."""
    columns = [k for k in next(iter(scores.values())) if k not in ("lines", "exact")]
    names = dict(bleu="BLEU", chrf="chrF", rouge1="ROUGE-1", rouge2="ROUGE-2", rougeL="ROUGE-L")
    width = max(len(task) for task in scores)
    print(
        f"{'task':<{width}}  {'lines':>6}  "
        + "  ".join(f"{names[c]:>7}" for c in columns)
        + f"  {'exact':>6}"
    )
    for task, s in scores.items():
        print(
            f"{task:<{width}}  {s['lines']:>6,}  "
            + "  ".join(f"{s[c]:>7.2f}" for c in columns)
            + f"  {s['exact']:>5.1f}%"
        )
