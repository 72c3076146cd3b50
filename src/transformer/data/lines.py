"""Line-oriented text for the commands: one output line per input line, whatever the input, and
the notes a command writes on standard error.

Rules, for files and standard input alike:
- UTF-8; a byte-order mark at the start is dropped; invalid UTF-8 is an error naming the line.
- Lines end at "\\n"; a "\\r" before it (CRLF files) is dropped; a missing final newline still
  ends the last line; empty and whitespace-only lines are lines too.
- Output lines never contain a newline (one inside a text becomes a space), so line i of the
  output always answers line i of the input.

Lines read from a file or standard input (`read_text`), written to a file (atomically, its directory
checked first: files.check_output) or to standard output (`write_text`); a note on standard error is
one line, "transformer COMMAND: note: ..." (`note`).

Standard input is read as it arrives (`stream_lines`): what is already there is taken in
chunks (batching, as for a file piped in), and when nothing more is waiting the lines so far
are handed over at once, so a person typing at a terminal, or a program writing into a pipe
that stays open, gets each answer as soon as its line is complete.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Iterator
from pathlib import Path

from ..files import atomic_write_text, check_output


class LineError(ValueError):
    """A text input that cannot be read as lines of UTF-8."""


def _decode(raw: bytes, name: str, first_line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + raw.count(b"\n", 0, e.start)
        raise LineError(
            f"{name} line {line}: invalid UTF-8; convert it to UTF-8 (e.g. with iconv)"
        ) from None


def split_lines(text: str) -> list[str]:
    """Text -> lines: BOM dropped, CRLF or LF endings, no empty line for a final newline."""
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_lines(path: str | os.PathLike, what: str = "input") -> list[str]:
    """All lines of a UTF-8 file, with errors that name the file and what it is for."""
    path = Path(path)
    if path.is_dir():
        raise LineError(f"{what} {path} is a directory: pass a text file")
    if not path.is_file():
        raise LineError(f"{what} {path} not found")
    return split_lines(_decode(path.read_bytes(), str(path), 1))


def stream_lines(
    fd: int | None = None, chunk_lines: int = 512, name: str = "standard input"
) -> Iterator[list[str]]:
    """Lists of complete lines from a file descriptor (default: standard input), as they arrive.

    Each list holds what was waiting, at most chunk_lines lines; a read that would block first
    hands over what is complete. The last list holds a final line without a newline.
    """
    if fd is None:
        sys.stdout.flush()
        fd = sys.stdin.fileno()
    pending, lines, number = b"", [], 1  # number: the line number of pending's first line
    first = True
    while True:
        while len(lines) >= chunk_lines:
            yield lines[:chunk_lines]
            lines = lines[chunk_lines:]
        if lines and not _ready(fd):
            yield lines
            lines = []
        data = os.read(fd, 1 << 16)
        if not data:
            break
        if first:
            data, first = data.removeprefix(b"\xef\xbb\xbf"), False
        *complete, pending = (pending + data).split(b"\n")
        if complete:
            text = _decode(b"\n".join(complete), name, number)
            number += len(complete)
            lines.extend(line.removesuffix("\r") for line in text.split("\n"))
    if pending:
        lines.append(_decode(pending, name, number).removesuffix("\r"))
    while lines:
        yield lines[:chunk_lines]
        lines = lines[chunk_lines:]


def _ready(fd: int) -> bool:
    """Whether a read of fd would return at once (data or end of file)."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):  # no select on this kind of file (Windows pipes): read on
        return True


def format_lines(lines: list[str]) -> str:
    """Lines -> text, one "\\n"-terminated line each, newlines inside a line made spaces."""
    return "".join(
        line.replace("\r\n", " ").replace("\n", " ").replace("\r", " ") + "\n" for line in lines
    )


def read_text(path: str | None, what: str) -> list[str]:
    """Lines of a UTF-8 file, or all of standard input when path is None or '-'."""
    if path in (None, "-"):
        return [line for chunk in stream_lines() for line in chunk]
    return read_lines(path, what)


def write_text(path: str | None, lines: list[str]) -> None:
    """Lines to a file (atomically) or to standard output when path is None or '-', one line
    each."""
    if path in (None, "-"):
        sys.stdout.write(format_lines(lines))
        sys.stdout.flush()
        return
    check_output(path)
    atomic_write_text(path, format_lines(lines))


def note(command: str, text: str) -> None:
    """A note of `transformer COMMAND` on standard error, one line."""
    print(f"transformer {command}: note: {text}", file=sys.stderr, flush=True)
