"""[sizing] auto = true: which model shape to train for a time budget, on this machine.

With a time budget the best model depends on how many steps the machine affords: a smaller model
takes more steps in the same minutes, a larger one learns more per step (compute-optimal sizing,
Kaplan et al. 2020, Hoffmann et al. 2022, at the scale of minutes). The config carries the
measurements: for each candidate shape (its --set changes) the score its runs reached at a list of
step counts (`transformer sweep --at`, docs/experiments/translation-real-text.md). The trainer then:

1. measures each shape's training step here (measure_step_seconds: a forward, the label-smoothed
   loss, a backward, clipping and the AdamW update, on random tokens in batches of
   train.batch_tokens of PROBE_LENGTH positions, in the precision the run would resolve for that
   shape): PROBE_WARMUP steps, then the median of up to PROBE_REPEATS (the fastest one alone
   under-states what a run of such steps takes). Cached like the precision probe (same file, its
   own key: the machine, the shape, the batch, the precision, the probe's method);
2. turns the budget into steps: max_minutes x 60 x sizing.training_share / (step seconds x the
   machine's calibration). The calibration is what the last sized run here found: a run that
   ends on its budget records (max_minutes x 60 x training_share / its steps) / its shape's probe
   (`record_outcome`: cached per machine, device and precision), so the next run's prediction for
   every shape is scaled alike and a run of the same shape is predicted the steps this one made
   (the probe alone missed a real run by 20% either way: the per-step Python, batches of varying
   shape, and validation are outside it). 1 until a run has recorded one;
3. reads each curve at those steps (predict: linear in log(steps) between measured points; below
   the first point, the first score scaled by steps / first steps; past the last point, the last
   score, never extrapolated upward) and trains the shape that scores best.

Where every shape's steps fall past the end of its curve (the table was not measured at such a
budget), the config's model is kept as written: the table says nothing there. Without
train.max_minutes there is nothing to size, and the config is kept. A resumed run keeps the shape
its run directory's config.toml recorded (sizing.chosen); with several processes rank 0 measures
and every process takes its choice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import ConfigError, RunConfig, load_config, with_overrides
from ..runtime.measure_cache import (
    cached_or_measured,
    default_cache_file,
    machine_key,
    read_cache,
    usable,
    write_cache,
)
from ..runtime.precision import resolve_precision

PROBE_LENGTH = 16
"""Positions per row (source and target) of the probe's batches; a mixture of short UI strings
and verses averages about this (the run's padded rows: 14 on the es-en mixture). The rest of a
run's time (validation, checkpoints, longer rows) is what sizing.training_share accounts for."""
PROBE_WARMUP = 2
PROBE_REPEATS = 5
PROBE_BUDGET_S = 12.0  # per shape: timed steps stop once this much has passed (one at least)


@dataclass(frozen=True)
class SizeChoice:
    """The config to train, and why."""

    config: RunConfig
    name: str | None
    """The chosen shape's name; None: the config's model as written."""
    reason: str
    step_seconds: float | None = None
    """The chosen shape's measured (or cached) training step, calibrated (rule 2)."""
    steps: float | None = None
    """The steps the budget affords at that step time (rule 2): what the run should make."""
    probe: tuple[str, float] | None = None
    """(calibration key, the chosen shape's probe before calibration): what record_outcome
    needs."""

    def describe(self) -> str:
        return f"{self.name or 'the config as written'} ({self.reason})"

    def outcome(self, steps: int) -> str:
        """The prediction beside the steps the run made ("" without a prediction)."""
        if not self.steps:
            return ""
        return (
            f"sizing predicted {self.steps:,.0f} steps ({self.step_seconds:.2f} s/step); the run "
            f"made {steps:,} ({steps / self.steps - 1:+.0%})"
        )


def predict(steps: tuple[int, ...], curve: tuple[float, ...], at: float) -> float:
    """A curve's score at `at` steps (the rules above): linear in log(steps) between its points,
    scaled down from its first point, flat past its last."""
    points = list(zip(steps, curve, strict=False))  # a curve may end before the steps do
    first_steps, first_score = points[0]
    if at <= first_steps:
        return first_score * max(at, 0.0) / first_steps
    for (s0, v0), (s1, v1) in zip(points, points[1:], strict=False):
        if at <= s1:
            w = math.log(at / s0) / math.log(s1 / s0)
            return v0 + w * (v1 - v0)
    return points[-1][1]


def choose(config: RunConfig, step_seconds: dict[str, float]) -> tuple[str | None, str]:
    """(the shape to train, or None for the config as written; why) for the config's budget and
    each shape's measured step seconds."""
    s = config.sizing
    budget = config.train.max_minutes * 60 * s.training_share
    table = []
    for name, curve in zip(s.names, s.scores, strict=True):
        steps = budget / step_seconds[name]
        last = s.steps[len(curve) - 1]
        table.append((predict(s.steps, curve, steps), name, steps, steps > last))
    said = "; ".join(
        f"{name} {step_seconds[name]:.2f} s/step -> {steps:,.0f} steps -> {score:.1f}"
        + (" (past its curve)" if past else "")
        for score, name, steps, past in table
    )
    budget_text = f"{config.train.max_minutes:g} min"
    if all(past for *_, past in table):
        return None, f"{budget_text}: every shape's steps are past its measured curve: {said}"
    best = max(table, key=lambda row: row[0])
    return best[1], f"best score for {budget_text} on this machine: {said}"


def calibration_key(device: torch.device, precision: str) -> str:
    """The cache key of this machine's calibration of the probe (rule 2)."""
    return f"training step calibration | {machine_key()} | {device.type} | {precision}"


def record_outcome(
    choice: SizeChoice,
    config: RunConfig,
    steps: int,
    cache_file: str | Path | None = None,
) -> float | None:
    """After a sized run that ended on its budget (config.train.max_minutes): cache the
    calibration (rule 2) that would have predicted its steps; returns it (None when there is
    nothing to record)."""
    budget_s = config.train.max_minutes * 60
    if choice.probe is None or steps <= 0 or budget_s <= 0:
        return None
    key, probe = choice.probe
    ratio = budget_s * config.sizing.training_share / steps / probe
    if usable(ratio) and os.environ.get("TRANSFORMER_PRECISION_CACHE", "1") != "0":
        write_cache(Path(cache_file) if cache_file else default_cache_file(), key, ratio, "ratio")
    return ratio


def _calibration(key: str, cache_file: str | Path | None) -> float:
    if os.environ.get("TRANSFORMER_PRECISION_CACHE", "1") == "0":
        return 1.0
    entry = read_cache(Path(cache_file) if cache_file else default_cache_file()).get(key)
    ratio = entry.get("ratio") if isinstance(entry, dict) else None
    return float(ratio) if usable(ratio) else 1.0


def measure_step_seconds(
    config: RunConfig,
    precision: str,
    device: torch.device,
    repeats: int = PROBE_REPEATS,
    budget_s: float = PROBE_BUDGET_S,
) -> float:
    """Seconds of one training step of `config`'s model (the rules above); the global RNG is
    untouched."""
    from ..model.build import build_model
    from .loop import fused_adam
    from .loss import label_smoothed_cross_entropy
    from .objectives.base import autocast

    cfg = config.model.replace(vocab_size=config.data.vocab_size)
    if cfg.arch not in ("encoder-decoder", "decoder"):
        raise ConfigError(
            f"sizing measures translation and language models, not arch={cfg.arch!r}: "
            "set sizing.auto = false"
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = build_model(cfg).to(device).train()
    gen = torch.Generator().manual_seed(0)
    rows = max(1, config.train.batch_tokens // PROBE_LENGTH)
    tokens = torch.randint(4, cfg.vocab_size, (rows, PROBE_LENGTH + 1), generator=gen).to(device)
    source = torch.randint(4, cfg.vocab_size, (rows, PROBE_LENGTH), generator=gen).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4, fused=fused_adam(params))
    n_tokens = rows * PROBE_LENGTH

    def step() -> float:
        start = time.perf_counter()
        with autocast(device, precision):
            if cfg.arch == "encoder-decoder":
                logits = model(source, tokens[:, :-1])
            else:
                logits = model(tokens[:, :-1])
        out = label_smoothed_cross_entropy(
            logits,
            tokens[:, 1:],
            config.train.label_smoothing,
            cfg.pad_id,
            n_tokens,
            consume_logits=True,
        )
        (out.loss / n_tokens).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    for _ in range(PROBE_WARMUP):  # kernels built, memory allocated
        step()
    began, times = time.perf_counter(), []
    while len(times) < max(1, repeats):
        times.append(step())
        if time.perf_counter() - began > budget_s:
            break
    return statistics.median(times)


def _probe_key(config: RunConfig, precision: str, device: torch.device) -> str:
    model = config.model.replace(vocab_size=config.data.vocab_size).to_dict()
    shape = hashlib.sha1(json.dumps(model, sort_keys=True, default=str).encode()).hexdigest()[:12]
    m = config.model
    return (
        f"training step | {machine_key()} | {device.type} | {m.arch} d_model={m.d_model} "
        f"layers={m.n_encoder_layers}+{m.n_decoder_layers} d_ff={m.d_ff} "
        f"vocab={config.data.vocab_size} model={shape} | batch_tokens={config.train.batch_tokens} "
        f"length={PROBE_LENGTH} | {precision} | median of {PROBE_REPEATS} after {PROBE_WARMUP}"
    )


def shapes(config: RunConfig) -> dict[str, RunConfig]:
    """Each shape's config: the config with its sets applied (sizing left as it is)."""
    s = config.sizing
    try:
        return {
            name: with_overrides(config, list(changes))
            for name, changes in zip(s.names, s.sets, strict=True)
        }
    except ConfigError as e:
        raise ConfigError(f"[sizing]: a shape's changes do not make a valid config: {e}") from None


def resolve_size(
    config: RunConfig,
    device: torch.device,
    run_dir: Path | None = None,
    resume: bool = False,
    measure: Callable[[RunConfig, str, torch.device], float] | None = None,
    cache_file: str | Path | None = None,
) -> SizeChoice:
    """The config to train (the rules above). `measure(config, precision, device)` stands in for
    measure_step_seconds in tests."""
    s = config.sizing
    if not s.auto:
        return SizeChoice(config, None, "sizing.auto is off")
    candidates = shapes(config)
    if resume and run_dir is not None and (run_dir / "config.toml").is_file():
        chosen = load_config(str(run_dir / "config.toml")).sizing.chosen
        if chosen in candidates:
            return _chosen(candidates[chosen], chosen, "as the run recorded it")
        return SizeChoice(config, None, "as the run recorded it")
    if not config.train.max_minutes:
        return SizeChoice(config, None, "no train.max_minutes: nothing to size")
    measure = measure_step_seconds if measure is None else measure
    seconds, cached, probes = {}, [], {}
    for name, shape in candidates.items():
        m = shape.model
        precision = resolve_precision(
            shape.train.precision, device, m.d_model, m.d_ff, shape.data.vocab_size
        ).precision
        value, prefix = cached_or_measured(
            _probe_key(shape, precision, device),
            cache_file,
            lambda shape=shape, precision=precision: measure(shape, precision, device),
            field="step_seconds",
        )
        key = calibration_key(device, precision)
        probes[name] = (key, value)
        seconds[name] = value * _calibration(key, cache_file)
        cached.append(bool(prefix))
    name, reason = choose(config, seconds)
    if all(cached):
        reason = f"cached: {reason}"
    if name is None:
        return SizeChoice(config, None, reason)
    ratio = seconds[name] / probes[name][1]
    if ratio != 1.0:
        reason = f"{reason}; step times x{ratio:.2f}, calibrated by the last sized run here"
    steps = config.train.max_minutes * 60 * s.training_share / seconds[name]
    return _chosen(candidates[name], name, reason, seconds[name], steps, probes[name])


def _chosen(
    config: RunConfig,
    name: str,
    reason: str,
    step_seconds: float | None = None,
    steps: float | None = None,
    probe: tuple[str, float] | None = None,
) -> SizeChoice:
    sizing = dataclasses.replace(config.sizing, auto=False, chosen=name)
    return SizeChoice(
        dataclasses.replace(config, sizing=sizing), name, reason, step_seconds, steps, probe
    )
