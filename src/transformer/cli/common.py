"""What every command shares: UserError, the one way flags are checked, the flags of a model run
(ModelRun: the model directory, --device, --threads, --precision), input and output files, notes
on stderr, and running a parsed command.

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
from pathlib import Path
from typing import Annotated, Literal

from ..config import DEVICES, Bounds, ConfigError, DecodeConfig
from .args import Arg, Setting, add_arguments, add_setting
from .lines import LineError, format_lines, read_lines, stream_lines


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


def decode_overrides(args: argparse.Namespace, names: tuple[str, ...]) -> dict:
    """The decoding settings given on the command line, by name (those left out keep the
    model's)."""
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def pick_device(device: str, threads: int | None) -> str:
    """The device to run on ("auto": the GPU when torch sees one, else the CPU), with torch's CPU
    threads set when given."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError(
            "--device cuda was asked for, but torch sees no CUDA GPU: use --device cpu (or auto)"
        )
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def load_pipeline(args: argparse.Namespace | ModelRun, command: str):
    """The model directory as a Pipeline on --device in --precision; "auto" says on stderr what it
    chose."""
    return open_pipeline(args.model_dir, args.device, args.threads, args.precision, command)


def open_pipeline(
    model_dir: str, device: str, threads: int | None, precision: str | None, command: str
):
    """A model directory as a Pipeline on `device` in `precision` (None: its decode.json's);
    "auto" says on stderr what it chose."""
    from ..decoding.pipeline import Pipeline

    pipeline = Pipeline.load(model_dir, pick_device(device, threads), precision=precision)
    if (precision or pipeline.decode.precision) == "auto":
        note(command, f"precision {pipeline.precision.describe()}")
    return pipeline


# ---- files and messages ----


def read_text(path: str | None, what: str) -> list[str]:
    """Lines of a UTF-8 file, or all of standard input when path is None or '-' (see
    transformer.cli.lines)."""
    if path in (None, "-"):
        return [line for chunk in stream_lines() for line in chunk]
    return read_lines(path, what)


def write_text(path: str | None, lines: list[str]) -> None:
    """Lines to a file (atomically) or to standard output, one line each (see
    transformer.cli.lines)."""
    if path in (None, "-"):
        sys.stdout.write(format_lines(lines))
        sys.stdout.flush()
        return
    from ..files import atomic_write_text

    check_output(path)
    atomic_write_text(path, format_lines(lines))


def check_output(path: str) -> None:
    """An output file's directory must exist: checked before the work, not after it."""
    if Path(path).is_dir():
        raise UserError(f"--output {path} is a directory: give a file name")
    if not Path(path).resolve().parent.is_dir():
        raise UserError(
            f"--output {path}: the directory {Path(path).parent} does not exist; create it first"
        )


def check_picture(flag: str, path: str, what: str, dir_exists: bool = True) -> None:
    """A figure's file name: .png, .svg or .pdf (and, with dir_exists, in a directory that
    exists)."""
    from ..viz import FORMATS

    if Path(path).suffix[1:].lower() not in FORMATS:
        raise UserError(
            f"{flag} {path}: {what} is written as .png, .svg or .pdf; give a file name with one of "
            "those"
        )
    if dir_exists and not Path(path).resolve().parent.is_dir():
        raise UserError(
            f"{flag} {path}: the directory {Path(path).parent} does not exist; create it first"
        )


def note(command: str, text: str) -> None:
    print(f"transformer {command}: note: {text}", file=sys.stderr, flush=True)


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
