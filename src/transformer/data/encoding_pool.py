"""Tokenizing a large corpus on every core: worker processes, each encoding its share of a chunk of
lines with one thread, while the parent reads the next chunk.

Why processes: Hugging Face `tokenizers` encodes a batch on its own threads, but turning the
encodings into Python objects (and our id lists into arrays) runs on one core under the GIL, so
its threads do not scale with the cores, while processes of one thread each do
(docs/benchmarks/training.md, "Corpora of any size").

Rules:
- Used for a corpus whose first chunk is full (data.corpus.CHUNK_LINES lines) on a machine with
  more than one usable core; else the parent encodes in-process. Either way the arrays are the
  same, byte for byte (tests/data/test_corpus_workers.py).
- Workers are plain child processes (`python -m transformer.data.encoding_pool`, not
  multiprocessing's spawn, which re-runs the parent's main script and fails where there is none:
  a notebook, `python -`). They import only numpy and tokenizers, read the tokenizers as JSON
  once, then one request a chunk on stdin (pickled {side: texts}) and answer on stdout, per side,
  the token counts (int64) and the ids laid end to end (the corpus's id dtype).
- The parent reads the next chunk while the workers encode, and sends it only once it has read
  their answers (so neither side ever blocks on a full pipe).
- Where workers cannot be started, the parent encodes in-process; a worker that dies is an error
  naming it (its traceback is on stderr).
"""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

MAX_WORKERS = 8


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def arrays(rows: Sequence[Sequence[int]], dtype) -> tuple[np.ndarray, np.ndarray]:
    """(each row's length as int64, the rows laid end to end as dtype)."""
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    return lengths, np.fromiter(itertools.chain.from_iterable(rows), dtype, int(lengths.sum()))


def _serve() -> None:
    """A worker: the tokenizers first, then requests until stdin closes."""
    import tokenizers

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    toks = {side: tokenizers.Tokenizer.from_str(text) for side, text in pickle.load(stdin).items()}
    while True:
        try:
            request = pickle.load(stdin)
        except EOFError:
            return
        answer = {}
        for side, (texts, dtype) in request.items():
            encodings = toks[side].encode_batch(texts, add_special_tokens=False)
            answer[side] = arrays([e.ids for e in encodings], np.dtype(dtype))
        pickle.dump(answer, stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()


class WorkerError(RuntimeError):
    """A tokenizing worker stopped before answering."""


class Pool:
    """Workers encoding shares of a chunk: submit(texts by side), then result() gives, per side,
    (lengths, flat ids) of the whole chunk in order."""

    def __init__(self, tokenizers_json: dict[str, str], dtypes: dict[str, np.dtype], workers: int):
        self.dtypes = {side: np.dtype(dt).name for side, dt in dtypes.items()}
        package_root = str(Path(__file__).resolve().parents[2])  # where `transformer` imports from
        env = {
            **os.environ,
            "RAYON_NUM_THREADS": "1",  # one thread a worker: the workers are the parallelism
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": os.pathsep.join(
                [package_root, *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
        self.procs: list[subprocess.Popen] = []
        try:
            for _ in range(workers):
                proc = subprocess.Popen(
                    [sys.executable, "-m", "transformer.data.encoding_pool"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=env,
                )
                self.procs.append(proc)
                self._send(proc, tokenizers_json)
        except BaseException:
            self.close()
            raise
        self.waiting = 0

    def _send(self, proc: subprocess.Popen, obj) -> None:
        try:
            pickle.dump(obj, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.flush()
        except BrokenPipeError:
            raise WorkerError(self._died(proc)) from None

    def _died(self, proc: subprocess.Popen) -> str:
        return (
            f"a tokenizing worker (pid {proc.pid}) stopped with status {proc.wait()}: see its "
            "error above"
        )

    def submit(self, texts: dict[str, list[str]]) -> None:
        """Send each worker its share of the chunk (after result() took the last answers)."""
        shares = len(self.procs)
        for k, proc in enumerate(self.procs):
            request = {}
            for side, lines in texts.items():
                step = -(-len(lines) // shares)
                request[side] = (lines[k * step : (k + 1) * step], self.dtypes[side])
            self._send(proc, request)
        self.waiting = shares

    def result(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The answers to the last submit, joined in order."""
        answers = []
        for proc in self.procs[: self.waiting]:
            try:
                answers.append(pickle.load(proc.stdout))
            except EOFError:
                raise WorkerError(self._died(proc)) from None
        self.waiting = 0
        return {
            side: (
                np.concatenate([a[side][0] for a in answers]),
                np.concatenate([a[side][1] for a in answers]),
            )
            for side in answers[0]
        }

    def close(self) -> None:
        for proc in self.procs:
            if proc.stdin:
                try:
                    proc.stdin.close()  # the worker's read ends: it exits
                except OSError:
                    pass
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()


def start(tokenizers_json: dict[str, str], dtypes: dict[str, np.dtype]) -> Pool | None:
    """A pool of one worker per usable core (at most MAX_WORKERS), or None with a single core or
    where processes cannot be started."""
    workers = min(usable_cores(), MAX_WORKERS)
    if workers < 2:
        return None
    try:
        return Pool(tokenizers_json, dtypes, workers)
    except (OSError, WorkerError):
        return None


if __name__ == "__main__":
    _serve()
