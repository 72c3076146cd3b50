"""Atomic file writes, the one helper every writer in the project uses, the checks of an output
file a user names (made before the work, not after it), and one owner per directory (`own`: a
trainer, a sweep or an average holds the directory it writes).

Rules: a file is written under a temporary name in its own directory, given the usual
permissions (0666 less the process's umask, like `open()`), then renamed over its final
name. A reader (or a crash, even kill -9) sees the old file or the new one, never half of
one. The mode is set *after* the write: some writers (safetensors' `save_file`) replace the
temporary file with a new owner-only one, and the weights must stay readable by others.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; `own` runs unguarded there
    fcntl = None  # type: ignore[assignment]


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


# ---- an output file a user names ----------------------------------------------------------------

PICTURE_FORMATS = ("png", "svg", "pdf")
"""The formats a picture (viz/'s figures) is written in, named by its file's suffix."""


class OutputPathError(ValueError):
    """An output file a user named cannot be written there; the message says why in one line."""


def check_output(path: str) -> None:
    """An output file's directory must exist: checked before the work, not after it."""
    if Path(path).is_dir():
        raise OutputPathError(f"--output {path} is a directory: give a file name")
    if not Path(path).resolve().parent.is_dir():
        raise OutputPathError(
            f"--output {path}: the directory {Path(path).parent} does not exist; create it first"
        )


def check_picture(flag: str, path: str, what: str, dir_exists: bool = True) -> None:
    """A figure's file name: .png, .svg or .pdf (and, with dir_exists, in a directory that
    exists)."""
    if Path(path).suffix[1:].lower() not in PICTURE_FORMATS:
        raise OutputPathError(
            f"{flag} {path}: {what} is written as .png, .svg or .pdf; give a file name with one of "
            "those"
        )
    if dir_exists and not Path(path).resolve().parent.is_dir():
        raise OutputPathError(
            f"{flag} {path}: the directory {Path(path).parent} does not exist; create it first"
        )


# ---- one owner per directory ------------------------------------------------------------------

OWNER_FILE = ".owner"
"""The lock file a directory's writer holds: `<dir>/.owner`, one JSON line naming it."""


_ATTEMPTS = 5
_HELD: set[str] = set()
"""The directories this process owns (real paths)."""


class DirectoryInUse(OSError):
    """Another live process owns the directory; the message names it in one line."""


def _record(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}


def _holder(record: dict) -> str:
    if not record.get("pid"):
        return "another process"
    here = record.get("host") in (None, socket.gethostname())
    host = "" if here else f" on {record['host']}"
    what = ", ".join(str(record[k]) for k in ("command", "since") if record.get(k))
    return f"process {record['pid']}{host}" + (f" ({what})" if what else "")


def owner(directory: str | os.PathLike) -> tuple[Path, dict] | None:
    """The folder (`directory` or one of its parents) that a live process other than this one
    owns, with that owner's record; None when there is none."""
    if fcntl is None:
        return None
    path = Path(directory).absolute()
    for folder in (path, *path.parents):
        lock = folder / OWNER_FILE
        if not lock.is_file():
            continue
        record = _record(lock)
        if record.get("pid") == os.getpid():
            continue
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return folder, record
        finally:
            os.close(fd)
    return None


def _lock(lock: Path, directory: Path) -> int:
    """An open descriptor of `lock`, flock-ed exclusively; DirectoryInUse when another holds it."""
    busy = 0
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, default_mode())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # owned; or `owner()` peeking at it this instant: try again
            os.close(fd)
            busy += 1
            if busy == _ATTEMPTS:
                raise DirectoryInUse(
                    f"{directory} is in use by {_holder(_record(lock))}: wait for it to "
                    "finish, or choose another directory"
                ) from None
            time.sleep(0.05)
            continue
        try:  # the owner before may have removed the file between our open and flock: lock anew
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


@contextmanager
def own(directory: str | os.PathLike, command: str, log: Callable[[str], None] = print):
    """Hold `directory` for this process while the block runs: one writer at a time.

    The lock is `<directory>/.owner`, locked with flock (the kernel lets go of it when the process
    dies, even by kill -9) and holding {"pid", "host", "command", "since"}. Another live owner
    raises DirectoryInUse naming it; a lock left by a process that is gone is taken over, with a
    note through `log`. A directory inside one another process owns is refused too (a trainer's
    run directory is its own to write). The directory is created if missing (and removed again if
    the block leaves it empty); the lock file is removed on exit.
    Where the platform has no flock (Windows), the block runs unguarded.
    """
    directory = Path(directory)
    key = os.path.realpath(directory)
    if fcntl is None or key in _HELD:  # no flock here; or this process holds it already (the demo
        yield  # owns its run directory, and its trainer asks again)
        return
    outer = owner(directory.parent)  # a directory inside another's is the other's to write
    if outer is not None:
        raise DirectoryInUse(
            f"{directory} is inside {outer[0]}, in use by {_holder(outer[1])}: wait for it to "
            "finish, or choose a directory outside it"
        )
    for folder in (directory, *directory.parents):
        if folder.exists() and not folder.is_dir():
            where = "" if folder == directory else f"{directory}: "
            raise NotADirectoryError(f"{where}{folder} is a file: pass a directory")
    made = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    lock = directory / OWNER_FILE
    try:
        fd = _lock(lock, directory)
    except DirectoryInUse:
        if made:
            _remove_if_empty(directory)
        raise
    try:
        left = _record(lock)
        if left.get("pid"):
            log(f"note: {directory}: taking over from {_holder(left)}, which is no longer running")
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        _HELD.add(key)
        yield
    finally:
        _HELD.discard(key)
        Path(lock).unlink(missing_ok=True)  # while still holding it: a waiter re-checks the inode
        os.close(fd)
        if made:  # nothing half-made: a directory this call made and the block left empty goes
            _remove_if_empty(directory)


def clear(directory: str | os.PathLike) -> None:
    """Remove what `directory` holds but its owner's lock (a fresh start inside an owned one)."""
    for entry in Path(directory).iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        elif entry.name != OWNER_FILE:
            entry.unlink()


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass
