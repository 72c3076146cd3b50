"""What every command shares: UserError, the one way flags are checked, the flags of a model run
(ModelRun: the model directory, --device, --threads, --precision), opening it, and running a
parsed command. Input and output lines and notes on stderr are transformer.data.lines'; an output
file's checks transformer.files'; the device's pick transformer.decoding.pipeline's.

Flags are checked one way: a flag added with `add_flag(..., bounds=..., give=...)`, derived
from a handler's signature or from a config setting (args.py) carries its rule, and `check_flags`
applies the rules of the command that was parsed before the command runs: `--beam 0: give a beam
size of at least 1`.
A setting's flag name, type, choices, help text and rule all come from its definition on the
config dataclass (transformer.config.checks.setting), so the command line, config files and the
server accept the same values.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal

from ..config import DEVICES, Bounds, ConfigError, DecodeConfig
from ..data.lines import LineError
from .args import Arg, Setting, add_arguments, add_setting

if TYPE_CHECKING:  # the table is imported when a command runs, not when it is parsed
    from ..tasks import Task


class UserError(Exception):
    """An error caused by the user's input; printed as one line without a traceback."""


USER_ERRORS = (UserError, ConfigError, LineError, ValueError, OSError)
"""Errors printed as one line (a model directory's ModelFileError is a ValueError)."""


# ---- the one flag-checking mechanism (flags and their rules: args.py) ----


def check_flags(args: argparse.Namespace) -> None:
    """Each flag with a rule that was given (not None) must be within its bounds."""
    for dest, flag, bounds, give in getattr(args, "flag_rules", None) or ():
        value = getattr(args, dest, None)
        for item in value if isinstance(value, list) else [value]:  # nargs: each value
            if item is not None and not bounds.allows(item):
                raise UserError(f"{flag} {item}: give {give}")


POSITIVE = Bounds(gt=0)
AT_LEAST_0 = Bounds(ge=0)
PROBABILITY = Bounds(ge=0, le=1)
SET_HELP = (
    "override a config value (repeatable; values are TOML literals, e.g. train.max_steps=100)"
)


# ---- flags many commands share ----


DEVICE = Annotated[
    Literal[DEVICES],
    Arg("where to run (default auto: the GPU when torch sees one, else the CPU)"),
]
THREADS = Annotated[
    int | None,
    Arg(
        "CPU threads for torch (default: torch's choice)", POSITIVE, "a positive number of threads"
    ),
]
PRECISION = Annotated[
    str | None, Setting(DecodeConfig, note="default from the model's decode.json, fp32 unless set")
]
BATCH_TOKENS = Annotated[
    int, Arg("source tokens per batch", POSITIVE, "a positive number of tokens")
]
"""--batch-tokens of the commands that translate a file (translate, backtranslate)."""
MODEL_DIR = Annotated[str, Arg("a model directory", positional=True)]


@dataclass(frozen=True)
class ModelRun:
    """The model directory a command runs, and where: the flags every command over a model takes
    (a handler's `run: ModelRun` parameter gives them; load_pipeline(run, command) opens it)."""

    model_dir: MODEL_DIR
    device: DEVICE = "auto"
    threads: THREADS = None
    precision: PRECISION = None


@dataclass(frozen=True)
class Where:
    """Where a command runs, for one that does not take --precision (attention)."""

    device: DEVICE = "auto"
    threads: THREADS = None


def _precision(precision: PRECISION = None) -> None:
    """--precision (ModelRun's, for a parser not derived from a handler)."""


def add_device_args(p: argparse.ArgumentParser) -> None:
    """--device and --threads, as ModelRun defines them."""
    add_arguments(p, Where)


def add_precision_arg(p: argparse.ArgumentParser) -> None:
    """--precision, as ModelRun defines it."""
    add_arguments(p, _precision)


def add_decode_args(
    p: argparse.ArgumentParser,
    names: tuple[str, ...],
    note: str = "default from the model's decode.json",
    notes: dict[str, str] | None = None,
) -> None:
    """The flags of these DecodeConfig settings (each derived from its definition)."""
    for name in names:
        add_setting(p, DecodeConfig, name, note=(notes or {}).get(name, note))


def load_pipeline(
    run: ModelRun, command: str, task: Task | None = None, compile: str | None = None
):
    """The model directory as a Pipeline on --device in --precision (and --compile, for a command
    that takes it); "auto" says on stderr what it chose; with `task`, the model must run it
    (transformer.decoding.pipeline.open_pipeline)."""
    from ..decoding.pipeline import open_pipeline

    return open_pipeline(
        run.model_dir, run.device, run.threads, run.precision, command, task, compile
    )


# ---- running a command ----


def remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Each command's own parser, as args.parser, so that its errors show its usage."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.set_defaults(parser=child)
                remember_parsers(child)


def unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """'unrecognized argument --beams (did you mean --beam?)' for each unknown flag."""
    flags = [flag for action in parser._actions for flag in action.option_strings]
    parts: list[str] = []
    for extra in extras:
        if (
            parts
            and not extra.startswith("-")
            and parts[-1].startswith("-")
            and "=" not in parts[-1]
        ):
            parts[-1] += f" {extra}"  # the value of the unknown flag before it
        else:
            parts.append(extra)
    shown = []
    for part in parts:
        close = (
            difflib.get_close_matches(part.split("=")[0].split()[0], flags, n=1)
            if part.startswith("-")
            else []
        )
        shown.append(part + (f" (did you mean {close[0]}?)" if close else ""))
    return f"unrecognized argument{'s' if len(parts) > 1 else ''}: {', '.join(shown)}"


def run(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Parse argv, check the flags, run the command; a user's error is one line and status 2."""
    args, extras = parser.parse_known_args(argv)
    own = getattr(args, "parser", parser)
    if extras:
        own.error(unrecognized(own, extras))
    name = own.prog  # "transformer translate", "transformer data copy"
    try:
        check_flags(args)
        args.func(args)
    except BrokenPipeError:  # the reader went away (`transformer translate ... | head`): stop
        os.dup2(
            os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
        )  # no second error when Python flushes
        return 141
    except USER_ERRORS as e:
        message = " ".join(str(e).splitlines())  # one line, even for a library's multi-line message
        print(f"{name}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    return 0
