"""A command's flags derived from its handler (litgpt's shape): the handler is a plain function with
typed arguments, and its parser is read off its signature.

    def copy(out: OUT, n_train: Annotated[int, Arg("training pairs", Bounds(ge=1), "...")] = 20000)

gives `--out OUT` (required: no default) and `--n-train N` (int, default 20000, checked against its
bounds before the command runs: `--n-train 0: give ...`). The rules, one per annotation:

    str / int / float            a flag of that type; required when the parameter has no default
    X | None = None              optional: None when not given
    Literal["a", "b"]            choices
    list[X]                      repeatable (action="append"; positional: one or more); each
                                 value checked
    bool = False / bool = True   --name (store_true) / --no-name (store_false)
    Annotated[X, Arg(...)]       its help text (the one-line doc of the parameter), and where
                                 needed its rule (bounds and the phrase after "give"), another flag
                                 spelling, a metavar, or positional=True
    Annotated[X, Setting(C)]     the setting of that name on config class C: its flag, type,
                                 choices, doc and rule are derived from its definition
    Annotated[dict, Settings(C, names)]
                                 a group of C's settings (every flagged one when names is None):
                                 the handler gets those given on the command line, by name
    a dataclass of such fields   its fields' flags, in place (common.ModelRun: the model directory,
                                 --device, --threads, --precision); the handler gets the dataclass

The flag is `--` + the name with dashes; the help ends with "(default D)" unless the text says it.
Settings defined on a config dataclass (config.checks.setting) are not retyped here: `add_settings`
derives their flags from their definitions (add_setting), so the command line, TOML files
and the server accept the same values.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from ..config import Bounds, settings_of
from ..config.checks import field_docs, field_kind

TYPES = {"int": int, "float": float, "str": str}


def add_flag(
    p: argparse.ArgumentParser,
    *names: str,
    bounds: Bounds | None = None,
    give: str | None = None,
    **kwargs: Any,
) -> argparse.Action:
    """p.add_argument(*names, **kwargs); with bounds, a given value outside them is refused with
    `NAME VALUE: give GIVE` before the command runs (check_flags)."""
    action = p.add_argument(*names, **kwargs)
    if bounds is not None:
        rules = p.get_default("flag_rules")
        if rules is None:
            rules = []
            p.set_defaults(flag_rules=rules)
        rules.append((action.dest, names[0], bounds, give))
    return action


def add_setting(
    p: argparse.ArgumentParser,
    cls: type,
    name: str,
    help: str | None = None,
    default: Any = None,
    note: str | None = None,
) -> argparse.Action:
    """The flag of setting `name` of config class `cls`, derived from its definition: flag name,
    dest, type, choices, help (its doc, or `help`, + `note`) and its check. The default is None (the
    model's own settings apply) unless given."""
    f = settings_of(cls)[name]
    meta, bounds = f.metadata, f.metadata["bounds"]
    text = help or field_docs(cls).get(name, "")
    if note:
        text = f"{text.rstrip('.')} ({note})"
    kwargs: dict[str, Any] = {"dest": name, "default": default, "help": text.replace("%", "%%")}
    if field_kind(f) == "bool":  # the flag gives the other value: --no-keep-markup
        return add_flag(p, meta["flag"], action="store_const", const=not f.default, **kwargs)
    if bounds.choices is not None:
        kwargs["choices"] = list(bounds.choices)
    else:
        kwargs["type"] = TYPES[field_kind(f)]
    rule = None if bounds.choices is not None or bounds == Bounds() else bounds
    return add_flag(p, meta["flag"], bounds=rule, give=meta["give"], **kwargs)


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
    several: bool = False
    """A list flag: several values after one flag too (`--image a.png b.png`, action "extend")."""
    group: str | None = None
    """The title of the --help section it is listed in (default: options)."""


@dataclass(frozen=True)
class Setting:
    """A parameter that is the setting of the same name on config class `cls` (its flag derived from
    its definition; default None: the model's own value applies); `note` follows its doc."""

    cls: type
    note: str | None = None
    group: str | None = None


@dataclass(frozen=True)
class Settings:
    """A parameter that takes a group of `cls`'s settings (every one with a flag when `names` is
    None), as a dict of those given; `note` (or `notes[name]`) follows each doc."""

    cls: type
    names: tuple[str, ...] | None = None
    note: str | None = "default from the model's decode.json"
    notes: dict[str, str] | None = None
    group: str | None = None
    """The title of the --help section they are listed in (default: options)."""

    def chosen(self) -> tuple[str, ...]:
        """The settings' names."""
        if self.names is not None:
            return self.names
        return tuple(n for n, f in settings_of(self.cls).items() if f.metadata.get("flag"))


def _section(p: argparse.ArgumentParser, title: str | None):
    """The parser, or its argument group of this title (made on first use)."""
    if title is None:
        return p
    found = next((g for g in p._action_groups if g.title == title), None)
    return found or p.add_argument_group(title)


def flag_of(name: str) -> str:
    """A parameter's flag: n_train -> --n-train."""
    return "--" + name.replace("_", "-")


def _parts(annotation: Any) -> tuple[Any, Arg | Setting | Settings | None]:
    """(the type, its Arg, Setting or Settings) of Annotated[type, ...]; (the type, None)
    otherwise."""
    if typing.get_origin(annotation) is Annotated:
        base, *extras = typing.get_args(annotation)
        return base, next((e for e in extras if isinstance(e, Arg | Setting | Settings)), None)
    return annotation, None


def _markers(handler: Callable[..., Any]) -> dict[str, tuple[inspect.Parameter, Any, Any]]:
    """Each parameter of `handler` with its type and its marker, by name."""
    hints = typing.get_type_hints(handler, include_extras=True)
    params = inspect.signature(handler).parameters
    return {name: (param, *_parts(hints[name])) for name, param in params.items()}


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


def add_arguments(
    p: argparse.ArgumentParser, handler: Callable[..., Any], part: str = "all"
) -> None:
    """One argument per parameter of `handler`, in order (see the module's rules); a dataclass
    parameter's positional arguments in its place, its flags after the others (where to run reads
    best last). `part`: "all", "positional" or "flags"."""
    later = []
    for name, (param, base, arg) in _markers(handler).items():
        if dataclasses.is_dataclass(base):
            add_arguments(p, base, "positional")
            later.append(base)
            continue
        positional = isinstance(arg, Arg) and arg.positional
        if part != "all" and positional != (part == "positional"):
            continue
        if arg is None:
            raise TypeError(f"{handler.__name__}({name}): annotate it Annotated[type, Arg(help)]")
        if isinstance(arg, Setting):
            add_setting(_section(p, arg.group), arg.cls, name, note=arg.note)
            continue
        if isinstance(arg, Settings):
            add_settings(_section(p, arg.group), arg.cls, arg.chosen(), arg.note, arg.notes)
            continue
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
            _section(p, arg.group).add_argument(flag, dest=name, action=action, **kwargs)
            continue
        if choices is not None:
            kwargs["choices"] = list(choices)
        else:
            kwargs["type"] = kind
        required = param.default is inspect.Parameter.empty
        if arg.positional:
            names: tuple[str, ...] = (name,)
            if repeat:
                kwargs["nargs"] = "+" if required else "*"
            elif not required:
                kwargs["nargs"] = "?"
        else:
            names = (arg.flag or flag_of(name),)
            kwargs["dest"] = name
            kwargs["required"] = required
            if repeat:
                kwargs["action"] = "extend" if arg.several else "append"
                if arg.several:
                    kwargs["nargs"] = "+"
        kwargs["default"] = list(default) if isinstance(default, list) else default
        add_flag(_section(p, arg.group), *names, bounds=arg.bounds, give=arg.give, **kwargs)
    for base in later:
        add_arguments(p, base, "flags")


def values(handler: Callable[..., Any], args: argparse.Namespace) -> dict[str, Any]:
    """The parsed values of `handler`'s parameters, by name (a Settings group: a dict of those
    given)."""
    found = {}
    for name, (_, base, marker) in _markers(handler).items():
        if dataclasses.is_dataclass(base):
            found[name] = base(**values(base, args))
        elif isinstance(marker, Settings):
            found[name] = given_settings(args, marker.chosen())
        else:
            found[name] = getattr(args, name)
    return found


def call(handler: Callable[..., Any], args: argparse.Namespace) -> Any:
    """handler(**the parsed values of its parameters)."""
    return handler(**values(handler, args))


def command(
    sub: argparse._SubParsersAction, name: str, handler: Callable[..., Any], **kwargs: Any
) -> argparse.ArgumentParser:
    """The parser of command `name` (kwargs: help, description, ...), derived from `handler`,
    which runs it."""
    p = sub.add_parser(name, **kwargs)
    add_arguments(p, handler)
    p.set_defaults(func=lambda args: call(handler, args))
    return p


def add_settings(
    p: argparse.ArgumentParser,
    cls: type,
    names: tuple[str, ...] | None = None,
    note: str | None = "default from the model's decode.json",
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
