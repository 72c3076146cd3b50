"""Continuous (iteration-level) batching for the server: the worker keeps running batches on the KV
cache, and after every decoding step the requests that finished leave (their answers are sent at
once) and queued ones join (Orca, OSDI 2022; TGI's router; vLLM).

The rules:
- A translation job is one request per line, a generation job one request; both are
  decoding.search.lanes.Request objects built on the event loop (tokenized there), so the worker
  only decodes. Requests decoded the same way share a lane (search.continuous.lane_key: greedy and
  sampling share one; each beam search setting has its own); the worker steps every lane in turn.
- When: at once when nothing runs; while requests run, when at least as many requests wait as run,
  or after max_waiting_steps steps without an admission (an admission's encoder pass holds up
  the running batch: TGI's waiting_served_ratio and max_waiting_tokens).
- Admission: between steps, queued jobs join in arrival order while the running requests' tokens
  (a translation line's source tokens; a generation's prompt plus its max_new_tokens) stay within
  max_batch_tokens; a job too big for what is left waits for room (never skipped: no
  starvation), and one job is always admitted when nothing runs. Newcomers are encoded together,
  in groups by length within max_batch_tokens as offline (Pipeline.translate), then join.
- A job is answered when its last request finishes; a job nobody waits for any more (client gone,
  timeout) leaves at the next step. Other jobs (attention, classification) run alone between
  steps.
- Each request's output is the one it gets decoded alone (decoding/search/continuous.py), whatever
  joined or left around it.
"""

from __future__ import annotations

import time

from ..decoding.inputs import batches_by_tokens
from ..decoding.search.continuous import lane_key, new_lane
from ..decoding.search.lanes import Lane, Request
from .worker import BatchStats, Cancelled, Job, Worker


class Scheduler(Worker):
    """A Worker that decodes translation and generation jobs by continuous batching (module rules).
    `model` is the model the jobs' requests are decoded with."""

    def __init__(
        self,
        model,
        max_batch_tokens: int,
        max_queue: int,
        max_waiting_steps: int = 8,
        on_batch=None,
        on_admit=None,
    ):
        super().__init__(None, max_batch_tokens, 0.0, max_queue, on_batch)
        self.model = model
        self.max_waiting_steps = max_waiting_steps
        self._since_admission = 0  # steps
        self._on_admit = on_admit
        self.lanes: dict[tuple, Lane] = {}
        self._owner: dict[int, Job] = {}  # id(seq) -> its job
        self._left: dict[Job, int] = {}  # requests of a job still decoding

    @property
    def running(self) -> int:
        """Requests being decoded (rows of the running batches: a beam request counts once)."""
        return sum(len(lane) for lane in list(self.lanes.values()))  # /metrics reads it too

    @property
    def running_tokens(self) -> int:
        return sum(job.tokens for job in self._left)

    def _take(self) -> tuple[list[Job], Job | None] | None:
        """The decoding jobs to admit now, and one other job to run alone (or None); None when
        stopping. Waits while there is nothing to do."""
        with self._cond:
            if not self._wait(busy=self.running > 0):
                return None
            admit, used = [], self.running_tokens
            running = self.running
            waiting = sum(len(job.seqs) or 1 for job in self._jobs if job.finish is not None)
            due = (
                not running or waiting >= running or self._since_admission >= self.max_waiting_steps
            )
            while due and self._jobs and self._jobs[0].finish is not None:
                job = self._jobs[0]
                if job.cancelled:
                    self._jobs.popleft().future.cancel()
                    continue
                if (admit or running) and used + job.tokens > self.max_batch_tokens:
                    break  # it waits for room; later jobs wait behind it
                admit.append(self._jobs.popleft())
                used += job.tokens
            other = None
            if not admit and self._jobs and self._jobs[0].finish is None:
                other = self._jobs.popleft()
            return admit, other

    def _loop(self) -> None:
        try:
            while True:
                taken = self._take()
                if taken is None:
                    return
                admit, other = taken
                start = time.monotonic()
                self.busy = True
                try:
                    if other is not None and other.future.set_running_or_notify_cancel():
                        self._run_one(other)
                    self._admit(admit)
                    lines = self._step()
                finally:
                    self.busy = False
                if self._on_batch is not None and lines:
                    self._on_batch(BatchStats(lines, len(self._left), time.monotonic() - start))
        finally:
            self._fail_running(RuntimeError("the server is shutting down"))

    def _admit(self, jobs: list[Job]) -> None:
        if jobs:
            self._since_admission = 0
        now = time.monotonic()
        groups: dict[tuple, list[Request]] = {}
        for job in jobs:
            if not job.future.set_running_or_notify_cancel():
                continue
            if self._on_admit is not None:
                self._on_admit(now - job.arrived)
            self._left[job] = len(job.seqs)
            if not job.seqs:  # nothing to decode (empty lines only)
                self._end(job)
                continue
            for seq in job.seqs:
                seq.cancelled = lambda job=job: job.cancelled
                self._owner[id(seq)] = job
                groups.setdefault(lane_key(seq.settings), []).append(seq)
        for key, seqs in groups.items():
            lane = self.lanes.get(key) or new_lane(self.model, seqs[0].settings)
            self.lanes[key] = lane
            lengths = [len(seq.context or seq.source) for seq in seqs]
            order = sorted(range(len(seqs)), key=lengths.__getitem__)
            for batch in batches_by_tokens(order, lengths, self.max_batch_tokens):
                newcomers = [seqs[i] for i in batch]
                self._run_lane(lane, lambda lane=lane, newcomers=newcomers: lane.admit(newcomers))

    def _step(self) -> int:
        """One step of every lane; returns the rows decoded."""
        rows = 0
        self._since_admission += 1
        for key, lane in list(self.lanes.items()):
            rows += lane.rows
            self._run_lane(lane, lane.step)
            if not len(lane):
                del self.lanes[key]
        return rows

    def _run_lane(self, lane: Lane, call) -> None:
        """Run a lane's admit or step, and answer the jobs whose last request finished; an error
        fails every job in the lane, and the lane starts afresh."""
        try:
            done = call()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting requests
            jobs = {self._owner.get(id(seq)) for seq in lane.seqs + lane.rejoin}
            for key, other in list(self.lanes.items()):
                if other is lane:
                    del self.lanes[key]
            for job in jobs - {None}:
                self._end(job, error=e)
            return
        for seq in done:
            job = self._owner.pop(id(seq), None)
            if job is None or job not in self._left:
                continue
            self._left[job] -= 1
            if self._left[job] == 0:
                self._end(job)

    def _end(self, job: Job, error: BaseException | None = None) -> None:
        self._left.pop(job, None)
        for seq in job.seqs:
            self._owner.pop(id(seq), None)
        if job.future.done():
            return
        if error is None and any(seq.finish == "cancelled" for seq in job.seqs):
            error = Cancelled()
        if error is not None:
            job.future.set_exception(error)
            return
        try:
            result = job.finish(job.seqs)
        except BaseException as e:  # noqa: BLE001
            job.future.set_exception(e)
        else:
            job.future.set_result(result)

    def _fail_running(self, error: BaseException) -> None:
        for job in list(self._left):
            self._end(job, error=error)
        self.lanes.clear()
