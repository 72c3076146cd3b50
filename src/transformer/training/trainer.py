"""The training loop (§5): token-count batches, Adam with the paper's schedule, label smoothing,
gradient accumulation, mixed precision, validation, checkpoints, exact resume, data parallelism.

A run directory holds the resolved `config.toml`, `metrics.jsonl` (one JSON record per step
and per validation), the tokenizer, `checkpoints/step-NNNNNN/`, and the model directories
`best/` (by the objective's best metric: the lowest validation loss, not BLEU; a classifier's
highest accuracy) and `last/`. Translation runs also log the BLEU and exact-match share of greedy
output on a fixed validation sample (train.bleu_samples).

Exact resume: the batches of an epoch are a pure function of (seed, epoch); a checkpoint
records where the run stands (RunState: the epoch, the position in it, the best metric, the
schedule's clock), the optimizer, the scaler and every process's RNG state, so a resumed run
repeats the uninterrupted run's losses step for step.

One step (Loop.step): the next `accumulate x processes` batches of the epoch; the learning rate and
late dropout for the update; each process's share of the batches forward and backward, the loss
divided by the step's unit count over all of them; clip, update; the sums reduced over processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from ..config import ConfigError, RunConfig
from ..evaluation.metrics import perplexity
from ..files import atomic_write_text
from ..model.attention import MultiHeadAttention
from ..model.io import ModelFileError
from ..model.transformer import Model
from ..model_dir import load_model, save_model
from ..runtime.allocator import TRIM_EVERY_STEPS, AllocatorChoice, keep_freed_memory, release_freed_memory
from ..runtime.precision import AttentionChoice, PrecisionChoice, resolve_attention, resolve_precision
from . import distributed as D
from .checkpoint import load_training_state, replace_dir, rng_state, save_checkpoint, set_rng_state, step_dirs
from .dropout import LateDropout
from .objectives import Objective, prepare_objective
from .objectives.base import MAX_LOG_PPL
from .progress import Progress, truncate_metrics
from .schedule import ScheduleClock, learning_rate


class TrainError(ValueError):
    """A run cannot start or continue as asked (e.g. --resume without a checkpoint)."""


@dataclass
class TrainResult:
    run_dir: Path
    steps: int
    best: float | None
    """The best validation value of best_key: the loss, or a classifier's accuracy; None without validation."""
    last_dir: Path
    best_dir: Path
    best_key: str = "valid_loss"

    @property
    def best_valid_loss(self) -> float | None:
        return self.best if self.best_key == "valid_loss" else None


@dataclass
class RunState:
    """Where a run stands, as a checkpoint's state.json records it (with the RNG states, the
    optimizer and the scaler): a resumed run starts from here."""

    step: int = 0
    """Updates done."""
    epoch: int = 0
    position: int = 0
    """The epoch's next batch."""
    best_metric: float | None = None
    """The best validation value of the objective's best_key (a loss, or a classifier's accuracy)."""
    elapsed_s: float = 0.0
    """Seconds trained before this process started (by the runs this one resumes)."""
    clock: ScheduleClock = field(default_factory=lambda: ScheduleClock(0.0))

    @classmethod
    def from_checkpoint(cls, state: dict[str, Any]) -> RunState:
        clock = ScheduleClock(state.get("schedule_clock_s", state["elapsed_s"]), state.get("warmup_end_s"))
        return cls(state["step"], state["epoch"], state["position"], state["best_metric"], state["elapsed_s"],
                   clock)

    def record(self, elapsed_s: float) -> dict[str, Any]:
        """The state.json fields of this state, after elapsed_s seconds of training in all."""
        return {"step": self.step, "epoch": self.epoch, "position": self.position,
                "best_metric": self.best_metric, "elapsed_s": elapsed_s,
                "warmup_end_s": self.clock.warmup_end_s, "schedule_clock_s": self.clock.seconds}


@dataclass
class StepTotals:
    """A process's sums over its batches of a step: the loss, the NLL, their units, the input tokens."""

    loss: float = 0.0
    nll: float = 0.0
    units: float = 0.0
    tokens: float = 0.0


def _log(text: str) -> None:
    print(text, flush=True)


def train(config: RunConfig, run_dir: str | Path, resume: bool = False, log: Callable[[str], None] = _log,
          on_step: Callable[[int, dict[str, Any]], None] | None = None) -> TrainResult:
    """Train as `config` says, writing the run directory; `on_step(step, record)` is called after every step.

    A run directory this call creates is removed again when the run fails before its first step
    (bad data, a batch too small for a step): nothing half-made is left behind.
    """
    run_dir = Path(run_dir)
    t = config.train
    dist = D.setup(t.device)
    threads = torch.get_num_threads()
    if t.num_threads:
        torch.set_num_threads(t.num_threads)
    fresh = not run_dir.exists()
    try:
        return _train(config, run_dir, resume, log, on_step, dist)
    except BaseException:
        if fresh and dist.is_main and run_dir.is_dir() and not (run_dir / "metrics.jsonl").exists():
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    finally:
        torch.set_num_threads(threads)  # a library call leaves the process's setting as it found it
        release_freed_memory()  # what keep_freed_memory kept in the heap goes back to the system
        D.cleanup(dist)


def _train(config: RunConfig, run_dir: Path, resume: bool, log, on_step, dist: D.DistInfo) -> TrainResult:
    """Check the request, settle the precision, prepare the objective and the model, then run the loop."""
    device = dist.device
    say = log if dist.is_main else (lambda _: None)
    checkpoints = _checkpoints(config, run_dir, resume, device)
    resumed = load_training_state(checkpoints[-1]) if resume else None
    choice = _precision(config, device, resumed, dist)
    allocator = keep_freed_memory(device.type)
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, precision=choice.precision))
    start_time = time.monotonic()
    if dist.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "config.toml", config.to_toml())
    D.barrier(dist)

    task = prepare_objective(config, run_dir, dist, say, resume=resume)
    torch.manual_seed(config.train.seed)  # the same model on every rank (DDP also broadcasts rank 0's)
    model = _model(config, task, device, checkpoints[-1] if resume else None)
    attention = _attention(config, model.config, device, task, resumed, dist)
    for module in model.modules():  # the model's config keeps "auto": inference takes the fused kernel
        if isinstance(module, MultiHeadAttention):
            module.impl = attention.impl
    loop = Loop(config, run_dir, task, model, attention.impl, allocator, dist, log, on_step, start_time)
    state = loop.restore(checkpoints[-1]) if resume else loop.start()
    n_params = sum(p.numel() for p in model.parameters())
    frozen = n_params - sum(p.numel() for p in loop.trainable)
    mcfg = model.config
    say(f"model: {mcfg.arch}, {n_params / 1e6:.2f}M parameters"
        f"{f' ({frozen / 1e6:.2f}M frozen)' if frozen else ''}, {_inputs(mcfg)}; objective {task.name}; "
        f"device {device}, {dist.world_size} process(es), precision {choice.describe()}; "
        f"attention {attention.describe()}; allocator {allocator.describe()}")
    return loop.run(state, resume)


def _checkpoints(config: RunConfig, run_dir: Path, resume: bool, device: torch.device) -> list[Path]:
    """The run's checkpoints, once the request is known to make sense (else a one-line error)."""
    if config.train.precision == "fp16" and device.type != "cuda":
        raise ConfigError("train.precision='fp16' needs a GPU (gradient scaling): use precision = \"bf16\" "
                          "or \"fp32\" on CPU")
    for parent in (run_dir, *run_dir.parents):
        if parent.exists() and not parent.is_dir():
            raise TrainError(f"--out {run_dir}: {parent} is a file, not a directory: choose another run directory")
    checkpoints = step_dirs(run_dir)
    if resume and not checkpoints:
        raise TrainError(f"--resume: {run_dir} has no checkpoint to resume from; start without --resume")
    if not resume and checkpoints:
        raise TrainError(f"{run_dir} already has checkpoints: pass --resume to continue it, or choose another --out")
    return checkpoints


def _model(config: RunConfig, task: Objective, device: torch.device, checkpoint: Path | None) -> Model:
    """The model to train, in training mode: the checkpoint's, or the objective's new (or init_from) one."""
    if checkpoint is not None:
        try:
            model = load_model(checkpoint, device=device)
        except ModelFileError as e:  # a damaged checkpoint: the one before it can still be resumed
            raise ModelFileError(f"{e}; or delete {checkpoint} to resume from the checkpoint before it") from None
    else:
        model = task.new_model().to(device)
    if config.train.freeze_encoder:  # a pretrained encoder under a new head: only the head learns
        model.encoder.requires_grad_(False)
    model.train()
    task.bind(model)
    return model


class Loop:
    """One run's loop: the model, its optimizer and the objective, stepped from a RunState to the end
    of the budget (max_steps, max_epochs or max_minutes), validating and saving on the way."""

    def __init__(self, config: RunConfig, run_dir: Path, task: Objective, model: Model, attention_impl: str,
                 allocator: AllocatorChoice, dist: D.DistInfo, log: Callable[[str], None],
                 on_step: Callable[[int, dict[str, Any]], None] | None, start_time: float):
        t = config.train
        self.config, self.t, self.run_dir, self.task, self.model = config, t, run_dir, task, model
        self.attention_impl, self.allocator, self.dist, self.device = attention_impl, allocator, dist, dist.device
        self.log, self.on_step, self.start_time = log, on_step, start_time
        self.say = log if dist.is_main else (lambda _: None)
        self.trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.trainable, lr=0.0, betas=(t.adam_beta1, t.adam_beta2),
                                           eps=t.adam_eps, weight_decay=t.weight_decay)
        self.scaler = torch.amp.GradScaler("cuda", enabled=t.precision == "fp16")
        self.late = LateDropout(model, t.late_dropout) if t.late_dropout else None  # off until the share is spent
        self.per_step = t.accumulate * dist.world_size  # batches per update, over all processes
        self.state = RunState()
        self.last_valid_s = 0.0  # how long the last validation took (the time budget keeps room for one)
        self.validated_at: int | None = None  # the final validation is skipped when this step had one

    def start(self) -> RunState:
        torch.manual_seed(self.t.seed + self.dist.rank)  # dropout differs across ranks
        return RunState()

    def restore(self, checkpoint: Path) -> RunState:
        """The checkpoint's state, with the optimizer, the scaler and this process's RNG restored."""
        state = load_training_state(checkpoint, self.optimizer)
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if len(state["rng"]) != self.dist.world_size:
            raise TrainError(f"--resume: {checkpoint} was written by {len(state['rng'])} process(es), this run "
                             f"has {self.dist.world_size}: resume with the same number (exact resume restores "
                             "each one's random state), or start a new run with train.init_from")
        set_rng_state(state["rng"][self.dist.rank])
        self.say(f"resumed from {checkpoint} at step {state['step']}")
        if self.dist.is_main:
            truncate_metrics(self.run_dir / "metrics.jsonl", state["step"])
        return RunState.from_checkpoint(state)

    def elapsed(self) -> float:
        """Seconds trained, over every run this one resumes."""
        return self.state.elapsed_s + time.monotonic() - self.start_time

    def run(self, state: RunState, resume: bool) -> TrainResult:
        t, task, s = self.t, self.task, state
        self.state, self.first_step = s, s.step
        ddp = self.dist.distributed
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        self.ddp = DistributedDataParallel(self.model, device_ids=device_ids) if ddp else None
        self.net = self.ddp if self.ddp is not None else self.model  # what the forward pass runs through
        self.batches = task.batches(s.epoch)
        if len(self.batches) < self.per_step:
            raise TrainError(f"the training data makes {len(self.batches)} batches of {t.batch_tokens} tokens, "
                             f"fewer than one step needs (accumulate x processes = {self.per_step}): "
                             "lower train.batch_tokens")
        if not resume:
            self.say(f"epoch 0: {len(self.batches)} batches, padding {task.padding_share(self.batches):.1%} "
                     "of positions")
        main = self.dist.is_main
        self.metrics = open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") if main else None
        self.progress = Progress(t.max_steps, s.step, t.log_every, self.log, main)
        self.tick, self.tick_tokens = time.monotonic(), 0.0  # tokens/s since the last step's end
        stop_reason = "max_steps"
        try:
            while s.step < t.max_steps:
                if s.position + self.per_step > len(self.batches):  # the rest is too short for a step
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
        best = s.best_metric
        self.say(f"stopped at step {s.step} ({stop_reason}) after {self.elapsed():.0f}s; best validation "
                 f"{task.best_key.removeprefix('valid_')} {best if best is None else round(best, 4)}; "
                 f"model: {self.run_dir / 'best'}")
        return TrainResult(self.run_dir, s.step, best, self.run_dir / "last", self.run_dir / "best", task.best_key)

    def step(self) -> dict[str, Any]:
        """One update over the epoch's next per_step batches; returns its metrics record."""
        s, t, task, dist = self.state, self.t, self.task, self.dist
        group = self.batches[s.position : s.position + self.per_step]
        keys = [(s.epoch, s.position + k) for k in range(len(group))]  # what seeds a batch's noise
        s.position += self.per_step
        global_units = sum(task.units(b, key) for b, key in zip(group, keys, strict=True))
        lr = learning_rate(self.config, self.model.config.d_model, s.step + 1, s.clock.time_progress(t, s.step))
        if self.late is not None:
            share = s.clock.budget_spent(t, s.step)
            if self.late.before_update(share):
                self.say(f"step {s.step + 1}: dropout on ({share:.0%} of the budget spent; train.late_dropout)")
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        mine = list(zip(group, keys, strict=True))[dist.rank :: dist.world_size]
        totals = self.backward(mine, global_units)
        if t.clip_norm > 0:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.trainable, t.clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        s.step += 1
        clock_s = self.elapsed() if dist.rank == 0 else 0.0  # every process takes rank 0's clock
        loss, nll, units, tokens, s.clock.seconds = D.all_reduce_sum(
            [totals.loss, totals.nll, totals.units, totals.tokens, clock_s], dist)
        self.step_end = now = time.monotonic()
        self.tick_tokens += tokens
        record = {"step": s.step, "split": "train", "epoch": s.epoch, "loss": loss / units, "nll": nll / units,
                  "ppl": perplexity(nll, units, max_nll=MAX_LOG_PPL), "lr": lr, "tokens": int(tokens),
                  **({"units": int(units)} if units != tokens else {}),
                  "tokens_per_s": self.tick_tokens / max(now - self.tick, 1e-9), "elapsed_s": self.elapsed()}
        self.tick, self.tick_tokens = now, 0.0
        return record

    def backward(self, batches: list[tuple[list[int], tuple[int, int]]], global_units: int) -> StepTotals:
        """Forward and backward over this process's batches of the step, gradients summed."""
        totals = StepTotals()
        for j, (indices, key) in enumerate(batches):
            batch = self.task.collate(indices, key).to(self.device)
            sync = self.ddp is None or j == len(batches) - 1  # DDP reduces gradients after the last one
            with contextlib.nullcontext() if sync else self.ddp.no_sync():
                out = self.task.loss(self.net, self.model, batch, self.device)
                # DDP averages gradients over ranks; scaling by world_size makes the result a sum
                # over all ranks' units (tokens, texts) divided by the global count.
                self.scaler.scale(out.loss * (self.dist.world_size / global_units)).backward()
            totals.loss += out.loss.item()
            totals.nll += out.nll.item()
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
        step_s = time.monotonic() - self.step_end + (self.step_end - self.start_time) / max(s.step - self.first_step, 1)
        return bool(t.max_minutes) and D.any_true(self.elapsed() + self.last_valid_s + step_s > t.max_minutes * 60,
                                                  self.dist)

    def finish(self) -> None:
        """The final validation (unless this step had one) and checkpoint, then last/ (and best/
        without validation data)."""
        s = self.state
        final = self.validate() if self.validated_at != s.step else {}
        saved = step_dirs(self.run_dir)
        if not saved or saved[-1].name != f"step-{s.step:06d}":
            self.checkpoint()
        if self.dist.is_main:
            _save_model_dir(self.model, self.run_dir / "last", self.task)
            if final is None:  # no validation data: best is the last model
                _save_model_dir(self.model, self.run_dir / "best", self.task)

    def write(self, record: dict[str, Any]) -> None:
        if self.metrics is not None:
            self.metrics.write(json.dumps(record) + "\n")
            self.metrics.flush()

    def validate(self) -> dict[str, float] | None:
        """Validate on rank 0 (the others wait), log it, and keep best/; None without validation data."""
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
                _save_model_dir(self.model, self.run_dir / "best", task)
        D.barrier(self.dist)
        self.last_valid_s = time.monotonic() - began
        return result

    def checkpoint(self) -> None:
        rngs = D.gather_objects(rng_state(), self.dist)
        if self.dist.is_main:
            scaler = self.scaler.state_dict() if self.scaler.is_enabled() else None
            snapshot = {**self.state.record(self.elapsed()), "best_key": self.task.best_key,
                        "precision": self.t.precision, "attention": self.attention_impl, "rng": rngs,
                        "scaler": scaler}
            save_checkpoint(self.run_dir, self.state.step, self.model, self.optimizer, snapshot,
                            keep_last=self.t.keep_last, **self.task.save_files())
        D.barrier(self.dist)


def _precision(config: RunConfig, device: torch.device, resumed: dict[str, Any] | None,
               dist: D.DistInfo) -> PrecisionChoice:
    """The precision to train in: "auto" resolved (measured on rank 0, the same on every process);
    a resumed run keeps the one its checkpoint recorded, so that it repeats the uninterrupted run."""
    requested = config.train.precision
    if requested == "auto" and resumed is not None and resumed.get("precision"):
        return PrecisionChoice(resumed["precision"], "as the run recorded it")
    m = config.model
    choice = resolve_precision(requested, device, m.d_model, m.d_ff, config.data.vocab_size) if dist.is_main else None
    return D.gather_objects(choice, dist)[0]


def _attention(config: RunConfig, mcfg, device: torch.device, task: Objective, resumed: dict[str, Any] | None,
               dist: D.DistInfo) -> AttentionChoice:
    """The attention path to train with: model.attention_impl, "auto" measured on rank 0 at the
    objective's typical batch (the same on every process); a resumed run keeps the recorded one."""
    if mcfg.attention_impl == "auto" and resumed is not None and resumed.get("attention"):
        return AttentionChoice(resumed["attention"], "as the run recorded it")
    choice = None
    if dist.is_main:
        rows, length = task.attention_shape()
        choice = resolve_attention(mcfg.attention_impl, device, config.train.precision, mcfg.n_heads,
                                   mcfg.head_dim, length, rows)
    return D.gather_objects(choice, dist)[0]


def _inputs(cfg) -> str:
    v = cfg.vision
    if v is None:
        return f"vocabulary {cfg.vocab_size}"
    return f"{v.n_patches} patches of {v.patch_size} x {v.patch_size} x {v.channels} per image"


def _save_model_dir(model: Model, path: Path, task: Objective) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(model, tmp, **task.save_files())
    replace_dir(tmp, path)
