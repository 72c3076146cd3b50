"""Atomic file writes: the one helper every writer in the project uses.

Rules: a file is written under a temporary name in its own directory, given the usual
permissions (0666 less the process's umask, like `open()`), then renamed over its final
name. A reader (or a crash, even kill -9) sees the old file or the new one, never half of
one. The mode is set *after* the write: some writers (safetensors' `save_file`) replace the
temporary file with a new owner-only one, and the weights must stay readable by others.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def default_mode() -> int:
    """0666 less the umask: the mode a plain `open(path, "w")` would give a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: str | os.PathLike, write: Callable[[str], object]) -> None:
    """Call write(tmp_path), then rename onto path: readers never see a half-written file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, default_mode())  # mkstemp (and writers that replace tmp) leave it owner-only
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write UTF-8 text atomically (see atomic_write)."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
