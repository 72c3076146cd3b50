"""`transformer sweep`: training variants of one config over a grid, tabulated. The handler is
`sweep`; its parser is derived from its signature (cli.args)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated

from .args import Arg, command
from .common import (
    POSITIVE,
    UserError,
)

GRID = Annotated[
    list[str] | None,
    Arg(
        "a config key and the values to try (repeatable: the variants are the product of the "
        "grids)",
        metavar="KEY=V1,V2,...",
    ),
]
ZIP = Annotated[
    bool,
    Arg("pair the grids' values one to one instead (changes that go together)", flag="--zip"),
]
MINUTES = Annotated[
    float | None,
    Arg(
        "training budget of each run (train.max_minutes; default the config's)",
        POSITIVE,
        "a positive training budget",
    ),
]
REPEATS = Annotated[
    int,
    Arg(
        "runs per variant, with seeds train.seed, +1, ... (default 1)",
        POSITIVE,
        "a positive number of seeds per variant",
    ),
]
AVERAGE = Annotated[
    int,
    Arg(
        "score the average of the last N checkpoints (default 3)",
        POSITIVE,
        "a positive number of checkpoints to average",
        metavar="N",
    ),
]
TEST = Annotated[
    list[str] | None,
    Arg(
        "test data to score too: SRC REF for translation, a TSV or an image split/folder for a "
        "classifier, a COCO folder for a detector",
        metavar="FILE",
        several=True,
    ),
]
AT = Annotated[
    list[int] | None,
    Arg(
        "also score each run at these steps (the average of its checkpoints up to there): a "
        "learning curve from one run; needs schedule inverse_sqrt",
        POSITIVE,
        "positive step numbers",
        metavar="STEP",
        several=True,
    ),
]
SET = Annotated[
    list[str] | None,
    Arg("a change every variant gets (as for train)", metavar="SECTION.KEY=VALUE", flag="--set"),
]
RESUME = Annotated[bool, Arg("continue a stopped sweep: finished runs are not run again")]


def sweep(
    config: Annotated[str, Arg("the TOML config every variant starts from", positional=True)],
    out: Annotated[str, Arg("the sweep directory")],
    grid: GRID = None,
    paired: ZIP = False,
    minutes: MINUTES = None,
    repeats: REPEATS = 1,
    average: AVERAGE = 3,
    test: TEST = None,
    at: AT = None,
    overrides: SET = None,
    resume: RESUME = False,
) -> None:
    """Train each variant of a grid for the same budget, one after another, and score them
    (transformer.workflows.sweep)."""
    from ..workflows.sweep import Plan, SweepError, parse_grid, run_sweep

    if not Path(config).is_file():
        raise UserError(f"{config} not found: give the TOML config the variants change")
    for path in test or []:
        if not Path(path).exists():
            raise UserError(f"--test {path} not found")
    try:
        plan = Plan(
            config=config,
            grid=parse_grid(grid or [], paired),
            zip=paired,
            minutes=minutes,
            repeats=repeats,
            average=average,
            sets=list(overrides or []),
            test=list(test or []),
            at=sorted(set(at or [])),
        )
        rows = run_sweep(plan, out, resume=resume)
    except SweepError as e:
        raise UserError(str(e)) from None
    print(f"{len(rows)} runs scored: {Path(out) / 'results.md'}, results.csv, results.png")


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer sweep`."""
    command(
        sub,
        "sweep",
        sweep,
        help="train each variant of a grid of config changes for the same budget, and score them",
    )
