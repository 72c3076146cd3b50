"""What the export targets share.

The rules:
- The output must not exist yet (a directory may be empty): an export never mixes with older
  files.
- Nothing half-written: the export is built beside `out` (a temporary directory, or OUT.tmp for
  GGUF's single file) and renamed onto it at the end; a failure leaves no `out`.
- What the target cannot express is one ExportError line naming the field and the way out.
- Each output says how to run it there: a directory gets a README.md whose code names it by its
  absolute path (python_path), so that it runs as pasted; a GGUF file carries its tokenizer
  and chat template, and `usage` (targets.py) gives the llama.cpp and Ollama command lines.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


class ExportError(ValueError):
    """The model cannot be exported to that target, or the output directory is not usable."""


def write_directory(out: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call write(tmp_dir) on a fresh directory beside `out`, then rename it onto `out`."""
    out = Path(out)
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        raise ExportError(
            f"{out} already exists and is not an empty directory: choose a new --out or remove it"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        write(tmp)
        os.chmod(tmp, 0o777 & ~_umask())
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def python_path(path: str | os.PathLike) -> str:
    """A Python string literal of `path` made absolute, for the code in an export's README."""
    return json.dumps(str(Path(path).absolute()), ensure_ascii=False)


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask
