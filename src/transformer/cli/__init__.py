"""The `transformer` command: argparse subcommands; the only place that reads argv.

One module per command group, each holding its parsers beside its handlers (`register(sub)`):
data.py (data ..., tokenize), training.py (train, sweep, average, demo), decoding.py
(translate, generate, classify), evaluation.py (evaluate), inspection.py (info, attention),
models.py (import-hf, export, serve); common.py holds what they share (UserError, the one way
flags are checked, device and files). Errors a user can fix are printed as one line and exit
with status 2; an unknown flag prints the command's usage with the closest flag it has.
"""

from __future__ import annotations

import argparse
import sys

from . import data, decoding, evaluation, inspection, models, training
from .common import USER_ERRORS, UserError, check_flags, remember_parsers, run

DESCRIPTION = """\
The Transformer of "Attention Is All You Need" (Vaswani et al., 2017): train translation and
language models on your own text, translate, generate, evaluate, import Hugging Face weights and
look inside them. `transformer COMMAND --help` explains each command."""

EPILOG = """\
examples:
  transformer demo                                      Spanish -> English, ~15 minutes on a CPU
  transformer data copy --out data/copy                 a synthetic task to check a set-up
  transformer train configs/copy.toml --out runs/copy   train from a TOML config
  echo "the cat" | transformer translate runs/copy/best
  transformer evaluate runs/copy/best --src data/copy/test.src --ref data/copy/test.tgt"""

GROUPS = (training, inspection, models, data, decoding, evaluation)
"""The command groups, in the order `transformer --help` lists their commands."""

__all__ = ["USER_ERRORS", "UserError", "build_parser", "check_flags", "main"]


def _versions() -> str:
    import platform

    import torch

    return f"torch {torch.__version__}, Python {platform.python_version()}"


def build_parser() -> argparse.ArgumentParser:
    """The `transformer` parser: each group registers its commands."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="transformer",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__} ({_versions()})"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    remember_parsers(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
