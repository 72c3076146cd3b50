"""Validation helpers shared by every config: each error names the setting, the bad value and what
would be valid (`model.d_model=500 is not divisible by ...`), with the closest key for a typo."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import math
import re
import textwrap
from dataclasses import dataclass, fields
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


class ConfigError(ValueError):
    """A configuration value is wrong; the message says which and how to fix it."""


LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})*")
"""A language code as LibreTranslate's clients send it: ISO 639 (es, en, ast), optionally with a
script or region (zh-Hans, pt-BR)."""


def check_language_pair(section: str, source: str | None, target: str | None, example: str) -> None:
    """ConfigError unless SECTION.source_lang and target_lang are both unset, or two different
    language codes; `example` shows how to give them."""
    if (source is None) != (target is None):
        given, missing = ("source", "target") if target is None else ("target", "source")
        raise ConfigError(
            f"{section}.{given}_lang is set and {section}.{missing}_lang is not: give both "
            f"languages ({example}) or neither"
        )
    for side, code in (("source", source), ("target", target)):
        if code is not None and (code == "auto" or not LANGUAGE_CODE.fullmatch(code)):
            raise ConfigError(
                f"{section}.{side}_lang={code!r} is not a language code: give one such as "
                "'es', 'en' or 'pt-BR'"
            )
    if source is not None and source == target:
        raise ConfigError(
            f"{section}.source_lang and {section}.target_lang are both {source!r}: a translation "
            "model translates between two languages"
        )


def check_choice(name: str, value: Any, valid: tuple) -> None:
    if value not in valid:
        raise ConfigError(
            f"{name}={value!r} is not valid: choose one of {', '.join(map(repr, valid))}"
        )


def unknown_key_error(section: str, key: str, valid: list[str]) -> ConfigError:
    """An error for a mistyped key, naming the closest valid one."""
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown key {section}.{key}{hint}; valid keys: {', '.join(sorted(valid))}")


def from_values(cls: type, values: dict[str, Any], section: str) -> Any:
    """A config dataclass from a plain dict (JSON/TOML), rejecting unknown keys with the closest
    match."""
    valid = [f.name for f in fields(cls)]
    for key in values:
        if key not in valid:
            raise unknown_key_error(section, key, valid)
    return cls(**values)


def check_types(obj: Any, section: str | None) -> None:
    """Check each field against its annotation (str, int, float, bool, a tuple of one of them,
    optionally `| None`); section prefixes the field's name in the message (None: the bare name).
    A tuple field takes a TOML list."""
    kinds = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}

    def fits(value: Any, kind: str) -> bool:
        if kind.startswith("tuple[") and kind.endswith(", ...]"):
            inner = kind[len("tuple[") : -len(", ...]")]
            return isinstance(value, (list, tuple)) and all(fits(v, inner) for v in value)
        allowed = kinds.get(kind, ())
        return isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed)

    for f in fields(obj):
        value = getattr(obj, f.name)
        parts = [p.strip() for p in str(f.type).split("|")]
        if value is None and "None" in parts:
            continue
        known = [p for p in parts if p in kinds or p.startswith("tuple[")]
        if not known:  # a nested config (VisionConfig): it checks itself
            continue
        if not any(fits(value, p) for p in known):
            want = " or ".join(
                f"a list of {p[len('tuple[') : -len(', ...]')]}" if p.startswith("tuple[") else p
                for p in parts
                if p != "None"
            )
            name = f"{section}.{f.name}" if section else f.name
            raise ConfigError(f"{name}={value!r} is not valid: it must be {want}")


# ---- settings: each defined once, on its dataclass field ----
#
# A setting is a dataclass field: its name, its type (the annotation), its default and allowed
# values (`setting(default, ge=..., choices=...)`, a Bounds in the field's metadata) and its one-
# line doc (the docstring under the field, read by field_docs) are written once, together. Three
# readers derive from that one definition:
#   - __post_init__ validation (check_settings): `name=value is not valid: it must be ...`;
#   - the command line (transformer.cli.common): flag name, type, choices, help text, and the check
#     `--flag value: give <give>` (the phrase a user reads, carried here beside the bounds);
#   - the server's request schemas (transformer.serve.schemas): pydantic bounds and descriptions.
# Rules between fields (n_best <= beam_size) stay by hand in __post_init__.


@dataclass(frozen=True)
class Bounds:
    """The values a setting allows: numeric bounds (ge, gt, le, lt), finite numbers only, or a
    choice list."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    finite: bool = False
    choices: tuple | None = None

    def allows(self, value: Any) -> bool:
        if self.choices is not None:
            return value in self.choices
        if self == Bounds():  # no rule but the field's type
            return True
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.finite and not math.isfinite(value):
            return False
        return not (
            (self.ge is not None and not value >= self.ge)
            or (self.gt is not None and not value > self.gt)
            or (self.le is not None and not value <= self.le)
            or (self.lt is not None and not value < self.lt)
        )

    def must(self, kind: str) -> str:
        """What a valid value is, for `name=value is not valid: it must be ...`."""
        if (
            kind == "int"
            and self.le is None
            and self.lt is None
            and (self.gt, self.ge) in ((0, None), (None, 0))
        ):
            return f"an integer {'> 0' if self.gt == 0 else '>= 0'}"  # check_positive's words
        low = (
            f"[{self.ge:g}"
            if self.ge is not None
            else f"({self.gt:g}"
            if self.gt is not None
            else None
        )
        high = (
            f"{self.le:g}]"
            if self.le is not None
            else f"{self.lt:g})"
            if self.lt is not None
            else None
        )
        what = "an integer" if kind == "int" else "a finite number" if self.finite else "a number"
        if low and high:
            return f"{what} in {low}, {high}"
        if low:
            return f"{what} {'>=' if low[0] == '[' else '>'} {low[1:]}"
        if high:
            return f"{what} {'<=' if high[-1] == ']' else '<'} {high[:-1]}"
        return what


def setting(
    default: Any,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    finite: bool = False,
    choices: tuple | None = None,
    flag: str | None = None,
    give: str | None = None,
    error: str | None = None,
) -> Any:
    """A dataclass field with its allowed values; for a setting the command line takes, its flag and
    the phrase of its error there (`--flag value: give <give>`); `error`, a message of its own for a
    config value outside the bounds ("{name}={value!r} must be ..."). Its doc is the docstring under
    the field (field_docs)."""
    bounds = Bounds(ge, gt, le, lt, finite, None if choices is None else tuple(choices))
    metadata = {"bounds": bounds, "flag": flag, "give": give, "error": error}
    return dataclasses.field(default=default, metadata=metadata)


def settings_of(cls: Any) -> dict[str, dataclasses.Field]:
    """The fields of a config class (or instance) that were made by `setting`, by name."""
    return {f.name: f for f in fields(cls) if "bounds" in f.metadata}


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string under it in the class body), on one line, by name."""
    try:
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    except (OSError, TypeError):  # no source (a frozen application): no docs
        return {}
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def field_kind(f: dataclasses.Field) -> str:
    """'int', 'float', 'str' or 'bool' from the annotation (`int | None` -> 'int'); '' when
    mixed."""
    parts = [p.strip() for p in str(f.type).split("|") if p.strip() != "None"]
    return parts[0] if len(parts) == 1 else ""


def check_settings(obj: Any, section: str | None) -> None:
    """Check each setting's value against its bounds (after check_types); None passes where
    allowed."""
    for name, f in settings_of(obj).items():
        value, bounds = getattr(obj, name), f.metadata["bounds"]
        if value is None and "None" in str(f.type):
            continue
        full = f"{section}.{name}" if section else name
        if bounds.choices is not None:
            check_choice(full, value, bounds.choices)
        elif not bounds.allows(value):
            error = f.metadata["error"] or "{name}={value!r} is not valid: it must be {must}"
            raise ConfigError(error.format(name=full, value=value, must=bounds.must(field_kind(f))))


def parse_override(text: str) -> tuple[str, str, Any]:
    """'section.key=value' -> (section, key, value); the value is read as a TOML literal, else as a
    string."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise ConfigError(
            f"--set {text!r} is not valid: write section.key=value, e.g. --set train.max_steps=1000"
        )
    name, raw = text.split("=", 1)
    section, key = name.strip().split(".", 1)
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()  # a bare word or path: take it as a string
    return section, key, value
