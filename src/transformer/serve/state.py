"""What one server holds: the loaded pipeline (None while it loads), the worker thread that owns it,
the metrics; and the rules every endpoint shares: 503 until the model is ready, 400 when the model
is of the wrong family, 503 when the queue is full, 504 past the timeout, 499 when the client goes
away (its job is dropped)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Literal

import torch
from fastapi import Request

from ..config import DecodeConfig, ServeConfig
from ..decoding.generate import sample_long
from ..decoding.inputs import PipelineError
from ..decoding.pipeline import Pipeline
from ..decoding.search import lanes
from ..decoding.translate import mask_lines, unmask
from ..tasks import TASKS
from .errors import ApiError
from .metrics import Metrics
from .scheduler import Scheduler
from .streaming import disconnected
from .worker import Cancelled, Job, QueueFull, Worker

log = logging.getLogger("transformer.serve")


@dataclass
class Generation:
    """What a generation job gives: the new token ids (without </s>), and why it ended: "stop" (the
    model's </s>, or on_token asked to stop) or "length" (max_new_tokens reached)."""

    ids: list[int]
    finish_reason: Literal["stop", "length"]


OnToken = Callable[[int], bool | None]
"""Called on the worker thread with each new token id as it is chosen (</s> not included); a true
return ends the generation there, normally (finish_reason "stop": a stop string was seen)."""


class _Enough(Exception):
    """on_token asked to stop."""


class State:
    """The loaded pipeline (None while loading), the worker and the metrics."""

    def __init__(self, config: ServeConfig):
        self.config = config
        self.pipeline: Pipeline | None = None
        self.load_error: str | None = None
        self.worker: Worker | None = None
        self.metrics = Metrics()

    def start(self, pipeline: Pipeline, own_thread: bool = True) -> Worker:
        """Serve `pipeline`: its worker (continuous batching, or whole batches: config.batching)
        runs on a thread of its own, or (own_thread=False) on the thread that then calls
        worker.run() (`transformer serve`: the main thread)."""
        cfg = self.config
        on_batch = lambda stats: self.metrics.batch(stats.lines)  # noqa: E731
        if cfg.batching == "continuous":
            self.worker = Scheduler(
                pipeline.model,
                cfg.max_batch_tokens,
                cfg.max_queue,
                cfg.max_waiting_steps,
                on_batch=on_batch,
                on_admit=self.metrics.waited,
            )
        else:
            self.worker = Worker(
                self._translate, cfg.max_batch_tokens, cfg.max_wait_ms, cfg.max_queue, on_batch
            )
        if own_thread:
            self.worker.start()
        self.pipeline = pipeline
        return self.worker

    def _translate(self, lines: list[str], settings: dict):
        cut: list[int] = []
        outputs = self.pipeline.translate(
            lines, batch_tokens=self.config.max_batch_tokens, on_truncate=cut.extend, **settings
        )
        return outputs, cut

    def translation_job(self, lines: list[str], settings: dict | DecodeConfig) -> Job:
        """A job that translates lines with these decoding overrides, each line as
        Pipeline.translate does it alone; its result is (outputs, 0-based indices of the lines cut
        to the model's max_positions). Raises PipelineError/ValueError for bad settings."""
        pipeline = self.pipeline
        if isinstance(settings, DecodeConfig):  # validated by the caller: its overrides
            s, defaults = settings, asdict(pipeline.decode)
            settings = {k: v for k, v in asdict(s).items() if v != defaults[k]}
        else:
            s = pipeline.settings(**settings)
        masked, slots = mask_lines(pipeline, lines, s)  # placeholders kept (data.protect_markup)
        encoded, cut = pipeline.encode_sources(masked)  # tokenized here, not on the worker
        seqs = [lanes.Request(ids, s) for ids in encoded if ids]
        decode = pipeline.target_tokenizer.decode

        def finish(done: list[lanes.Request]) -> tuple[list, list[int]]:
            outputs: list = [[] if s.n_best > 1 else "" for _ in lines]
            it = iter(done)
            for i, ids in enumerate(encoded):
                if not ids:
                    continue  # an empty line stays empty
                seq = next(it)
                if s.n_best > 1:
                    hyps = seq.hypotheses + [[]] * (s.n_best - len(seq.hypotheses))
                    outputs[i] = [unmask(decode(h).strip(), slots, i) for h in hyps]
                else:
                    outputs[i] = unmask(decode(seq.tokens).strip(), slots, i)
            return outputs, [n - 1 for n in cut]

        return Job(
            "translate",
            lines=lines,
            key=tuple(sorted(settings.items())),
            tokens=sum(len(ids) for ids in encoded),
            seqs=seqs,
            finish=finish,
        )

    def generation_job(
        self,
        prompt_ids: list[int],
        settings: DecodeConfig,
        seed: int | None = None,
        on_token: OnToken | None = None,
    ) -> Job:
        """A job that samples up to settings.max_new_tokens new tokens after prompt_ids (already
        fitted: Pipeline.fit_prompt) with settings' temperature, top_k, top_p and guards; the same
        seed gives the same tokens (Pipeline.generate's draws). Its result is a Generation. A job
        whose `stop` is set ends with Cancelled at its next token."""
        pipeline = self.pipeline
        settings = replace(settings, beam_size=1, n_best=1)  # a language model samples
        generator = torch.Generator(device=next(pipeline.model.parameters()).device)
        if seed is None:
            generator.seed()  # a fresh seed for this generator only; global RNG untouched
        else:
            generator.manual_seed(seed)
        seq = lanes.Request(
            list(prompt_ids), settings, generator, settings.max_new_tokens, on_token=on_token
        )
        job = Job(
            "generate",
            tokens=len(prompt_ids) + settings.max_new_tokens,
            seqs=[seq],
            finish=lambda done: Generation(
                list(done[0].tokens), "length" if done[0].finish == "length" else "stop"
            ),
        )
        eos = pipeline.model.config.eos_id
        ids: list[int] = []

        def on_step(rows, tokens):  # whole-batch mode: the job runs alone
            if job.stop.is_set():
                raise Cancelled
            token = int(tokens[0])
            if token == eos:
                return
            ids.append(token)
            if on_token is not None and on_token(token):
                raise _Enough

        def run() -> Generation:
            try:
                new = sample_long(pipeline, list(prompt_ids), settings, generator, on_step)
            except _Enough:
                return Generation(list(ids), "stop")
            finish = "length" if len(new) >= settings.max_new_tokens else "stop"
            return Generation(new, finish)

        job.run = run
        return job

    @property
    def family(self) -> str:
        """What /v1/model calls the model: its task's family (transformer.tasks)."""
        return self.pipeline.task.family

    def ready(self) -> Pipeline:
        """The pipeline, or 503 while it loads (or when it failed to)."""
        if self.pipeline is None:
            if self.load_error:
                raise ApiError(
                    503, "model_failed", f"the model could not be loaded: {self.load_error}"
                )
            raise ApiError(
                503,
                "loading",
                "the model is still loading: retry in a moment",
                {"Retry-After": "1"},
            )
        return self.pipeline

    def languages(self) -> tuple[str, str] | None:
        """The (source, target) pair served: --source-lang/--target-lang when given, else the
        one the model directory records (languages.json), else None."""
        config = self.config
        if config.source_lang is not None and config.target_lang is not None:
            return config.source_lang, config.target_lang
        recorded = self.pipeline.languages if self.pipeline is not None else None
        return None if recorded is None else (recorded["source"], recorded["target"])

    def serving(self, endpoint: str) -> Pipeline:
        """The pipeline when its task is served at `endpoint`, else 400 naming its own endpoint."""
        pipeline = self.ready()
        task = pipeline.task
        if endpoint not in task.paths:
            needs = " or ".join(t.described for t in TASKS.values() if endpoint in t.paths)
            hint = f"; use {task.paths[0]}" if task.paths else "; it serves /v1/model only"
            raise ApiError(
                400,
                "wrong_endpoint",
                f"{endpoint} needs {needs} and this one is {task.described} ({task.family}){hint}",
            )
        return pipeline

    def client_gone(self) -> None:
        """A client went away before its answer, and its job was stopped: normal operation, so one
        log line and a count in /metrics, no traceback."""
        log.info("request cancelled: the client went away")
        self.metrics.cancel()

    def queue(self, job: Job) -> None:
        try:
            self.worker.submit(job)
        except QueueFull as e:
            raise ApiError(503, "overloaded", f"{e}: retry later", {"Retry-After": "1"}) from None

    async def submit(self, job: Job, request: Request):
        """Queue the job and wait for it: 503 when the queue is full, 504 past the timeout; a client
        that goes away cancels it."""
        self.queue(job)
        future = asyncio.wrap_future(job.future)
        gone = asyncio.ensure_future(disconnected(request))
        timeout = self.config.timeout
        try:
            done, _ = await asyncio.wait(
                {future, gone},
                timeout=max(0.0, job.arrived + timeout - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            gone.cancel()
        if future not in done:
            job.stop.set()
            future.cancel()
            if gone in done:
                self.client_gone()
                raise ApiError(499, "client_closed", "the client went away")
            raise ApiError(
                504, "timeout", f"the request took more than {timeout:g} s (see --timeout)"
            )
        try:
            return future.result()
        except PipelineError as e:
            raise ApiError(422, "invalid_request", str(e)) from None
