"""`transformer train`, `sweep`, `average` and `demo`: each command's parser beside its handler."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import POSITIVE, UserError, add_flag, note

SET_HELP = (
    "override a config value (repeatable; values are TOML literals, e.g. train.max_steps=100)"
)


def cmd_train(args: argparse.Namespace) -> None:
    """Train from a TOML config (see configs/), writing a run directory."""
    from ..config import load_config
    from ..training.trainer import train

    config = load_config(args.config, args.set or [])
    out = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
    train(config, out, resume=args.resume)


def add_train_parser(sub: argparse._SubParsersAction) -> None:
    """`transformer train`."""
    p = sub.add_parser("train", help="train a model from a TOML config (see configs/)")
    p.add_argument("config", help="TOML file with [model], [data], [train], [decode] sections")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help=SET_HELP)
    p.add_argument("--out", help="run directory (default runs/CONFIG_NAME)")
    p.add_argument(
        "--resume", action="store_true", help="continue from the run directory's latest checkpoint"
    )
    p.set_defaults(func=cmd_train)


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


def add_sweep_parser(sub: argparse._SubParsersAction) -> None:
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


def cmd_average(args: argparse.Namespace) -> None:
    """Average checkpoints' parameters into a model directory (§6.1)."""
    from ..training.checkpoint import average_into, step_dirs

    if args.last is not None:
        if len(args.checkpoints) != 1:
            raise UserError(
                "--last N takes one run directory: transformer average --last 5 RUN_DIR --out "
                "MODEL_DIR"
            )
        found = step_dirs(args.checkpoints[0])
        if not found:
            raise UserError(
                f"{args.checkpoints[0]} has no checkpoints/step-* directories: pass a run directory"
            )
        paths = found[-args.last :]
        if len(paths) < args.last:
            note("average", f"the run has only {len(paths)} checkpoint(s); averaging those")
    else:
        paths = args.checkpoints
    average_into(paths, args.out)
    print(
        f"averaged {len(paths)} checkpoint(s) ({', '.join(str(p) for p in paths)}) into {args.out}"
    )


def add_average_parser(sub: argparse._SubParsersAction) -> None:
    """`transformer average`."""
    p = sub.add_parser(
        "average", help="average checkpoints into a model directory (the paper: last 5 or 20)"
    )
    p.add_argument(
        "checkpoints",
        nargs="+",
        metavar="CKPT_DIR",
        help="checkpoint directories, or one run directory with --last",
    )
    add_flag(
        p,
        "--last",
        type=int,
        metavar="N",
        bounds=POSITIVE,
        give="a positive number of checkpoints",
        help="average the last N checkpoints of the run directory",
    )
    p.add_argument("--out", required=True, help="model directory to write")
    p.set_defaults(func=cmd_average)


def cmd_demo(args: argparse.Namespace) -> None:
    """Spanish -> English, end to end (see transformer.workflows.demo)."""
    from ..workflows.demo import DemoError, run_demo

    try:
        run_demo(
            minutes=args.minutes,
            data_dir=args.data,
            run_dir=args.out,
            overrides=tuple(args.set or ()),
        )
    except DemoError as e:
        raise UserError(str(e)) from None


def add_demo_parser(sub: argparse._SubParsersAction) -> None:
    """`transformer demo`."""
    p = sub.add_parser(
        "demo",
        help="the main job: a Spanish -> English translator (the Bible, software messages, package "
        "descriptions, a word list), trained here in ~15 minutes",
    )
    p.add_argument("--minutes", type=float, default=15.0, help="training time budget (default 15)")
    p.add_argument(
        "--data",
        default="data",
        help="folder of the corpora, one folder each: bible, ui, debian, dictionary (built when "
        "missing; default data)",
    )
    p.add_argument("--out", default="runs/demo", help="run directory (replaced; default runs/demo)")
    p.add_argument(
        "--set",
        action="append",
        metavar="SECTION.KEY=VALUE",
        help="override a config value (repeatable)",
    )
    p.set_defaults(func=cmd_demo)


def register(sub: argparse._SubParsersAction) -> None:
    """`demo`, `train`, `sweep` and `average`."""
    add_demo_parser(sub)
    add_train_parser(sub)
    add_sweep_parser(sub)
    add_average_parser(sub)
