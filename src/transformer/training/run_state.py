"""Where a training run stands between steps (RunState), as a checkpoint's state.json records it:
what exact resume (transformer.training.loop) restarts from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .schedule import ScheduleClock


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
    """The best validation value of the objective's best_key (a loss, or a classifier's
    accuracy)."""
    elapsed_s: float = 0.0
    """Seconds trained before this process started (by the runs this one resumes)."""
    clock: ScheduleClock = field(default_factory=lambda: ScheduleClock(0.0))

    @classmethod
    def from_checkpoint(cls, state: dict[str, Any]) -> RunState:
        elapsed = state["elapsed_s"]
        clock = ScheduleClock(state.get("schedule_clock_s", elapsed), state.get("warmup_end_s"))
        best = state["best_metric"]
        return cls(state["step"], state["epoch"], state["position"], best, elapsed, clock)

    def record(self, elapsed_s: float) -> dict[str, Any]:
        """The state.json fields of this state, after elapsed_s seconds of training in all."""
        return dict(
            step=self.step,
            epoch=self.epoch,
            position=self.position,
            best_metric=self.best_metric,
            elapsed_s=elapsed_s,
            warmup_end_s=self.clock.warmup_end_s,
            schedule_clock_s=self.clock.seconds,
        )
