"""Training a model as a run config says (§5): `train` checks the request, settles the precision
and the attention path, prepares the objective (objectives/) and the model, then runs the loop
(loop.py).

A run directory has one trainer at a time (`.owner`, files.own, while it runs) and holds the
resolved `config.toml`, `metrics.jsonl` (one JSON record per step
and per validation), the tokenizer, `checkpoints/step-NNNNNN/`, and the model directories
`best/` (by the objective's best metric: the lowest validation loss, not BLEU; a classifier's
highest accuracy) and `last/`. Translation runs also log the BLEU and exact-match share of greedy
output on a fixed validation sample (train.bleu_samples).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from ..config import ConfigError, LoraConfig, RunConfig
from ..files import OWNER_FILE, atomic_write_text, clear, own
from ..model.attention import MultiHeadAttention
from ..model.io import ModelFileError
from ..model.lora import Adapter, add_lora
from ..model.stacks import Stack
from ..model.transformer import Model
from ..model_dir import base_weights, load_config, load_model, weights_sha256
from ..runtime.allocator import keep_freed_memory, release_freed_memory
from ..runtime.precision import (
    AttentionChoice,
    PrecisionChoice,
    resolve_attention,
    resolve_precision,
)
from ..tasks import prepare_objective, run_task
from . import distributed as D
from .checkpoint import load_training_state, step_dirs
from .loop import Loop, TrainError
from .objectives import Objective
from .parts import load_parts
from .schedule import learning_rate
from .sizing import record_outcome, resolve_size

__all__ = ["TrainError", "TrainResult", "learning_rate", "train"]


@dataclass
class TrainResult:
    run_dir: Path
    steps: int
    best: float | None
    """The best validation value of best_key (a loss, or a classifier's accuracy); None without
    validation."""
    last_dir: Path
    best_dir: Path
    best_key: str = "valid_loss"

    @property
    def best_valid_loss(self) -> float | None:
        return self.best if self.best_key == "valid_loss" else None


def _log(text: str) -> None:
    print(text, flush=True)


def train(
    config: RunConfig,
    run_dir: str | Path,
    resume: bool = False,
    log: Callable[[str], None] = _log,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Train as `config` says, writing the run directory; `on_step(step, record)` is called after
    every step.

    A run directory this call creates is removed again when the run fails before its first step
    (bad data, a batch too small for a step): nothing half-made is left behind.
    """
    run_dir = Path(run_dir)
    t = config.train
    dist = D.setup(t.device)
    threads = torch.get_num_threads()
    if t.num_threads:
        torch.set_num_threads(t.num_threads)
    fresh = not run_dir.is_dir() or all(p.name == OWNER_FILE for p in run_dir.iterdir())
    try:
        _check_out(run_dir)
        # one trainer per run directory (files.own): a second is refused, naming the first
        with own(run_dir, "train", log) if dist.is_main else contextlib.nullcontext():
            try:
                return _train(config, run_dir, resume, log, on_step, dist)
            except BaseException:
                if fresh and dist.is_main and not (run_dir / "metrics.jsonl").exists():
                    clear(run_dir)  # and own() removes the directory it made
                raise
    finally:
        torch.set_num_threads(threads)  # a library call leaves the process's setting as it found it
        release_freed_memory()  # what keep_freed_memory kept in the heap goes back to the system
        D.cleanup(dist)


def _train(
    config: RunConfig, run_dir: Path, resume: bool, log, on_step, dist: D.DistInfo
) -> TrainResult:
    """Check the request, settle precision and attention, prepare objective and model, then run
    the loop."""
    device = dist.device
    say = log if dist.is_main else (lambda _: None)
    trains = run_task(config)  # the task (transformer.tasks), asked before anything is written
    checkpoints = _checkpoints(config, run_dir, resume, device)
    sized = None
    if config.sizing.auto:  # the shape this machine affords best in the budget (sizing.py)
        sized = resolve_size(config, device, run_dir, resume) if dist.is_main else None
        sized = D.gather_objects(sized, dist)[0]
        say(f"sizing: {sized.describe()}")
        config = sized.config
    resumed = load_training_state(checkpoints[-1]) if resume else None
    choice = _precision(config, device, resumed, dist)
    allocator = keep_freed_memory(device.type)
    train_config = dataclasses.replace(config.train, precision=choice.precision)
    config = dataclasses.replace(config, train=train_config)
    if dist.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "config.toml", config.to_toml())
    D.barrier(dist)

    task = prepare_objective(config, run_dir, dist, say, resume=resume)
    torch.manual_seed(config.train.seed)  # the same model on every rank (DDP broadcasts rank 0's)
    model = _model(config, task, device, checkpoints[-1] if resume else None, say)
    attention = _attention(config, model.config, device, task, resumed, dist)
    for (
        module
    ) in model.modules():  # the model's config keeps "auto": inference takes the fused kernel
        if isinstance(module, MultiHeadAttention):
            module.impl = attention.impl
    # the budget (train.max_minutes) counts training: the clock starts once the data is prepared
    # and the machine probed, so a run's steps do not depend on what was cached before it
    start_time = time.monotonic()
    loop = Loop(
        config,
        run_dir,
        task,
        model,
        attention.impl,
        allocator,
        dist,
        log,
        start_time,
        trained_for=trains.name,
    )
    state = loop.restore(checkpoints[-1]) if resume else loop.start()
    n_params = sum(p.numel() for p in model.parameters())
    frozen = n_params - sum(p.numel() for p in loop.trainable)
    frozen_note = f" ({frozen / 1e6:.2f}M frozen)" if frozen else ""
    mcfg = model.config
    inputs = trains.inputs(mcfg)
    say(
        f"model: {mcfg.arch}, {n_params / 1e6:.2f}M parameters{frozen_note}, {inputs}; "
        f"objective {task.name}; device {device}, {dist.world_size} process(es)"
        f"{f' (process group {dist.backend})' if dist.backend else ''}, precision "
        f"{choice.describe()}; attention {attention.describe()}; allocator {allocator.describe()}"
    )
    state = loop.run(state, resume, on_step)
    if sized is not None and sized.outcome(state.step):
        say(sized.outcome(state.step))
        if dist.is_main and not resume and state.step < config.train.max_steps:
            record_outcome(sized, config, state.step)  # it ended on its budget
    return TrainResult(
        run_dir, state.step, state.best_metric, run_dir / "last", run_dir / "best", task.best_key
    )


def _checkpoints(
    config: RunConfig, run_dir: Path, resume: bool, device: torch.device
) -> list[Path]:
    """The run's checkpoints, once the request is known to make sense (else a one-line error)."""
    if config.train.precision == "fp16" and device.type != "cuda":
        raise ConfigError(
            "train.precision='fp16' needs a GPU (gradient scaling): use precision = "
            '"bf16" or "fp32" on CPU'
        )
    checkpoints = step_dirs(run_dir)
    if resume and not checkpoints:
        raise TrainError(
            f"--resume: {run_dir} has no checkpoint to resume from; start without --resume"
        )
    if not resume and checkpoints:
        raise TrainError(
            f"{run_dir} already has checkpoints: pass --resume to continue it, or "
            "choose another --out"
        )
    return checkpoints


def _check_out(run_dir: Path) -> None:
    """--out names a directory that can be made (no file in the way)."""
    for parent in (run_dir, *run_dir.parents):
        if parent.exists() and not parent.is_dir():
            raise TrainError(
                f"--out {run_dir}: {parent} is a file, not a directory: choose another "
                "run directory"
            )


def _model(
    config: RunConfig, task: Objective, device: torch.device, checkpoint: Path | None, say
) -> Model:
    """The model to train, in training mode: the checkpoint's, or the objective's new (or
    init_from) one with train.init_parts' parts loaded into it (each named by `say`)."""
    if checkpoint is not None:
        try:  # LoRA adapters stay apart: the run trains them on
            model = load_model(checkpoint, device=device, merge=False)
        except ModelFileError as e:  # a damaged checkpoint: the one before it can still be resumed
            raise ModelFileError(
                f"{e}; or delete {checkpoint} to resume from the checkpoint before it"
            ) from None
    else:
        model = task.new_model()
        if config.train.init_parts:  # before the adapters, which freeze what is loaded
            tokenizers = task.save_files().get("tokenizer")
            for line in load_parts(model, config.train.init_parts, tokenizers):
                say(f"init_parts: {line}")
        model = model.to(device)
        if config.train.lora is not None:
            adapt(model, config.train.lora, config.train.init_from)
    for module in model.modules():  # train.activation_checkpointing: layers recomputed backward
        if isinstance(module, Stack):
            module.recompute = config.train.activation_checkpointing
    if config.train.freeze_encoder:  # a classifier's head alone learns; a speech model's decoder
        model.encoder.requires_grad_(False)
    model.train()
    task.bind(model)
    return model


def adapt(model: Model, lora: LoraConfig, base: str) -> None:
    """Add LoRA adapters to a model fine-tuned from `base` (in place; model/lora.py): every weight
    of the base is frozen, the adapters and any head the task added (a tensor the base does not
    hold) are trained, and model.adapter names them and the base."""
    file = base_weights(base)
    with safe_open(file, "pt") as f:
        pretrained = set(f.keys())
    model.requires_grad_(False)
    add_lora(model, lora)
    trained = []
    for name, parameter in model.named_parameters():
        if "lora_" in name.rsplit(".", 1)[-1] or name not in pretrained:
            parameter.requires_grad_(True)
            trained.append(name)
    model.adapter = Adapter(lora, str(Path(base).resolve()), weights_sha256(file), tuple(trained))


def _precision(
    config: RunConfig, device: torch.device, resumed: dict[str, Any] | None, dist: D.DistInfo
) -> PrecisionChoice:
    """The precision to train in: "auto" resolved (measured on rank 0, the same on every process);
    a resumed run keeps the one its checkpoint recorded, so that it repeats the uninterrupted
    run."""
    requested = config.train.precision
    if requested == "auto" and resumed is not None and resumed.get("precision"):
        return PrecisionChoice(resumed["precision"], "as the run recorded it")
    choice = None
    if dist.is_main:  # the shapes of the model trained: init_from's when it gives the model
        init = config.train.init_from
        m = load_config(init) if init else config.model
        vocab = m.vocab_size if init else config.data.vocab_size
        choice = resolve_precision(requested, device, m.d_model, m.d_ff, vocab)
    return D.gather_objects(choice, dist)[0]


def _attention(
    config: RunConfig,
    mcfg,
    device: torch.device,
    task: Objective,
    resumed: dict[str, Any] | None,
    dist: D.DistInfo,
) -> AttentionChoice:
    """The attention path to train with: model.attention_impl, "auto" measured on rank 0 at the
    objective's typical batch (the same on every process); a resumed run keeps the recorded one."""
    if mcfg.attention_impl == "auto" and resumed is not None and resumed.get("attention"):
        return AttentionChoice(resumed["attention"], "as the run recorded it")
    choice = None
    if dist.is_main:
        rows, length = task.attention_shape()
        choice = resolve_attention(
            mcfg.attention_impl,
            device,
            config.train.precision,
            mcfg.n_heads,
            mcfg.head_dim,
            length,
            rows,
        )
    return D.gather_objects(choice, dist)[0]
