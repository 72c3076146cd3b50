"""`transformer train`: train from a TOML config into a run directory. The handler is
`train`; its parser is derived from its signature (cli.args)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated

from .args import Arg, command
from .common import (
    SET_HELP,
)


def train(
    config: Annotated[
        str, Arg("TOML file with [model], [data], [train], [decode] sections", positional=True)
    ],
    overrides: Annotated[
        list[str] | None, Arg(SET_HELP, metavar="SECTION.KEY=VALUE", flag="--set")
    ] = None,
    out: Annotated[str | None, Arg("run directory (default runs/CONFIG_NAME)")] = None,
    resume: Annotated[bool, Arg("continue from the run directory's latest checkpoint")] = False,
) -> None:
    """Train from a TOML config (see configs/), writing a run directory."""
    from ..config import load_config
    from ..training.trainer import train as run_training

    loaded = load_config(config, overrides or [])
    folder = Path(out) if out else Path("runs") / Path(config).stem
    run_training(loaded, folder, resume=resume)


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer train`."""
    command(sub, "train", train, help="train a model from a TOML config (see configs/)")
