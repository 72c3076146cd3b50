"""The thread that owns the model: a queue of jobs, and whole-batch dynamic batching of translation
requests (`--batching whole`; scheduler.py's Scheduler, the default, builds continuous batching on
this queue and thread).

The event loop never touches the model. Each HTTP request becomes a `Job` in the queue; one
worker thread takes jobs in arrival order and runs them. Translation jobs are batched: after
the first one arrives the worker waits up to `max_wait_ms` for more, then decodes together every
queued translation job with the same decoding settings, up to `max_batch_tokens` source tokens,
(after a batch, the window opens when it ends),
through `Pipeline.translate` (which sorts and pads by length as offline), and hands each job
its own lines. Other jobs (generation, attention) run one at a time.

A job's future is cancelled when its client goes away or its time runs out; a cancelled job still
in the queue is dropped without decoding, and a generation being streamed stops at its next
token (`Job.cancelled` is checked from the decoding loop).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from ..runtime.onednn import set_row_buckets


class QueueFull(Exception):
    """The queue holds max_queue jobs already."""


class Cancelled(Exception):
    """Raised inside the decoding loop to stop a job nobody waits for any more."""


@dataclass(eq=False)
class Job:
    kind: str
    """"translate" (batched with others of the same `key`), or anything else (run alone)."""
    run: Callable[[], object] | None = None
    """For a job run alone: what to call on the worker thread."""
    lines: list[str] = field(default_factory=list)
    key: tuple = ()
    """Translation settings as a hashable tuple: only jobs with equal keys share a batch."""
    tokens: int = 0
    """Source tokens, for max_batch_tokens."""
    seqs: list = field(default_factory=list)
    """Continuous batching (scheduler.py): the job's requests (decoding.search.lanes.Request), each
    decoded in a running batch; `finish(seqs)` turns them into the job's result once all are done.
    A job with seqs and no lines is a generation; with lines, a translation."""
    finish: Callable[[list], object] | None = None
    future: Future = field(default_factory=Future)
    arrived: float = field(default_factory=time.monotonic)
    stop: threading.Event = field(default_factory=threading.Event)
    """Set when nobody waits for the result any more: the decoding loop checks it."""

    @property
    def cancelled(self) -> bool:
        return self.future.cancelled() or self.stop.is_set()


@dataclass
class BatchStats:
    """What the worker reports per batch: the metrics module turns it into histograms."""

    lines: int
    jobs: int
    seconds: float


class Worker:
    """One thread that owns the model. submit() is safe from any thread."""

    def __init__(
        self,
        translate: Callable[[list[str], dict], tuple[list, list[int]]],
        max_batch_tokens: int,
        max_wait_ms: float,
        max_queue: int,
        on_batch: Callable[[BatchStats], None] | None = None,
    ):
        self._translate = translate
        self.max_batch_tokens = max_batch_tokens
        self.max_wait = max_wait_ms / 1000
        self.max_queue = max_queue
        self._on_batch = on_batch
        self._jobs: deque[Job] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._alive: Callable[[], bool] | None = None
        self._free_since = 0.0
        self.busy = False
        self._thread = threading.Thread(
            target=self._serve, name="transformer-serve-worker", daemon=True
        )

    def start(self) -> None:
        """Run the jobs on a thread of the worker's own (see run for why `transformer serve` does
        not)."""
        self._thread.start()

    def run(self, alive: Callable[[], bool] | None = None) -> None:
        """Run the jobs on the calling thread until stop() (or until alive() turns false).

        `transformer serve` calls this on the main thread: torch's OpenMP thread pool wakes slowly
        for a thread other than the main one (docs/benchmarks/serving.md, "`transformer serve`
        under load")."""
        self._alive = alive
        self._serve()

    def _serve(self) -> None:
        # A server meets batches of every shape: oneDNN's linear layers see a few row buckets
        # instead, so it builds a few kernels, not one per shape (model/linear.py).
        set_row_buckets(True)
        self._loop()

    def stop(self, timeout: float | None = None) -> None:
        """Finish the job in hand, fail the ones still queued, and end the loop (joining its thread
        if it has one)."""
        with self._cond:
            self._stopping = True
            left = list(self._jobs)
            self._jobs.clear()
            self._cond.notify_all()
        for job in left:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(RuntimeError("the server is shutting down"))
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def depth(self) -> int:
        """Jobs waiting (not counting the one being decoded, nor those nobody waits for any
        more)."""
        return sum(not job.cancelled for job in list(self._jobs))

    def submit(self, job: Job) -> Future:
        with self._cond:
            if self._stopping:
                raise QueueFull("the server is shutting down")
            if len(self._jobs) >= self.max_queue:  # those nobody waits for any more make room
                self._jobs = deque(job for job in self._jobs if not job.cancelled)
            if len(self._jobs) >= self.max_queue:
                raise QueueFull(f"the queue holds {self.max_queue} requests already")
            self._jobs.append(job)
            self._cond.notify_all()
        return job.future

    def _wait(self, busy: bool = False) -> bool:
        """With the lock held: drop the queued jobs nobody waits for, and wait until there is a job
        (or `busy`, work in hand); False when stopping."""
        while True:
            while self._jobs and self._jobs[0].cancelled:
                self._jobs.popleft().future.cancel()  # nobody waits: never decoded
            if self._stopping or (self._alive is not None and not self._alive()):
                return False
            if self._jobs or busy:
                return True
            self._cond.wait(0.5)  # a timeout, so that signals and alive() are seen

    def _next(self) -> list[Job] | None:
        """The next batch (or single job) to run; None when stopping."""
        with self._cond:
            if not self._wait():
                return None
            first = self._jobs[0]
            if first.kind != "translate":
                return [self._jobs.popleft()]
            # Wait for company until max_wait after the first job arrived or after the previous
            # batch ended, whichever is later, or until the batch is full. (After a batch, its
            # clients send their next requests at once: waiting a moment lets them join the requests
            # that queued meanwhile, instead of forming a second, smaller batch.)
            opens = max(first.arrived, self._free_since)
            while not self._stopping:
                left = opens + self.max_wait - time.monotonic()
                if left <= 0 or self._tokens_like(first) >= self.max_batch_tokens:
                    break
                self._cond.wait(left)
            batch, tokens = [], 0
            for job in list(self._jobs):
                if job.kind != "translate" or job.key != first.key or job.cancelled:
                    continue
                if batch and tokens + job.tokens > self.max_batch_tokens:
                    break
                batch.append(job)
                tokens += job.tokens
            for job in batch:
                self._jobs.remove(job)
            return batch

    def _tokens_like(self, first: Job) -> int:
        return sum(j.tokens for j in self._jobs if j.kind == "translate" and j.key == first.key)

    def _loop(self) -> None:
        while True:
            batch = self._next()
            if batch is None:
                return
            batch = [job for job in batch if job.future.set_running_or_notify_cancel()]
            if not batch:
                continue
            self.busy = True
            start = time.monotonic()
            try:
                if batch[0].kind == "translate":
                    self._run_translate(batch)
                else:
                    self._run_one(batch[0])
            finally:
                self.busy = False
                self._free_since = time.monotonic()
            if self._on_batch is not None:
                self._on_batch(
                    BatchStats(
                        sum(len(j.lines) for j in batch) or len(batch),
                        len(batch),
                        time.monotonic() - start,
                    )
                )

    def _run_one(self, job: Job) -> None:
        try:
            result = job.run()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting request
            job.future.set_exception(e)
        else:
            job.future.set_result(result)

    def _run_translate(self, batch: list[Job]) -> None:
        lines = [line for job in batch for line in job.lines]
        try:
            outputs, cut = self._translate(lines, dict(batch[0].key))
        except BaseException as e:  # noqa: BLE001
            for job in batch:
                job.future.set_exception(e)
            return
        start = 0
        for job in batch:
            end = start + len(job.lines)
            mine = [
                n - 1 - start for n in cut if start < n <= end
            ]  # cut holds 1-based line numbers
            job.future.set_result((outputs[start:end], mine))
            start = end
