"""The training loop (§5), read top to bottom in `Loop.run`: while the budget lasts, one step,
then what comes after it (the log line, validation, a checkpoint); at the end a last validation,
checkpoint and the model directories.

One step (`Loop.step`): the epoch's next `accumulate x processes` batches; the learning rate
(schedule.py) and late dropout (dropout.py) for the update; each process's share of the batches
forward and backward, the loss divided by the step's unit count over all of them; clip, update;
the sums reduced over the processes.

Exact resume: the batches of an epoch are a pure function of (seed, epoch); a checkpoint records
where the run stands (RunState: the epoch, the position in it, the best metric, the schedule's
clock), the optimizer, the scaler and every process's RNG state, so a resumed run repeats the
uninterrupted run's losses step for step.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.autograd.graph import increment_version
from torch.nn.parallel import DistributedDataParallel

from ..config import RunConfig
from ..evaluation.metrics import perplexity
from ..model.transformer import Model
from ..model_dir import save_model
from ..runtime.allocator import TRIM_EVERY_STEPS, AllocatorChoice, release_freed_memory
from . import distributed as D
from .checkpoint import (
    load_training_state,
    replace_dir,
    rng_state,
    save_checkpoint,
    set_rng_state,
    step_dirs,
)
from .dropout import LateDropout
from .loss import loss_and_backward
from .objectives import Objective
from .objectives.base import MAX_LOG_PPL
from .progress import Progress, truncate_metrics
from .run_state import RunState
from .schedule import learning_rate


def fused_adam(params: list[torch.Tensor]) -> bool:
    """Whether AdamW takes its fused kernel: one pass over all parameters instead of a loop of
    small ops per tensor; the same update up to float rounding (measured in
    docs/benchmarks/training.md, "The fused AdamW"). It takes floating-point parameters on the CPU
    or a GPU. It does not bump the weights' version counters: the loop does, after
    each step, or copies keyed on them (model.linear's packed weights, used by validation) would
    go stale."""
    return bool(params) and all(
        p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params
    )


class TrainError(ValueError):
    """A run cannot start or continue as asked (e.g. --resume without a checkpoint)."""


@dataclass
class StepTotals:
    """A process's sums over its batches of a step: loss, NLL, their units, the input tokens.

    loss and nll stay on the device until the step's update is queued: reading them (`.item()`)
    after each batch would make a GPU finish the batch before the next one is even queued."""

    loss: torch.Tensor | float = 0.0
    nll: torch.Tensor | float = 0.0
    units: float = 0.0
    tokens: float = 0.0


class Loop:
    """One run's loop: the model, its optimizer and the objective, stepped from a RunState to the
    end of the budget (max_steps, max_epochs or max_minutes), validating and saving on the way."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        task: Objective,
        model: Model,
        attention_impl: str,
        allocator: AllocatorChoice,
        dist: D.DistInfo,
        log: Callable[[str], None],
        start_time: float,
        trained_for: str | None = None,
    ):
        t = config.train
        self.config, self.t, self.run_dir, self.task, self.model = config, t, run_dir, task, model
        self.attention_impl, self.allocator = attention_impl, allocator
        self.dist, self.device, self.log, self.start_time = dist, dist.device, log, start_time
        self.trained_for = trained_for
        """The name of the task the run trains, written into each model directory (task.json)."""
        self.say = log if dist.is_main else (lambda _: None)
        self.trainable = [p for p in model.parameters() if p.requires_grad]
        betas = (t.adam_beta1, t.adam_beta2)
        self.fused = fused_adam(self.trainable)
        self.optimizer = torch.optim.AdamW(
            self.trainable,
            lr=0.0,
            betas=betas,
            eps=t.adam_eps,
            weight_decay=t.weight_decay,
            fused=self.fused,
        )
        self.scaler = torch.amp.GradScaler("cuda", enabled=t.precision == "fp16")
        # train.late_dropout: off until that share of the budget is spent
        self.late = LateDropout(model, t.late_dropout) if t.late_dropout else None
        self.per_step = t.accumulate * dist.world_size  # batches per update, over all processes
        self.state = RunState()
        self.last_valid_s = 0.0  # the last validation's time: the time budget keeps room for one
        self.validated_at: int | None = None  # the final validation is skipped if this step had one

    def start(self) -> RunState:
        torch.manual_seed(self.t.seed + self.dist.rank)  # dropout differs across ranks
        return RunState()

    def restore(self, checkpoint: Path) -> RunState:
        """The checkpoint's state; the optimizer, the scaler and this process's RNG restored."""
        state = load_training_state(checkpoint, self.optimizer)
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if len(state["rng"]) != self.dist.world_size:
            raise TrainError(
                f"--resume: {checkpoint} was written by {len(state['rng'])} process(es), this run "
                f"has {self.dist.world_size}: resume with the same number (exact resume restores "
                "each one's random state), or start a new run with train.init_from"
            )
        set_rng_state(state["rng"][self.dist.rank])
        self.say(f"resumed from {checkpoint} at step {state['step']}")
        if self.dist.is_main:
            truncate_metrics(self.run_dir / "metrics.jsonl", state["step"])
        return RunState.from_checkpoint(state)

    def elapsed(self) -> float:
        """Seconds trained, over every run this one resumes."""
        return self.state.elapsed_s + time.monotonic() - self.start_time

    def run(
        self,
        state: RunState,
        resume: bool,
        on_step: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> RunState:
        """Train from `state` to the end of the budget; the final state (best_metric on rank 0)."""
        t, task, s = self.t, self.task, state
        self.begin(s, resume, on_step)
        stop_reason = "max_steps"
        try:
            while s.step < t.max_steps:
                if s.position + self.per_step > len(self.batches):
                    # the rest of the epoch is too short for a step: the next epoch
                    s.epoch, s.position = s.epoch + 1, 0
                    if t.max_epochs and s.epoch >= t.max_epochs:
                        stop_reason = "max_epochs"
                        break
                    self.batches = task.batches(s.epoch)
                    continue
                self.after_step(self.step())
                if self.out_of_time():
                    stop_reason = "max_minutes"
                    break
            self.finish()
        finally:
            self.progress.close()
            if self.metrics is not None:
                self.metrics.close()
        best = s.best_metric if s.best_metric is None else round(s.best_metric, 4)
        self.say(
            f"stopped at step {s.step} ({stop_reason}) after {self.elapsed():.0f}s; best "
            f"validation {task.best_key.removeprefix('valid_')} {best}; "
            f"model: {self.run_dir / 'best'}"
        )
        return s

    def begin(self, s: RunState, resume: bool, on_step) -> None:
        """Data parallelism, the epoch's batches (enough for a step?), metrics.jsonl, progress."""
        t, dist = self.t, self.dist
        self.state, self.first_step, self.on_step = s, s.step, on_step
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        self.ddp = None
        if dist.distributed:
            self.ddp = DistributedDataParallel(self.model, device_ids=device_ids)
        self.net = self.ddp if self.ddp is not None else self.model  # what the forward runs through
        if t.compile:
            self.net = torch.compile(self.net)
        self.batches = self.task.batches(s.epoch)
        if len(self.batches) < self.per_step:
            raise TrainError(
                f"the training data makes {len(self.batches)} batches of {t.batch_tokens} tokens, "
                f"fewer than one step needs (accumulate x processes = {self.per_step}): "
                "lower train.batch_tokens"
            )
        if not resume:
            padding = self.task.padding_share(self.batches)
            self.say(f"epoch 0: {len(self.batches)} batches, padding {padding:.1%} of positions")
        file = self.run_dir / "metrics.jsonl"
        self.metrics = open(file, "a", encoding="utf-8") if dist.is_main else None
        self.progress = Progress(t.max_steps, s.step, t.log_every, self.log, dist.is_main)
        self.tick, self.tick_tokens = time.monotonic(), 0.0  # for tokens/s since the last step

    def step(self) -> dict[str, Any]:
        """One update over the epoch's next per_step batches; returns its metrics record."""
        s, t, task, dist = self.state, self.t, self.task, self.dist
        group = self.batches[s.position : s.position + self.per_step]
        keys = [(s.epoch, s.position + k) for k in range(len(group))]  # what seeds a batch's noise
        s.position += self.per_step
        global_units = sum(task.units(b, key) for b, key in zip(group, keys, strict=True))
        progress = s.clock.time_progress(t, s.step)
        lr = learning_rate(self.config, self.model.config.d_model, s.step + 1, progress)
        if self.late is not None:
            share = s.clock.budget_spent(t, s.step)
            if self.late.before_update(share):
                self.say(
                    f"step {s.step + 1}: dropout on ({share:.0%} of the budget spent; "
                    "train.late_dropout)"
                )
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        totals = self.backward(
            list(zip(group, keys, strict=True))[dist.rank :: dist.world_size], global_units
        )
        if t.clip_norm > 0:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.trainable, t.clip_norm)
        self.scaler.step(self.optimizer)
        if self.fused:  # the fused kernel writes the weights without bumping their version
            increment_version(self.trainable)  # counters, which derived copies are keyed on
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        s.step += 1
        clock_s = self.elapsed() if dist.rank == 0 else 0.0  # every process takes rank 0's clock
        sums = [float(totals.loss), float(totals.nll), totals.units, totals.tokens, clock_s]
        loss, nll, units, tokens, s.clock.seconds = D.all_reduce_sum(sums, dist)
        self.step_end = now = time.monotonic()
        self.tick_tokens += tokens
        record = {
            "step": s.step,
            "split": "train",
            "epoch": s.epoch,
            "loss": loss / units,
            "nll": nll / units,
            "ppl": perplexity(nll, units, max_nll=MAX_LOG_PPL),
            "lr": lr,
            "tokens": int(tokens),
            **({"units": int(units)} if units != tokens else {}),
            "tokens_per_s": self.tick_tokens / max(now - self.tick, 1e-9),
            "elapsed_s": self.elapsed(),
        }
        self.tick, self.tick_tokens = now, 0.0
        return record

    def backward(
        self, batches: list[tuple[list[int], tuple[int, int]]], global_units: int
    ) -> StepTotals:
        """Forward and backward over this process's batches of the step, gradients summed."""
        totals, scale = StepTotals(), self.dist.world_size
        for j, (indices, key) in enumerate(batches):
            batch = self.task.collate(indices, key).to(self.device)
            sync = self.ddp is None or j == len(batches) - 1  # DDP reduces after the last batch
            with contextlib.nullcontext() if sync else self.ddp.no_sync():
                # DDP averages gradients over ranks; scaling by world_size makes the result a sum
                # over all ranks' units (tokens, texts) divided by the global count.
                step = (self.net, self.model, batch, self.device)  # the objective's loss(...)
                out = loss_and_backward(self.task.loss, step, scale / global_units, self.scaler)
            totals.loss = totals.loss + out.loss.detach()
            totals.nll = totals.nll + out.nll.detach()
            totals.units += out.units
            totals.tokens += out.tokens
        return totals

    def after_step(self, record: dict[str, Any]) -> None:
        """Log the step; validate, save and trim the heap when their turn has come."""
        s, t = self.state, self.t
        self.write(record)
        self.progress.update(record)
        if self.on_step is not None:
            self.on_step(s.step, record)
        if s.step % t.valid_every == 0 and s.step < t.max_steps:
            self.validate()
        if s.step % t.save_every == 0 and s.step < t.max_steps:
            self.checkpoint()
        if self.allocator.kept and s.step % TRIM_EVERY_STEPS == 0:
            release_freed_memory()  # else the heap's free fragments add up over the run

    def out_of_time(self) -> bool:
        """Whether another step (and a validation) would end past max_minutes, on any process."""
        s, t = self.state, self.t
        per_step_s = (self.step_end - self.start_time) / max(s.step - self.first_step, 1)
        step_s = time.monotonic() - self.step_end + per_step_s
        if not t.max_minutes:
            return False
        return D.any_true(
            self.elapsed() + self.last_valid_s + step_s > t.max_minutes * 60, self.dist
        )

    def finish(self) -> None:
        """The final validation (unless this step had one) and checkpoint, then last/ (and best/
        without validation data)."""
        s = self.state
        final = self.validate() if self.validated_at != s.step else {}
        saved = step_dirs(self.run_dir)
        if not saved or saved[-1].name != f"step-{s.step:06d}":
            self.checkpoint()
        if self.dist.is_main:
            save_model_dir(self.model, self.run_dir / "last", self.model_files())
            if final is None:  # no validation data: best is the last model
                save_model_dir(self.model, self.run_dir / "best", self.model_files())

    def write(self, record: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.write(json.dumps(record) + "\n")
            self.metrics.flush()

    def validate(self) -> dict[str, float] | None:
        """Validate on rank 0 (the others wait), log it, keep best/; None without validation
        data."""
        s, task = self.state, self.task
        if not task.has_valid:
            return None
        self.validated_at = s.step
        began = time.monotonic()
        result = None
        if self.dist.is_main:
            result = task.validate(self.model, self.device)
            self.write({"step": s.step, "split": "valid", **result})
            self.progress.write(f"step {s.step}  {task.describe(result)}")
            if task.improved(result, s.best_metric):
                s.best_metric = result[task.best_key]
                save_model_dir(self.model, self.run_dir / "best", self.model_files())
        D.barrier(self.dist)
        self.last_valid_s = time.monotonic() - began
        return result

    def model_files(self) -> dict:
        """What a model directory of this run holds besides the weights: the objective's files
        (tokenizers, records) and the task that trained it."""
        return {**self.task.save_files(), "task": self.trained_for}

    def checkpoint(self) -> None:
        """checkpoints/step-NNNNNN: the model, the optimizer, and state.json (RunState's fields, the
        best metric's name, the precision and attention path trained with, RNG states, scaler)."""
        rngs = D.gather_objects(rng_state(), self.dist)
        if self.dist.is_main:
            scaler = self.scaler.state_dict() if self.scaler.is_enabled() else None
            snapshot = {
                **self.state.record(self.elapsed()),
                "best_key": self.task.best_key,
                "precision": self.t.precision,
                "attention": self.attention_impl,
                "rng": rngs,
                "scaler": scaler,
            }
            save_checkpoint(
                self.run_dir,
                self.state.step,
                self.model,
                self.optimizer,
                snapshot,
                keep_last=self.t.keep_last,
                **self.model_files(),
            )
        D.barrier(self.dist)


def save_model_dir(model: Model, path: Path, files: dict) -> None:
    """best/ or last/: a model directory with the objective's files (Loop.model_files), replaced
    whole."""
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(model, tmp, **files)
    replace_dir(tmp, path)
