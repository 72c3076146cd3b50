"""Learning-rate schedules as pure functions of the step (1 = the first update) and, for a cosine
under a time budget, of the share of that budget spent.

The paper's schedule (§5.3, eq. 3):
    lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)
rises linearly for warmup_steps, then decays with the inverse square root of the step.
Step 0 (or below) is treated as step 1, so no update ever runs at lrate 0 or divides by zero.

A cosine under a time budget (train.max_minutes) decays on the run's clock from the end of the
warmup: `ScheduleClock` keeps that clock (rank 0's elapsed time at the end of the last step, shared
with the step's sums so that every process takes the same rate, and saved in checkpoints so that a
resumed run goes on from it) and the time the warmup ended.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import RunConfig, TrainConfig


def inverse_sqrt(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The paper's warmup + inverse-square-root decay (§5.3)."""
    step = max(step, 1)
    warmup = max(warmup_steps, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def warmup_cosine(
    step: int,
    peak_lr: float,
    warmup_steps: int,
    total_steps: int,
    min_lr: float = 0.0,
    time_progress: float = 0.0,
) -> float:
    """Linear warmup to peak_lr over warmup_steps, then a half cosine down to min_lr at total_steps.

    time_progress: the share (0..1) of a time budget spent since the warmup ended; the cosine
    follows whichever of the steps and the clock is further along, so a run that stops on its
    time budget still ends its decay there.
    """
    step = max(step, 1)
    if step <= warmup_steps:
        return peak_lr * step / max(warmup_steps, 1)
    progress = min(
        1.0, max((step - warmup_steps) / max(total_steps - warmup_steps, 1), time_progress)
    )
    return min_lr + 0.5 * (peak_lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def learning_rate(config: RunConfig, d_model: int, step: int, time_progress: float = 0.0) -> float:
    """The rate of update `step` under train.schedule; time_progress: the share of max_minutes
    spent since the warmup ended (ScheduleClock.time_progress)."""
    t = config.train
    if t.schedule == "inverse_sqrt":
        return inverse_sqrt(step, d_model, t.warmup_steps, t.lr_factor)
    return warmup_cosine(step, t.lr, t.warmup_steps, t.max_steps, t.min_lr, time_progress)


@dataclass
class ScheduleClock:
    """The run's clock as the schedule and late dropout read it."""

    seconds: float
    """Rank 0's elapsed time (over every resume) at the end of the last step."""
    warmup_end_s: float | None = None
    """The clock when the warmup ended; None before (or without a cosine under max_minutes)."""

    def time_progress(self, t: TrainConfig, step: int) -> float:
        """The share of max_minutes spent since the warmup ended, for the update after `step` steps:
        0 unless a cosine under max_minutes is past its warmup (whose end this records)."""
        if t.schedule != "cosine" or not t.max_minutes or step < t.warmup_steps:
            return 0.0
        if self.warmup_end_s is None:
            self.warmup_end_s = self.seconds
        return (self.seconds - self.warmup_end_s) / max(
            t.max_minutes * 60 - self.warmup_end_s, 1e-9
        )

    def budget_spent(self, t: TrainConfig, step: int) -> float:
        """The share of the budget spent after `step` steps: of max_steps, or of max_minutes on this
        clock when set, whichever is further along."""
        return max(
            step / t.max_steps, self.seconds / (t.max_minutes * 60) if t.max_minutes else 0.0
        )
