"""The cache of what runtime/ measures on this machine (bf16's speedup, the attention paths'), and
the key every measurement is filed under.

Rules:
- Cache key: CPU model name (/proc/cpuinfo, else platform.processor()), the instruction set the
  kernels may use (torch's CPU capability and ISA_LIMITS), torch version, torch.get_num_threads()
  and the shapes (d_model, d_ff, vocab_size, tokens). Any change
  re-measures; the cached speedup is judged against the current min_speedup.
- Cache file: $TRANSFORMER_CACHE_DIR/precision.json, else
$XDG_CACHE_HOME/transformer/precision.json, else ~/.cache/transformer/precision.json: {key:
{"speedup": float, "measured_at": ISO time}}, replaced atomically (transformer.files). A missing or
corrupt file reads as empty; a cache that cannot be written is skipped silently.
TRANSFORMER_PRECISION_CACHE=0 turns reading and writing off; deleting the file re-measures (e.g.
after a measurement taken while the machine was busy).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
from collections.abc import Callable
from pathlib import Path

import torch

from ..files import atomic_write_text


def default_cache_file() -> Path:
    """$TRANSFORMER_CACHE_DIR/precision.json, else the XDG cache dir, else ~/.cache/transformer."""
    if os.environ.get("TRANSFORMER_CACHE_DIR"):
        return Path(os.environ["TRANSFORMER_CACHE_DIR"]) / "precision.json"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "transformer" / "precision.json"


def cpu_name() -> str:
    """The CPU's model name: /proc/cpuinfo, else platform.processor(), else "unknown-cpu"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown-cpu"


ISA_LIMITS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")
"""Environment variables that cap the instruction set torch's, MKL's and oneDNN's kernels use (an
AVX-512 machine set to AVX2 measures as an AVX2 one): part of every cache key."""


def machine_key() -> str:
    """The CPU, the kernels' instruction set (torch's CPU capability and any ISA_LIMITS set),
    torch's version and threads: what every measured choice depends on besides its shapes."""
    limits = [f"{name}={os.environ[name]}" for name in ISA_LIMITS if os.environ.get(name)]
    isa = " ".join([torch.backends.cpu.get_cpu_capability(), *limits])
    return f"{cpu_name()} ({isa}) | torch {torch.__version__} | {torch.get_num_threads()} threads"


def cache_key(d_model: int, d_ff: int, vocab_size: int, tokens: int) -> str:
    """One line naming everything the measured speedup depends on."""
    return f"{machine_key()} | d_model={d_model} d_ff={d_ff} vocab={vocab_size} tokens={tokens}"


def read_cache(path: Path) -> dict:
    """The cache file's entries; {} when it is missing or corrupt."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing, unreadable, not UTF-8, not JSON
        return {}
    return data if isinstance(data, dict) else {}


def write_cache(path: Path, key: str, value: float, field: str = "speedup") -> None:
    """Add {field: value, "measured_at": now} under key, keeping the other entries."""
    data = read_cache(path)  # re-read: keep what another process wrote meanwhile
    data[key] = {
        field: value,
        "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # a cache that cannot be written only costs a measurement next time


def usable(speedup: object) -> bool:
    """A measured value worth caching and judging: a finite positive number."""
    return (
        isinstance(speedup, (int, float))
        and not isinstance(speedup, bool)
        and math.isfinite(speedup)
        and speedup > 0
    )


def cached_or_measured(
    key: str,
    cache_file: str | os.PathLike | None,
    measure: Callable[[], float],
    field: str = "speedup",
) -> tuple[float, str]:
    """(value, "cached: ") from the cache, else (measure(), "") with a usable (finite, positive)
    result cached; `field` names the value in the cache's entry. RuntimeError from measure
    propagates."""
    use_cache = os.environ.get("TRANSFORMER_PRECISION_CACHE", "1") != "0"
    path = Path(cache_file) if cache_file is not None else default_cache_file()
    if use_cache:
        entry = read_cache(path).get(key)
        if isinstance(entry, dict) and usable(entry.get(field)):
            return float(entry[field]), "cached: "
    value = float(measure())
    if use_cache and usable(value):
        write_cache(path, key, value, field)
    return value, ""
