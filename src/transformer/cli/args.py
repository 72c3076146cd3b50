"""A command's flags derived from its handler (litgpt's shape): the handler is a plain function with
typed arguments, and its parser is read off its signature.

    def copy(out: OUT, n_train: Annotated[int, Arg("training pairs", Bounds(ge=1), "...")] = 20000)

gives `--out OUT` (required: no default) and `--n-train N` (int, default 20000, checked against its
bounds before the command runs: `--n-train 0: give ...`). The rules, one per annotation:

    str / int / float            a flag of that type; required when the parameter has no default
    X | None = None              optional: None when not given
    Literal["a", "b"]            choices
    list[X]                      repeatable (action="append"); each value checked
    bool = False / bool = True   --name (store_true) / --no-name (store_false)
    Annotated[X, Arg(...)]       its help text (the one-line doc of the parameter), and where
                                 needed its rule (bounds and the phrase after "give"), another flag
                                 spelling, a metavar, or positional=True

The flag is `--` + the name with dashes; the help ends with "(default D)" unless the text says it.
Settings defined on a config dataclass (config.checks.setting) are not retyped here: `add_settings`
derives their flags from their definitions (common.add_setting), so the command line, TOML files
and the server accept the same values.
"""

from __future__ import annotations

import argparse
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from ..config import Bounds, settings_of
from .common import add_flag, add_setting


@dataclass(frozen=True)
class Arg:
    """What a signature cannot say about one parameter: its one-line doc (the flag's help), the
    rule a given value must meet (bounds, and the phrase after "give" in the error), and where the
    default does not fit: the flag's spelling, its metavar, or positional."""

    help: str
    bounds: Bounds | None = None
    give: str | None = None
    flag: str | None = None
    metavar: str | None = None
    positional: bool = False


def flag_of(name: str) -> str:
    """A parameter's flag: n_train -> --n-train."""
    return "--" + name.replace("_", "-")


def _parts(annotation: Any) -> tuple[Any, Arg | None]:
    """(the type, its Arg) of Annotated[type, Arg(...)]; (the type, None) otherwise."""
    if typing.get_origin(annotation) is Annotated:
        base, *extras = typing.get_args(annotation)
        return base, next((e for e in extras if isinstance(e, Arg)), None)
    return annotation, None


def _kind(base: Any) -> tuple[Any, bool, tuple | None, bool]:
    """(the value type, optional, choices, repeatable) of a parameter's type."""
    optional, repeat = False, False
    if typing.get_origin(base) in (typing.Union, types.UnionType):
        parts = [a for a in typing.get_args(base) if a is not type(None)]
        optional, base = True, parts[0]
    if typing.get_origin(base) is list:
        repeat, base = True, typing.get_args(base)[0]
    if typing.get_origin(base) is Literal:
        choices = typing.get_args(base)
        return type(choices[0]), optional, choices, repeat
    return base, optional, None, repeat


def add_arguments(p: argparse.ArgumentParser, handler: Callable[..., Any]) -> None:
    """One argument per parameter of `handler`, in order (see the module's rules)."""
    hints = typing.get_type_hints(handler, include_extras=True)
    for name, param in inspect.signature(handler).parameters.items():
        base, arg = _parts(hints[name])
        if arg is None:
            raise TypeError(f"{handler.__name__}({name}): annotate it Annotated[type, Arg(help)]")
        kind, _, choices, repeat = _kind(base)
        default = None if param.default is inspect.Parameter.empty else param.default
        text = arg.help
        shown = default not in (None, "", []) and not isinstance(default, bool)
        if shown and "default" not in text:
            text = f"{text} (default {default})"
        kwargs: dict[str, Any] = {"help": text}
        if arg.metavar:
            kwargs["metavar"] = arg.metavar
        if kind is bool:
            action = "store_false" if default else "store_true"
            flag = arg.flag or (f"--no-{name.replace('_', '-')}" if default else flag_of(name))
            p.add_argument(flag, dest=name, action=action, **kwargs)
            continue
        if choices is not None:
            kwargs["choices"] = list(choices)
        else:
            kwargs["type"] = kind
        if arg.positional:
            names: tuple[str, ...] = (name,)
            if default is not None or param.default is not inspect.Parameter.empty:
                kwargs["nargs"] = "?"
        else:
            names = (arg.flag or flag_of(name),)
            kwargs["dest"] = name
            kwargs["required"] = param.default is inspect.Parameter.empty
        if repeat:
            kwargs["action"] = "append"
        kwargs["default"] = list(default) if isinstance(default, list) else default
        add_flag(p, *names, bounds=arg.bounds, give=arg.give, **kwargs)


def call(handler: Callable[..., Any], args: argparse.Namespace) -> Any:
    """handler(**the parsed values of its parameters)."""
    return handler(**{name: getattr(args, name) for name in inspect.signature(handler).parameters})


def add_settings(
    p: argparse.ArgumentParser,
    cls: type,
    names: tuple[str, ...] | None = None,
    note: str = "default from the model's decode.json",
    notes: dict[str, str] | None = None,
) -> tuple[str, ...]:
    """The flags of a config class's settings, each derived from its definition (flag, type,
    choices, doc, rule): `names`, or every setting of `cls` that has a flag. Returns the names, so
    that `given_settings` reads back the ones a user gave."""
    if names is None:
        names = tuple(n for n, f in settings_of(cls).items() if f.metadata.get("flag"))
    for name in names:
        add_setting(p, cls, name, note=(notes or {}).get(name, note))
    return names


def given_settings(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, Any]:
    """The settings given on the command line, by name (those left out keep the model's)."""
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
