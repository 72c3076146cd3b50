"""The `transformer` command: argparse subcommands; the only place that reads argv.

One module per command (train.py, translate.py, data/, ...). A command is a library function
with typed arguments (litgpt's shape), and its parser is derived from the signature (args.py):
a plain flag from its annotation and one-line doc, a setting's flag from its definition on a
config dataclass (Setting, Settings: the same name, type, range and doc as the TOML key and the
API field), where to run from common.ModelRun. `data` is one table of datasets over one parser
(data/__init__.py). evaluate (evaluation.py, its flags in evaluate_flags.py) makes one typed
record of the evaluation and runs the evaluate function the model's task holds (transformer.tasks).
Below the commands: args.py (the mechanism), common.py (UserError, checking flags, ModelRun,
opening it, running a command), loading.py (image files and each family's check of a model
directory); lines, notes and output files are transformer.data.lines' and transformer.files'.
Errors a user can fix are printed as one line and exit with status 2; an unknown flag prints the
command's usage with the closest flag it has.
"""

from __future__ import annotations

import argparse
import importlib
import sys

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

COMMANDS = (
    ("demo", "demo"),
    ("train", "train"),
    ("sweep", "sweep"),
    ("average", "average"),
    ("info", "info"),
    ("attention", "attention"),
    ("import-hf", "import_hf"),
    ("export", "export"),
    ("serve", "serve"),
    ("data", "data"),
    ("tokenize", "tokenize"),
    ("translate", "translate"),
    ("classify", "classify"),
    ("generate", "generate"),
    ("backtranslate", "backtranslate"),
    ("answer", "answer"),
    ("transcribe", "transcribe"),
    ("detect", "detect"),
    ("caption", "caption"),
    ("embed", "embed"),
    ("evaluate", "evaluation"),
)
"""(command, module of this package), in the order `transformer --help` lists the commands. A run
of one command imports and builds only that command's module and parser (the others' flags are
derived from their signatures and settings, ~0.1 s on a 2-core CPU); --help and anything else
build them all."""

__all__ = ["USER_ERRORS", "UserError", "build_parser", "check_flags", "main"]


def versions() -> str:
    """torch's and Python's versions, read without importing torch (its package metadata)."""
    import platform
    from importlib import metadata

    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:  # torch installed without metadata: ask it
        import torch

        torch_version = torch.__version__
    return f"torch {torch_version}, Python {platform.python_version()}"


class VersionAction(argparse.Action):
    """--version: the versions are looked up only when asked for (parsers are built every run)."""

    def __init__(
        self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None
    ):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from .. import __version__

        print(f"{parser.prog} {__version__} ({versions()})")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `transformer` parser: each command registers its parser (`only`: that command alone)."""
    parser = argparse.ArgumentParser(
        prog="transformer",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action=VersionAction, help="show the versions of transformer, torch and Python"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS:
        if only is None or name == only:
            importlib.import_module(f"{__name__}.{module}").register(sub)
    remember_parsers(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    named = dict(COMMANDS)
    return run(build_parser(argv[0] if argv and argv[0] in named else None), argv)


if __name__ == "__main__":
    sys.exit(main())
