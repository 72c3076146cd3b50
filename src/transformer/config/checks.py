"""Validation helpers shared by every config: each error names the setting, the bad value and what
would be valid (`model.d_model=500 is not divisible by ...`), with the closest key for a typo."""

from __future__ import annotations

import difflib
from dataclasses import fields
from typing import Any


class ConfigError(ValueError):
    """A configuration value is wrong; the message says which and how to fix it."""


def check_choice(name: str, value: Any, valid: tuple) -> None:
    if value not in valid:
        raise ConfigError(f"{name}={value!r} is not valid: choose one of {', '.join(map(repr, valid))}")


def check_positive(name: str, value: Any, allow_zero: bool = False) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name}={value!r} is not valid: it must be an integer {bound}")


def check_probability(name: str, value: Any) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value < 1.0:
        raise ConfigError(f"{name}={value!r} is not valid: it must be a number in [0, 1)")


def unknown_key_error(section: str, key: str, valid: list[str]) -> ConfigError:
    """An error for a mistyped key, naming the closest valid one."""
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown key {section}.{key}{hint}; valid keys: {', '.join(sorted(valid))}")


def from_values(cls: type, values: dict[str, Any], section: str) -> Any:
    """A config dataclass from a plain dict (JSON/TOML), rejecting unknown keys with the closest match."""
    valid = [f.name for f in fields(cls)]
    for key in values:
        if key not in valid:
            raise unknown_key_error(section, key, valid)
    return cls(**values)


def check_types(obj: Any, section: str | None) -> None:
    """Check each field against its annotation (str, int, float, bool, optionally `| None`);
    section prefixes the field's name in the message (None: the bare name)."""
    kinds = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,)}
    for f in fields(obj):
        value = getattr(obj, f.name)
        parts = [p.strip() for p in str(f.type).split("|")]
        if value is None and "None" in parts:
            continue
        allowed = tuple(t for p in parts if p in kinds for t in kinds[p])
        if not allowed:  # a nested config (VisionConfig): it checks itself
            continue
        ok = isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed)
        if not ok:
            want = " or ".join(p for p in parts if p != "None")
            name = f"{section}.{f.name}" if section else f.name
            raise ConfigError(f"{name}={value!r} is not valid: it must be {want}")

