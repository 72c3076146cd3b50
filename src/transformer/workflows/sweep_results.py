"""A sweep's scores and tables: each finished run scored on its averaged model (translation:
BLEU and chrF; classifiers: accuracy and macro-F1; else the validation loss), `results.csv` (one
row per run), `results.md` (one line per variant: mean and spread over seeds) and `results.png`.
The rules of what is scored are sweep.py's."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import statistics
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..files import atomic_write_text
from ..training.checkpoint import average_into, step_dirs
from .sweep_plan import Plan, SweepError

RESULTS_CSV, RESULTS_MD, RESULTS_PNG = "results.csv", "results.md", "results.png"


def step_of(checkpoint: Path) -> int:
    """A checkpoint directory's step (checkpoints/step-NNNNNN)."""
    return int(checkpoint.name.rsplit("-", 1)[-1])


def score_run(
    average: int,
    test: tuple[str, ...],
    config: RunConfig,
    name: str,
    changes,
    seed: int,
    run_dir: Path,
    log,
    at: int | None = None,
) -> dict[str, Any]:
    """The row of one run: scored at its end, or at step `at` (its checkpoints up to there), on
    the average of its last `average` checkpoints; its task scores the validation data and the
    `test` files (transformer.tasks)."""
    from ..data.text import DataError
    from ..decoding.pipeline import Pipeline
    from ..model.transformer import EncoderOnly
    from ..tasks import run_task

    checkpoints = [c for c in step_dirs(run_dir) if at is None or step_of(c) <= at]
    checkpoints = checkpoints[-average:]
    if at is not None and (not checkpoints or step_of(checkpoints[-1]) != at):
        raise SweepError(
            f"{run_dir} has no checkpoint at step {at} for --at: set train.save_every to a "
            "divisor of every --at step and train.keep_last high enough to keep them"
        )
    model_dir = run_dir / "averaged"
    if checkpoints:
        shutil.rmtree(model_dir, ignore_errors=True)
        average_into(checkpoints, model_dir)
    else:
        model_dir = run_dir / "last"
    records = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip() and (at is None or json.loads(line).get("step", 0) <= at)
    ]
    train_records = [r for r in records if r.get("split") == "train"]
    valid_records = [  # at a step of --at, only the validation of that step is its own
        r for r in records if r.get("split") == "valid" and (at is None or r.get("step") == at)
    ]
    pipeline = Pipeline.load(model_dir)
    model = pipeline.model
    seconds = sum(r["tokens"] / max(r["tokens_per_s"], 1e-9) for r in train_records)
    row: dict[str, Any] = {
        "variant": name,
        **{key: value for key, value in changes},
        "seed": seed,
        **({"at": at} if at is not None else {}),
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": train_records[-1]["step"] if train_records else 0,
        "minutes": round((train_records[-1]["elapsed_s"] if train_records else 0.0) / 60, 2),
        "tokens_per_s": round(sum(r["tokens"] for r in train_records) / seconds) if seconds else 0,
        "valid_loss": valid_records[-1].get("valid_loss") if valid_records else None,
        "valid_ppl": round(valid_records[-1]["valid_ppl"], 3)
        if "valid_ppl" in (valid_records or [{}])[-1]
        else None,
        "averaged": len(checkpoints),
    }
    if seconds and isinstance(model, EncoderOnly) and all("units" in r for r in train_records):
        row["examples_per_s"] = round(
            sum(r["units"] for r in train_records) / seconds
        )  # a classifier's texts or images
    score = run_task(config).score
    if score is not None:
        try:
            row.update(score(pipeline, config, tuple(test)))
        except DataError as e:
            raise SweepError(str(e)) from None
    log(
        "  "
        + "  ".join(
            f"{k} {v}" for k, v in row.items() if k.startswith(("valid_", "test_", "steps"))
        )
    )
    return row


# ------------------------------------------------------------------------------------------------
# results


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def main_metric(rows: list[dict[str, Any]]) -> str | None:
    for name in (
        "test_bleu",
        "valid_bleu",
        "test_accuracy",
        "valid_accuracy",
        "test_map",
        "valid_map",
        "valid_loss",
    ):
        if any(_number(r.get(name)) is not None for r in rows):
            return name
    return None


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def write_results(out: Path, plan: Plan, rows: list[dict[str, Any]]) -> None:
    """results.csv (every run), results.md (a line per variant) and results.png."""
    keys = [g[0] for g in plan.grid]
    columns = [
        "variant",
        *keys,
        "seed",
        *(["at"] if plan.at else []),
        "parameters",
        "steps",
        "minutes",
        "tokens_per_s",
        "valid_loss",
        "valid_ppl",
        "averaged",
    ]
    columns += sorted({k for r in rows for k in r} - set(columns))
    text = io.StringIO()
    writer = csv.DictWriter(text, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out / RESULTS_CSV, text.getvalue())
    metric = main_metric(rows)
    scores = [c for c in columns if c.startswith(("valid_", "test_"))]
    lines = [
        f"# Sweep of {plan.config}",
        "",
        f"{len(rows)} runs; "
        f"{plan.minutes or 'the config'}{' minutes' if plan.minutes else ''} each; "
        f"{plan.repeats} seed(s) per variant; scores of the average of the last "
        f"{plan.average} checkpoints"
        + (f"; test: {' '.join(plan.test)}" if plan.test else "")
        + ". Mean over seeds (± "
        "sample standard "
        "deviation where there are several).",
        "",
        "| variant | runs | parameters | steps | tokens/s | " + " | ".join(scores) + " |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(scores),
    ]
    for name, group in _by_variant(rows).items():
        cells = [
            name,
            str(len(group)),
            _mean(group, "parameters", "{:,.0f}"),
            _mean(group, "steps", "{:,.0f}"),
            _mean(group, "tokens_per_s", "{:,.0f}"),
        ]
        cells += [
            _mean(group, s, "{:.4f}" if s.endswith(("_loss", "_f1")) else "{:.2f}") for s in scores
        ]
        lines.append("| " + " | ".join(cells) + " |")
    atomic_write_text(out / RESULTS_MD, "\n".join(lines) + "\n")
    if metric and rows:
        from ..viz.sweep import plot_sweep

        groups = _by_variant(rows)
        plot_sweep(
            {
                name: [v for v in (_number(r.get(metric)) for r in group) if v is not None]
                for name, group in groups.items()
            },
            metric,
            out / RESULTS_PNG,
        )


def _by_variant(rows):
    """Rows grouped by variant (and by --at step: "VARIANT @ STEP"; the run's end: the variant)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        at = r.get("at")
        groups.setdefault(f"{r['variant']} @ {at}" if at else r["variant"], []).append(r)
    return groups


def _mean(group, key: str, fmt: str) -> str:
    values = [v for v in (_number(r.get(key)) for r in group) if v is not None]
    if not values:
        return "-"
    text = fmt.format(statistics.fmean(values))
    return text + (f" ± {fmt.format(statistics.stdev(values))}" if len(values) > 1 else "")
