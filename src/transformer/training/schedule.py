"""Learning-rate schedules as pure functions of the step (1 = the first update) and, for a cosine
under a time budget, of the share of that budget spent.

The paper's schedule (§5.3, eq. 3):
    lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)
rises linearly for warmup_steps, then decays with the inverse square root of the step.
Step 0 (or below) is treated as step 1, so no update ever runs at lrate 0 or divides by zero.
"""

from __future__ import annotations

import math


def inverse_sqrt(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The paper's warmup + inverse-square-root decay (§5.3)."""
    step = max(step, 1)
    warmup = max(warmup_steps, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def warmup_cosine(step: int, peak_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0,
                  time_progress: float = 0.0) -> float:
    """Linear warmup to peak_lr over warmup_steps, then a half cosine down to min_lr at total_steps.

    time_progress: the share (0..1) of a time budget spent since the warmup ended; the cosine
    follows whichever of the steps and the clock is further along, so a run that stops on its
    time budget still ends its decay there.
    """
    step = max(step, 1)
    if step <= warmup_steps:
        return peak_lr * step / max(warmup_steps, 1)
    progress = min(1.0, max((step - warmup_steps) / max(total_steps - warmup_steps, 1), time_progress))
    return min_lr + 0.5 * (peak_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
