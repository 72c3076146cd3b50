"""`transformer sweep`: training variants of one config over a grid, tabulated."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import (
    POSITIVE,
    UserError,
    add_flag,
)


def cmd_sweep(args: argparse.Namespace) -> None:
    """Train each variant of a grid for the same budget, one after another, and score them
    (transformer.workflows.sweep)."""
    from ..workflows.sweep import Plan, SweepError, parse_grid, run_sweep

    if not Path(args.config).is_file():
        raise UserError(f"{args.config} not found: give the TOML config the variants change")
    for path in args.test or []:
        if not Path(path).exists():
            raise UserError(f"--test {path} not found")
    try:
        plan = Plan(
            config=args.config,
            grid=parse_grid(args.grid or [], args.zip),
            zip=args.zip,
            minutes=args.minutes,
            repeats=args.repeats,
            average=args.average,
            sets=list(args.set or []),
            test=list(args.test or []),
            at=sorted(set(args.at or [])),
        )
        rows = run_sweep(plan, args.out, resume=args.resume)
    except SweepError as e:
        raise UserError(str(e)) from None
    print(f"{len(rows)} runs scored: {Path(args.out) / 'results.md'}, results.csv, results.png")


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer sweep`."""
    p = sub.add_parser(
        "sweep",
        help="train each variant of a grid of config changes for the same budget, and score them",
    )
    p.add_argument("config", help="the TOML config every variant starts from")
    p.add_argument(
        "--grid",
        action="append",
        metavar="KEY=V1,V2,...",
        help="a config key and the values to try (repeatable: the variants are the product of the "
        "grids)",
    )
    p.add_argument(
        "--zip",
        action="store_true",
        help="pair the grids' values one to one instead (changes that go together)",
    )
    add_flag(
        p,
        "--minutes",
        type=float,
        bounds=POSITIVE,
        give="a positive training budget",
        help="training budget of each run (train.max_minutes; default the config's)",
    )
    add_flag(
        p,
        "--repeats",
        type=int,
        default=1,
        bounds=POSITIVE,
        give="a positive number of seeds per variant",
        help="runs per variant, with seeds train.seed, +1, ... (default 1)",
    )
    add_flag(
        p,
        "--average",
        type=int,
        default=3,
        metavar="N",
        bounds=POSITIVE,
        give="a positive number of checkpoints to average",
        help="score the average of the last N checkpoints (default 3)",
    )
    p.add_argument(
        "--test",
        nargs="+",
        metavar="FILE",
        help="test data to score too: SRC REF for translation, "
        "a TSV or an image split/folder for a classifier, a COCO folder for a detector",
    )
    add_flag(
        p,
        "--at",
        type=int,
        nargs="+",
        metavar="STEP",
        bounds=POSITIVE,
        give="positive step numbers",
        help="also score each run at these steps (the average of its checkpoints up to there): "
        "a learning curve from one run; needs schedule inverse_sqrt",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="SECTION.KEY=VALUE",
        help="a change every variant gets (as for train)",
    )
    p.add_argument("--out", required=True, help="the sweep directory")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue a stopped sweep: finished runs are not run again",
    )
    p.set_defaults(func=cmd_sweep)
