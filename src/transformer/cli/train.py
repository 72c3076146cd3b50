"""`transformer train`: train from a TOML config into a run directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import (
    SET_HELP,
)


def cmd_train(args: argparse.Namespace) -> None:
    """Train from a TOML config (see configs/), writing a run directory."""
    from ..config import load_config
    from ..training.trainer import train

    config = load_config(args.config, args.set or [])
    out = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
    train(config, out, resume=args.resume)


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer train`."""
    p = sub.add_parser("train", help="train a model from a TOML config (see configs/)")
    p.add_argument("config", help="TOML file with [model], [data], [train], [decode] sections")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help=SET_HELP)
    p.add_argument("--out", help="run directory (default runs/CONFIG_NAME)")
    p.add_argument(
        "--resume", action="store_true", help="continue from the run directory's latest checkpoint"
    )
    p.set_defaults(func=cmd_train)
