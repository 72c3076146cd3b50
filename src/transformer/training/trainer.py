"""The training loop (§5): token-count batches, Adam with the paper's schedule, label smoothing,
gradient accumulation, mixed precision, validation, checkpoints, exact resume, data parallelism.

A run directory holds the resolved `config.toml`, `metrics.jsonl` (one JSON record per step
and per validation), the tokenizer, `checkpoints/step-NNNNNN/`, and the model directories
`best/` (lowest validation loss, not BLEU; a classifier's: highest accuracy) and `last/`. Translation runs also log the BLEU and
exact-match share of greedy output on a fixed validation sample (train.bleu_samples).

Exact resume: the batches of an epoch are a pure function of (seed, epoch); a checkpoint
records the epoch, the position in it, the optimizer, the scaler and every process's RNG
state, so a resumed run repeats the uninterrupted run's losses step for step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from ..config import ConfigError, RunConfig
from ..files import atomic_write_text
from ..model.attention import MultiHeadAttention
from ..model.io import ModelFileError
from ..model.transformer import Model
from ..model_dir import load_model, save_model
from ..runtime.allocator import TRIM_EVERY_STEPS, keep_freed_memory, release_freed_memory
from ..runtime.precision import (
    AttentionChoice,
    PrecisionChoice,
    resolve_attention,
    resolve_precision,
)
from . import distributed as D
from .checkpoint import (
    load_training_state,
    replace_dir,
    rng_state,
    save_checkpoint,
    set_rng_state,
    step_dirs,
)
from .dropout import DropoutSwitch, dropout_is_on
from .objectives import Objective, prepare_objective
from .schedule import inverse_sqrt, warmup_cosine


class TrainError(ValueError):
    """A run cannot start or continue as asked (e.g. --resume without a checkpoint)."""


@dataclass
class TrainResult:
    run_dir: Path
    steps: int
    best: float | None
    """The best validation score: the loss, or a classifier's accuracy (best_key says which); None without validation."""
    last_dir: Path
    best_dir: Path
    best_key: str = "valid_loss"

    @property
    def best_valid_loss(self) -> float | None:
        return self.best if self.best_key == "valid_loss" else None


def learning_rate(config: RunConfig, d_model: int, step: int, time_progress: float = 0.0) -> float:
    """The rate of update `step`; time_progress: the share of max_minutes spent since the warmup ended."""
    t = config.train
    if t.schedule == "inverse_sqrt":
        return inverse_sqrt(step, d_model, t.warmup_steps, t.lr_factor)
    return warmup_cosine(step, t.lr, t.warmup_steps, t.max_steps, t.min_lr, time_progress)


class Progress:
    """tqdm on a terminal; otherwise a plain log line every log_every steps.

    The log line's tokens/s is the mean over the steps since the last line (training steps
    only, validation excluded); metrics.jsonl keeps each step's own rate.
    """

    def __init__(self, total: int, initial: int, log_every: int, log: Callable[[str], None], enabled: bool):
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
            self.bar.set_postfix(loss=f"{record['loss']:.3f}", lr=f"{record['lr']:.2e}",
                                 tok_s=f"{record['tokens_per_s']:.0f}")
            return
        self.window_tokens += record["tokens"]
        self.window_s += record["tokens"] / max(record["tokens_per_s"], 1e-9)
        if record["step"] % self.log_every == 0:
            rate = self.window_tokens / max(self.window_s, 1e-9)
            self.window_tokens = self.window_s = 0.0
            self.log(f"step {record['step']}  loss {record['loss']:.4f}  nll {record['nll']:.4f}  "
                     f"ppl {record['ppl']:.2f}  lr {record['lr']:.3e}  {rate:.0f} tok/s  {record['elapsed_s']:.0f}s")

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
    device = dist.device
    main = dist.is_main
    say = log if main else (lambda _: None)
    if config.train.precision == "fp16" and device.type != "cuda":
        raise ConfigError("train.precision='fp16' needs a GPU (gradient scaling): use precision = \"bf16\" or \"fp32\" on CPU")
    for parent in (run_dir, *run_dir.parents):
        if parent.exists() and not parent.is_dir():
            raise TrainError(f"--out {run_dir}: {parent} is a file, not a directory: choose another run directory")
    checkpoints = step_dirs(run_dir)
    if resume and not checkpoints:
        raise TrainError(f"--resume: {run_dir} has no checkpoint to resume from; start without --resume")
    if not resume and checkpoints:
        raise TrainError(f"{run_dir} already has checkpoints: pass --resume to continue it, or choose another --out")
    choice = _precision(config, device, load_training_state(checkpoints[-1]) if resume else None, dist)
    allocator = keep_freed_memory(device.type)
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, precision=choice.precision))
    t = config.train
    start_time = time.monotonic()
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "config.toml", config.to_toml())
    D.barrier(dist)

    task = prepare_objective(config, run_dir, dist, say, resume=resume)

    # Model: resumed, fine-tuned from init_from, or new (same seed on every rank; DDP also broadcasts rank 0's).
    torch.manual_seed(t.seed)
    # best_valid_loss: the best of the objective's best_key (named so for checkpoints that predate classify)
    state: dict[str, Any] = {"step": 0, "epoch": 0, "position": 0, "best_valid_loss": None, "elapsed_s": 0.0}
    if resume:
        try:
            model = load_model(checkpoints[-1], device=device)
        except ModelFileError as e:  # a damaged checkpoint: the one before it can still be resumed
            raise ModelFileError(f"{e}; or delete {checkpoints[-1]} to resume from the checkpoint before it") from None
    else:
        model = task.new_model().to(device)
    if t.freeze_encoder:  # a pretrained encoder under a new head: only the head learns
        model.encoder.requires_grad_(False)
    model.train()
    task.bind(model)
    mcfg = model.config
    attention = _attention(config, mcfg, device, task, load_training_state(checkpoints[-1]) if resume else None, dist)
    for module in model.modules():  # the model's config keeps "auto": inference takes the fused kernel
        if isinstance(module, MultiHeadAttention):
            module.impl = attention.impl
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=0.0, betas=(t.adam_beta1, t.adam_beta2), eps=t.adam_eps,
                                  weight_decay=t.weight_decay)
    scaler = torch.amp.GradScaler("cuda", enabled=t.precision == "fp16")
    if resume:
        state = load_training_state(checkpoints[-1], optimizer)
        if state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        if len(state["rng"]) != dist.world_size:
            raise TrainError(f"--resume: {checkpoints[-1]} was written by {len(state['rng'])} process(es), this run has "
                             f"{dist.world_size}: resume with the same number (exact resume restores each one's "
                             "random state), or start a new run with train.init_from")
        set_rng_state(state["rng"][dist.rank])
        say(f"resumed from {checkpoints[-1]} at step {state['step']}")
        if main:
            _truncate_metrics(run_dir / "metrics.jsonl", state["step"])
    else:
        torch.manual_seed(t.seed + dist.rank)  # dropout differs across ranks
    n_params = sum(p.numel() for p in model.parameters())
    frozen = n_params - sum(p.numel() for p in trainable)
    say(f"model: {mcfg.arch}, {n_params / 1e6:.2f}M parameters{f' ({frozen / 1e6:.2f}M frozen)' if frozen else ''}, "
        f"{_inputs(mcfg)}; objective {task.name}; device {device}, "
        f"{dist.world_size} process(es), precision {choice.describe()}; attention {attention.describe()}; "
        f"allocator {allocator.describe()}")

    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None) \
        if dist.distributed else None
    net = ddp if ddp is not None else model
    per_step = t.accumulate * dist.world_size
    step, epoch, position = state["step"], state["epoch"], state["position"]
    batches = task.batches(epoch)
    if len(batches) < per_step:
        raise TrainError(f"the training data makes {len(batches)} batches of {t.batch_tokens} tokens, fewer than one "
                         f"step needs (accumulate x processes = {per_step}): lower train.batch_tokens")
    if not resume:
        say(f"epoch 0: {len(batches)} batches, padding {task.padding_share(batches):.1%} of positions")
    metrics = open(run_dir / "metrics.jsonl", "a", encoding="utf-8") if main else None
    progress = Progress(t.max_steps, step, t.log_every, log, main)
    best = state["best_valid_loss"]
    elapsed_before = state["elapsed_s"]
    # A cosine under max_minutes decays on the clock from the end of the warmup: the time then (None
    # before it). The clock is rank 0's elapsed time at the end of the last step, shared with the
    # step's sums so that every process takes the same rate, and saved so that a resume goes on from it.
    warmup_end_s = state.get("warmup_end_s")
    clock = state.get("schedule_clock_s", elapsed_before)
    late = DropoutSwitch(model) if t.late_dropout else None  # off until late_dropout of the budget is spent
    last_valid_s = 0.0
    validated_at = None  # the step of the last validation: the final one is skipped when it already ran
    tick, tick_tokens = time.monotonic(), 0.0

    def elapsed() -> float:
        return elapsed_before + time.monotonic() - start_time

    def validate() -> dict[str, float] | None:
        nonlocal best, last_valid_s, validated_at
        if not task.has_valid:
            return None
        validated_at = step
        began = time.monotonic()
        result = None
        if main:
            result = task.validate(model, device)
            record = {"step": step, "split": "valid", **result}
            metrics.write(json.dumps(record) + "\n")
            metrics.flush()
            progress.write(f"step {step}  {task.describe(result)}")
            if task.improved(result, best):
                best = result[task.best_key]
                _save_model_dir(model, run_dir / "best", task)
        D.barrier(dist)
        last_valid_s = time.monotonic() - began
        return result

    def checkpoint() -> None:
        rngs = D.gather_objects(rng_state(), dist)
        if main:
            snapshot = {"step": step, "epoch": epoch, "position": position, "best_valid_loss": best,
                        "precision": t.precision, "attention": attention.impl,
                        "elapsed_s": elapsed(), "warmup_end_s": warmup_end_s, "schedule_clock_s": clock,
                        "rng": rngs, "scaler": scaler.state_dict() if scaler.is_enabled() else None}
            save_checkpoint(run_dir, step, model, optimizer, snapshot, keep_last=t.keep_last, **task.save_files())
        D.barrier(dist)

    stop_reason = "max_steps"
    try:
        while step < t.max_steps:
            if position + per_step > len(batches):  # the rest of an epoch is too short for a step: next epoch
                epoch, position = epoch + 1, 0
                if t.max_epochs and epoch >= t.max_epochs:
                    stop_reason = "max_epochs"
                    break
                batches = task.batches(epoch)
                continue
            group = batches[position: position + per_step]
            keys = [(epoch, position + k) for k in range(len(group))]  # what seeds a batch's noise (mlm)
            position += per_step
            global_units = sum(task.units(b, key) for b, key in zip(group, keys, strict=True))
            time_progress = 0.0
            if t.schedule == "cosine" and t.max_minutes and step >= t.warmup_steps:
                if warmup_end_s is None:
                    warmup_end_s = clock
                time_progress = (clock - warmup_end_s) / max(t.max_minutes * 60 - warmup_end_s, 1e-9)
            lr = learning_rate(config, mcfg.d_model, step + 1, time_progress)
            if late is not None:
                share = max(step / t.max_steps, clock / (t.max_minutes * 60) if t.max_minutes else 0.0)
                on = dropout_is_on(share, t.late_dropout)
                if on and not late.on:
                    say(f"step {step + 1}: dropout on ({share:.0%} of the budget spent; train.late_dropout)")
                late.set(on)
            for g in optimizer.param_groups:
                g["lr"] = lr
            sums = [0.0, 0.0, 0.0, 0.0, 0.0]
            mine = list(zip(group, keys, strict=True))[dist.rank::dist.world_size]
            for j, (indices, key) in enumerate(mine):
                batch = task.collate(indices, key).to(device)
                sync = ddp is None or j == len(mine) - 1
                with contextlib.nullcontext() if sync else ddp.no_sync():
                    out = task.loss(net, model, batch, device)
                    # DDP averages gradients over ranks; scaling by world_size makes the result a sum
                    # over all ranks' units (tokens, texts) divided by the global count.
                    scaler.scale(out.loss * (dist.world_size / global_units)).backward()
                sums[0] += out.loss.item()
                sums[1] += out.nll.item()
                sums[2] += out.units
                sums[3] += out.tokens
            if t.clip_norm > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(trainable, t.clip_norm)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if dist.rank == 0:
                sums[4] = elapsed()
            loss_sum, nll_sum, n_units, n_tok, clock = D.all_reduce_sum(sums, dist)
            now = time.monotonic()
            tick_tokens += n_tok
            record = {"step": step, "split": "train", "epoch": epoch, "loss": loss_sum / n_units,
                      "nll": nll_sum / n_units, "ppl": math.exp(min(nll_sum / n_units, 50.0)), "lr": lr,
                      "tokens": int(n_tok), **({"units": int(n_units)} if n_units != n_tok else {}),
                      "tokens_per_s": tick_tokens / max(now - tick, 1e-9), "elapsed_s": elapsed()}
            tick, tick_tokens = now, 0.0
            if main:
                metrics.write(json.dumps(record) + "\n")
                metrics.flush()
            progress.update(record)
            if on_step is not None:
                on_step(step, record)
            if step % t.valid_every == 0 and step < t.max_steps:
                validate()
            if step % t.save_every == 0 and step < t.max_steps:
                checkpoint()
            if allocator.kept and step % TRIM_EVERY_STEPS == 0:
                release_freed_memory()  # else the heap's free fragments add up over the run
            step_s = time.monotonic() - now + (now - start_time) / max(step - state["step"], 1)
            if t.max_minutes and D.any_true(elapsed() + last_valid_s + step_s > t.max_minutes * 60, dist):
                stop_reason = "max_minutes"
                break
        final = validate() if validated_at != step else {}
        if not step_dirs(run_dir) or step_dirs(run_dir)[-1].name != f"step-{step:06d}":
            checkpoint()
        if main:
            _save_model_dir(model, run_dir / "last", task)
            if final is None:  # no validation data: best is the last model
                _save_model_dir(model, run_dir / "best", task)
    finally:
        progress.close()
        if metrics is not None:
            metrics.close()
    say(f"stopped at step {step} ({stop_reason}) after {elapsed():.0f}s; "
        f"best validation {task.best_key.removeprefix('valid_')} {best if best is None else round(best, 4)}; "
        f"model: {run_dir / 'best'}")
    return TrainResult(run_dir, step, best, run_dir / "last", run_dir / "best", task.best_key)


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
    return f"vocabulary {cfg.vocab_size}" if v is None else \
        f"{v.n_patches} patches of {v.patch_size} x {v.patch_size} x {v.channels} per image"


def _save_model_dir(model: Model, path: Path, task: Objective) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(model, tmp, **task.save_files())
    replace_dir(tmp, path)


def _truncate_metrics(file: Path, step: int) -> None:
    """Drop records after `step` (written after the checkpoint we resume from), so the log reads as one run.

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
        if isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] <= step:
            keep.append(line)
    atomic_write_text(file, "".join(line + "\n" for line in keep))

