"""What every inference call of a Pipeline shares, below them all: the error a request that does
not fit the model raises, lines checked as lines, batches by tokens, the note on truncated
lines, and the small interface (Loaded) the task modules (caption, classify, detect, embed) read
of a loaded model."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol


class PipelineError(ValueError):
    """The request does not fit the model (wrong kind of model, over-long input, no chat
    template)."""


class Loaded(Protocol):
    """What a task's inference call reads of a Pipeline: the model, its tokenizers and records,
    its decoding settings and search."""

    model: Any
    source_tokenizer: Any
    target_tokenizer: Any
    labels: list[str] | None
    special_tokens: dict | None

    def settings(self, **decode) -> Any: ...

    def expect(self, command: str) -> None: ...

    def batch_size(self, given: int | None = None) -> int: ...

    def search(self, sources, s, return_attention: bool = False, src_mask=None, **speech): ...


def as_lines(lines: Iterable[str]) -> list[str]:
    """A list of str from any iterable of str; one bare str is a TypeError, not a list of its
    characters."""
    if isinstance(lines, (str, bytes)):
        raise TypeError(
            f"translate takes a list of lines, not one {type(lines).__name__}: pass [text] "
            "(and take [0] of the result)"
        )
    lines = list(lines)
    for number, line in enumerate(lines, start=1):
        if not isinstance(line, str):
            raise TypeError(
                f"line {number} is {type(line).__name__}, not str: translate takes a list of str"
            )
    return lines


def truncation_note(numbers: list[int], total: int, limit: int | None, shown: int = 5) -> str:
    """'2 of 1,000 input lines had more than ... (lines 3, 17)'; the first `shown` numbers, then a
    count."""
    head = ", ".join(map(str, numbers[:shown]))
    more = f" and {len(numbers) - shown:,} more" if len(numbers) > shown else ""
    return (
        f"{len(numbers):,} of {total:,} input lines had more than the model's "
        f"max_positions={limit} tokens and were truncated to it "
        f"(line{'s' if len(numbers) > 1 else ''} {head}{more})"
    )


def batches_by_tokens(order: list[int], lengths: list[int], batch_tokens: int):
    """Consecutive groups of `order` (sorted by length) whose padded size stays within
    batch_tokens."""
    batch: list[int] = []
    for i in order:
        if batch and (len(batch) + 1) * max(lengths[i], lengths[batch[-1]]) > batch_tokens:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch
