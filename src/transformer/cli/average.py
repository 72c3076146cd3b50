"""`transformer average`: checkpoints averaged into one model directory. The handler is
`average`; its parser is derived from its signature (cli.args)."""

from __future__ import annotations

import argparse
from typing import Annotated

from ..data.lines import note
from .args import Arg, command
from .common import POSITIVE, UserError


def average(
    checkpoints: Annotated[
        list[str],
        Arg(
            "checkpoint directories, or one run directory with --last",
            metavar="CKPT_DIR",
            positional=True,
        ),
    ],
    out: Annotated[str, Arg("model directory to write")],
    last: Annotated[
        int | None,
        Arg(
            "average the last N checkpoints of the run directory",
            POSITIVE,
            "a positive number of checkpoints",
            metavar="N",
        ),
    ] = None,
) -> None:
    """Average checkpoints' parameters into a model directory (§6.1)."""
    from ..files import own
    from ..training.checkpoint import average_into, step_dirs

    if last is not None:
        if len(checkpoints) != 1:
            raise UserError(
                "--last N takes one run directory: transformer average --last 5 RUN_DIR --out "
                "MODEL_DIR"
            )
        found = step_dirs(checkpoints[0])
        if not found:
            raise UserError(
                f"{checkpoints[0]} has no checkpoints/step-* directories: pass a run directory"
            )
        paths = found[-last:]
        if len(paths) < last:
            note("average", f"the run has only {len(paths)} checkpoint(s); averaging those")
    else:
        paths = checkpoints
    with own(out, "average"):  # not into a directory another process is writing (a live run's)
        average_into(paths, out)
    print(f"averaged {len(paths)} checkpoint(s) ({', '.join(str(p) for p in paths)}) into {out}")


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer average`."""
    command(
        sub,
        "average",
        average,
        help="average checkpoints into a model directory (the paper: last 5 or 20)",
    )
