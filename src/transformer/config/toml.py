"""A training config's TOML file: reading it, `--set section.key=value` overrides in order, and the
RunConfig they build (unknown sections and keys named with the closest valid one).

The flat [data] keys of earlier configs (`train_src`, `train_images`, ...) are nested as the file is
read and after each `--set` (data.nest_flat_keys), so that `--set`s apply in order, flat or nested,
and a file's flat key beside its section's key overrides it."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from .checks import ConfigError, from_values, parse_override, tomllib
from .data import DataConfig, nest_flat_keys
from .decode import DecodeConfig
from .model import ModelConfig
from .run import SECTIONS, RunConfig
from .sizing import SizingConfig
from .train import TrainConfig


def build_run_config(values: dict[str, Any], source: str = "config") -> RunConfig:
    """Build a RunConfig from nested dicts (parsed TOML), rejecting unknown sections and keys."""
    for section in values:
        if section not in SECTIONS:
            close = difflib.get_close_matches(section, SECTIONS, n=1)
            hint = f" (did you mean [{close[0]}]?)" if close else ""
            raise ConfigError(
                f"{source}: unknown section [{section}]{hint}; valid sections: "
                f"{', '.join(SECTIONS)}"
            )
        if not isinstance(values[section], dict):
            raise ConfigError(
                f"{source}: {section} must be a [{section}] table of key = value lines"
            )
    data = DataConfig.from_dict(values.get("data", {}))
    model_values = dict(values.get("model", {}))
    for key in ("vocab_size", "tgt_vocab_size"):
        if key in model_values:
            raise ConfigError(
                f"{source}: model.{key} is set by the trained tokenizer: set data.vocab_size "
                "instead"
            )
    model_values["vocab_size"] = data.vocab_size
    model = ModelConfig.from_dict(model_values)
    return RunConfig(
        model=model,
        data=data,
        train=_section(TrainConfig, values.get("train", {})),
        decode=DecodeConfig.from_dict(values.get("decode", {})),
        sizing=from_values(SizingConfig, values.get("sizing", {}), "sizing"),
    )


def _section(cls: type, values: dict[str, Any]) -> Any:
    return from_values(cls, values, {TrainConfig: "train"}[cls])


def load_config(path: str, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Read a training config (TOML), apply `section.key=value` overrides in order, validate."""
    if isinstance(overrides, str):
        raise TypeError(
            f"overrides is a list of 'section.key=value' strings, not one str: pass [{overrides!r}]"
        )
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{file} not found: pass a TOML config file (see configs/ for presets)")
    try:
        values = tomllib.loads(
            file.read_text(encoding="utf-8-sig")
        )  # a byte-order mark (Windows editors) is fine
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{file} is not valid TOML: {e}") from None
    _override(values, overrides)
    try:
        return build_run_config(values, source=str(file))
    except (ConfigError, TypeError) as e:
        message = str(e)
        raise ConfigError(
            message if message.startswith(str(file)) else f"{file}: {message}"
        ) from None


def _override(values: dict[str, Any], overrides) -> None:
    """Apply `section.key=value` overrides, in order, to parsed TOML ([data]'s flat keys nested)."""
    _nest_data(values)
    for text in overrides:
        section, key, value = parse_override(text)
        table = values.setdefault(section, {})
        *parents, last = key.split(
            "."
        )  # model.vision.patch_size: a key of the nested [model.vision] table
        for name in parents:
            table = table.setdefault(name, {})
            if not isinstance(table, dict):
                raise ConfigError(f"--set {text!r}: {section}.{name} is not a table")
        table[last] = value
        _nest_data(values)


def _nest_data(values: dict[str, Any]) -> None:
    if isinstance(values.get("data"), dict):
        values["data"] = nest_flat_keys(values["data"])


def with_overrides(config: RunConfig, overrides: list[str] | tuple[str, ...]) -> RunConfig:
    """`config` with `section.key=value` overrides applied (as --set applies them to a file)."""
    values = config.to_dict()
    _override(values, overrides)
    return build_run_config(values)
