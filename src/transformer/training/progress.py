"""What a run says as it goes: a progress bar on a terminal or a plain log line every log_every
steps, and metrics.jsonl brought back to a checkpoint's step when a run resumes from it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..files import atomic_write_text


class Progress:
    """tqdm on a terminal; otherwise a plain log line every log_every steps.

    The log line's tokens/s is the mean over the steps since the last line (training steps
    only, validation excluded); metrics.jsonl keeps each step's own rate.
    """

    def __init__(
        self, total: int, initial: int, log_every: int, log: Callable[[str], None], enabled: bool
    ):
        self.log, self.log_every, self.enabled = log, log_every, enabled
        self.window_tokens = self.window_s = 0.0
        self.bar = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True)

    def update(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(
                loss=f"{record['loss']:.3f}",
                lr=f"{record['lr']:.2e}",
                tok_s=f"{record['tokens_per_s']:.0f}",
            )
            return
        self.window_tokens += record["tokens"]
        self.window_s += record["tokens"] / max(record["tokens_per_s"], 1e-9)
        if record["step"] % self.log_every == 0:
            rate = self.window_tokens / max(self.window_s, 1e-9)
            self.window_tokens = self.window_s = 0.0
            self.log(
                f"step {record['step']}  loss {record['loss']:.4f}  nll {record['nll']:.4f}  "
                f"ppl {record['ppl']:.2f}  lr {record['lr']:.3e}  {rate:.0f} tok/s  "
                f"{record['elapsed_s']:.0f}s"
            )

    def write(self, text: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(text)
        else:
            self.log(text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def truncate_metrics(file: Path, step: int) -> None:
    """Drop records after `step` (written after the checkpoint we resume from), so the log reads
    as one run.

    A kill during a write can leave a torn last line (half a JSON record, or bytes cut inside a
    UTF-8 character): it is dropped, like any line that is not a record.
    """
    if not file.is_file():
        return
    keep = []
    for line in file.read_bytes().decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (
            isinstance(record, dict)
            and isinstance(record.get("step"), int)
            and record["step"] <= step
        ):
            keep.append(line)
    atomic_write_text(file, "".join(line + "\n" for line in keep))
