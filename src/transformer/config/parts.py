"""The `[train.init_parts]` table: parts of a new model loaded from other model directories
(transformer.training.parts loads them), each part = "MODEL_DIR" or part = {from = "MODEL_DIR",
part = "ITS_PART"}."""

from __future__ import annotations

from typing import Any

from .checks import ConfigError


def init_parts(value: Any) -> dict[str, dict[str, str]]:
    """train.init_parts as {part: {"from": MODEL_DIR, "part": its part}}, or the one-line error."""
    fix = 'give a table of part = "MODEL_DIR" or part = {from = "MODEL_DIR", part = "ITS_PART"}'
    if not isinstance(value, dict) or not value:
        raise ConfigError(f"train.init_parts={value!r} is not valid: {fix}")
    parts = {}
    for name, source in value.items():
        if isinstance(source, str):
            source = {"from": source}
        if not (
            isinstance(source, dict)
            and set(source) <= {"from", "part"}
            and isinstance(source.get("from"), str)
            and isinstance(source.get("part", name), str)
        ):
            raise ConfigError(f"train.init_parts.{name}={source!r} is not valid: {fix}")
        parts[name] = {"from": source["from"], "part": source.get("part", name)}
    return parts
