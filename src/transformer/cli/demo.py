"""`transformer demo`: the main job end to end (Spanish -> English from installed packages)."""

from __future__ import annotations

import argparse

from .common import (
    UserError,
)


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


def register(sub: argparse._SubParsersAction) -> None:
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
