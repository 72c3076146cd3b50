"""A sweep's plan (sweep.json): the config, the grid of variants and how each is run and scored;
read by sweep.py (which runs it) and sweep_results.py (which tabulates it)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..config import ConfigError, parse_override


class SweepError(ValueError):
    """A sweep cannot start or continue as asked."""


PLAN_FILE = "sweep.json"


@dataclass(frozen=True)
class Plan:
    config: str
    grid: list[list[str]]
    """[[key, value, value, ...], ...]: each key's values as TOML literals."""
    zip: bool = False
    minutes: float | None = None
    repeats: int = 1
    average: int = 3
    sets: list[str] = field(default_factory=list)
    test: list[str] = field(default_factory=list)
    at: list[int] = field(default_factory=list)
    """Steps at which each run is scored too (a learning curve from one run): the average of the
    `average` checkpoints up to that step; empty: the end of the run only."""

    def variants(self) -> list[list[tuple[str, str]]]:
        """The grid's variants, each a list of (key, value) changes, in a fixed order."""
        lists = [[(key, value) for value in values] for key, *values in self.grid]
        if not lists:
            return [[]]
        if self.zip:
            return [list(v) for v in zip(*lists, strict=True)]
        return [list(v) for v in itertools.product(*lists)]


def parse_grid(texts: Sequence[str], zip_: bool) -> list[list[str]]:
    """--grid KEY=V1,V2,... -> [[KEY, V1, V2, ...], ...]; each value checked as a --set would be.

    Values are split at commas outside quotes and brackets (a TOML string or list may hold
    commas)."""
    grid, keys = [], set()
    for text in texts:
        key, sep, rest = text.partition("=")
        key = key.strip()
        if not sep or not key or not rest.strip():
            raise SweepError(
                f"--grid {text!r}: write KEY=VALUE1,VALUE2,... (e.g. --grid model.n_heads=1,4,8)"
            )
        if key in keys:
            raise SweepError(f"--grid {key} is given twice: put all its values in one --grid")
        keys.add(key)
        values = _split_values(rest)
        if any(not v for v in values):
            raise SweepError(f"--grid {text!r} has an empty value: write KEY=VALUE1,VALUE2,...")
        if len(set(values)) != len(values) and not zip_:
            raise SweepError(
                f"--grid {text!r} repeats a value: use --repeats for several runs of one variant"
            )
        for value in values:
            try:
                parse_override(f"{key}={value}")
            except (ConfigError, ValueError) as e:
                raise SweepError(f"--grid {key}: {e}") from None
        grid.append([key, *values])
    if zip_ and len({len(g) for g in grid}) > 1:
        sizes = ", ".join(f"{g[0]} has {len(g) - 1}" for g in grid)
        raise SweepError(
            f"--zip pairs the grids' values one to one, so each needs as many values: {sizes}"
        )
    return grid


def _split_values(text: str) -> list[str]:
    values, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            values.append(text[start:i].strip())
            start = i + 1
    values.append(text[start:].strip())
    return values
