"""transformer sweep: one config, a grid of changes, each variant trained for the same budget and
scored.

A sweep directory holds:
- `sweep.json`: what was asked (config, fixed --set changes, the grid, zip, minutes, repeats,
  average, test files), written first; --resume refuses a different plan.
- `runs/<variant>/seed-<S>/`: each run directory (the trainer's layout) and its `averaged/` model
  (the last `average` checkpoints, as the recipe and the demo do).
- `results.csv`: one row per finished run (variant, the grid's values, seed, parameters, steps,
  minutes, tokens/s, the validation loss, and the scores); rewritten whole after each run.
- `results.md`: the table, one line per variant (mean and spread over seeds), and `results.png`,
  the main score per variant with each seed's value.

--at STEPS scores each run at those steps as well as at its end, one row each (column `at`): a
learning curve from one run instead of one run per budget. The score at step N is that of the
average of the `average` checkpoints up to N (train.save_every should divide N, and keep_last
keep them all). It is what a run stopped at N would score only when nothing in training depends
on the run's length: the schedule must be inverse_sqrt (a cosine decays to the run's end), so
other schedules are refused.

One sweep writes a directory at a time (files.own: a second is refused, naming the first).
Variants run one after another, never two at once: on a CPU two runs would share the cores and
each budget would mean less. A killed sweep resumes (--resume): runs with a row are not run again,
a run killed mid-training resumes from its last checkpoint (exact resume), a run whose training
ended but was not scored is scored.

Scores, on the averaged model: translation (encoder-decoder): BLEU and chrF (sacreBLEU) on the
config's validation files and on --test SRC REF, with the config's [decode] settings; classifiers
(text or image): accuracy and macro-F1 on the validation data and on --test FILE; detectors: COCO's
mAP@[.5:.95], AP50 and AP75 on the validation folder and on --test DIR; other objectives: the
validation loss only.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..config import ConfigError, RunConfig, load_config, with_overrides
from ..files import OWNER_FILE, atomic_write_text, own
from ..tasks import run_task
from ..training.checkpoint import step_dirs
from .sweep_plan import PLAN_FILE, Plan, SweepError, parse_grid
from .sweep_results import RESULTS_CSV, read_rows, score_run, step_of, write_results

__all__ = ["PLAN_FILE", "Plan", "SweepError", "parse_grid", "run_sweep", "variant_name"]


def variant_name(changes: list[tuple[str, str]], base: RunConfig | None = None) -> str:
    """A directory name for a variant: its changes (the last part of each key), e.g.
    n_heads=4,d_ff=512, leaving out those that keep base's value (a --zip grid may repeat one);
    "base" when none is left."""
    kept = [
        (key, value) for key, value in changes if base is None or not _unchanged(base, key, value)
    ]
    if not kept:
        return "base"
    text = ",".join(
        f"{key.rsplit('.', 1)[-1]}={value.strip(chr(34) + chr(39))}" for key, value in kept
    )
    return re.sub(r"[^A-Za-z0-9_.=,+-]", "_", text)[:120]


def _unchanged(base: RunConfig, key: str, value: str) -> bool:
    """Whether `key=value` leaves base as it is (a flat [data] key of earlier configs too)."""
    try:
        return with_overrides(base, [f"{key}={value}"]) == base
    except (ConfigError, TypeError, ValueError):
        return False


def _run_config(plan: Plan, changes: list[tuple[str, str]], seed: int) -> RunConfig:
    overrides = [*plan.sets, *(f"{k}={v}" for k, v in changes), f"train.seed={seed}"]
    if plan.minutes is not None:
        overrides.append(f"train.max_minutes={plan.minutes}")
    try:
        return load_config(plan.config, overrides)
    except ConfigError as e:
        raise SweepError(f"variant {variant_name(changes)}: {e}") from None


def run_sweep(
    plan: Plan,
    out: str | Path,
    resume: bool = False,
    log: Callable[[str], None] = print,
    train_fn: Callable[..., Any] | None = None,
) -> list[dict[str, Any]]:
    """Run (or resume) the sweep; returns the rows of results.csv."""
    from ..training.trainer import train

    train_fn = train if train_fn is None else train_fn
    out = Path(out)
    try:
        base = load_config(plan.config, plan.sets)
    except ConfigError as e:
        raise SweepError(str(e)) from None
    files = run_task(base).test_files
    wanted = (0, files) if files else (0,)
    if len(plan.test) not in wanted:
        raise SweepError(
            "--test takes "
            f"{'SRC REF (two files)' if wanted == (0, 2) else 'one file or folder'} for "
            "objective "
            f"{base.objective!r}"
            if len(wanted) > 1
            else f"--test: objective {base.objective!r} is scored by its validation loss "
            "only; drop --test"
        )
    seeds = [base.train.seed + r for r in range(plan.repeats)]
    variants = plan.variants()
    names: dict[str, list[tuple[str, str]]] = {}
    for changes in variants:  # every variant's config is checked before anything trains
        config = _run_config(plan, changes, seeds[0])
        if plan.at and (config.train.schedule != "inverse_sqrt" or config.train.late_dropout):
            raise SweepError(
                f"--at scores checkpoints along a run, which equal shorter runs only when "
                f"training does not depend on the run's length; variant "
                f"{variant_name(changes)} has schedule {config.train.schedule!r}"
                f"{' and late_dropout' if config.train.late_dropout else ''}: use "
                'train.schedule="inverse_sqrt" without late_dropout, or a grid over '
                "train.max_steps instead of --at"
            )
        name = variant_name(changes, base)
        if name in names:
            raise SweepError(
                f"two variants are the same config ({name}): remove the repeated "
                "values from the grid"
            )
        names[name] = changes
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} is a file: choose a directory")
    with own(out, "sweep", log):  # one sweep per directory; each variant's trainer owns its run
        return _run(plan, out, resume, log, train_fn, names, seeds)


def _run(plan, out, resume, log, train_fn, names, seeds) -> list[dict[str, Any]]:
    """The sweep's runs and scores, in order, skipping what results.csv already holds."""
    _start(plan, out, resume)
    rows = read_rows(out / RESULTS_CSV)
    done = {(r["variant"], int(r["seed"]), str(r.get("at") or "")) for r in rows}
    total = len(names) * len(seeds)
    for k, ((name, changes), seed) in enumerate(itertools.product(names.items(), seeds), start=1):
        if (name, seed, "") in done:
            continue
        config = _run_config(plan, changes, seed)
        run_dir = out / "runs" / name / f"seed-{seed}"
        log(f"[{k}/{total}] {name} seed {seed} -> {run_dir}")
        if not (
            run_dir / "last"
        ).is_dir():  # training not finished: resume from the last checkpoint, or start afresh
            resume_run = bool(step_dirs(run_dir))
            if not resume_run:
                shutil.rmtree(
                    run_dir, ignore_errors=True
                )  # killed before its first checkpoint: nothing to keep
            train_fn(config, run_dir, resume=resume_run, log=log)
        final = step_of(step_dirs(run_dir)[-1]) if step_dirs(run_dir) else 0
        for at in sorted(a for a in plan.at if a < final and (name, seed, str(a)) not in done):
            rows.append(
                score_run(plan.average, plan.test, config, name, changes, seed, run_dir, log, at=at)
            )
            write_results(out, plan, rows)
        rows.append(score_run(plan.average, plan.test, config, name, changes, seed, run_dir, log))
        write_results(out, plan, rows)
    write_results(out, plan, rows)  # also on a resume with nothing left to run
    return rows


def _start(plan: Plan, out: Path, resume: bool) -> None:
    plan_file = out / PLAN_FILE
    if plan_file.is_file():
        saved = json.loads(plan_file.read_text(encoding="utf-8"))
        if not resume:
            raise SweepError(
                f"{out} already holds a sweep: pass --resume to continue it, or "
                "choose another --out"
            )
        if saved != asdict(plan):
            differs = sorted(k for k in asdict(plan) if saved.get(k) != asdict(plan)[k])
            raise SweepError(
                f"--resume: {out} was started with other settings "
                f"({', '.join(differs)} differ); "
                f"resume with the same command, or choose another --out"
            )
        return
    if resume:
        raise SweepError(f"--resume: {out} has no {PLAN_FILE}; start the sweep without --resume")
    if any(p.name != OWNER_FILE for p in out.iterdir()):
        raise SweepError(f"--out {out} exists and is not an empty directory: choose another")
    atomic_write_text(plan_file, json.dumps(asdict(plan), indent=1) + "\n")


# ------------------------------------------------------------------------------------------------
# scoring
