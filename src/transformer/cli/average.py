"""`transformer average`: checkpoints averaged into one model directory."""

from __future__ import annotations

import argparse

from .common import (
    POSITIVE,
    UserError,
    add_flag,
    note,
)


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


def register(sub: argparse._SubParsersAction) -> None:
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
