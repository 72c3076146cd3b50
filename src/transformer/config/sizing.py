"""The `[sizing]` section: model shapes to choose among by what this machine affords in the time
budget, with each shape's measured learning curve (transformer.training.sizing does the choosing).

    [sizing]
    auto = true
    names = ["base", "small"]
    sets = [[], ["model.d_ff=512", "data.vocab_size=4000"]]   # each shape: --set changes
    steps = [400, 800, 1200, 1600]                            # where the curves were measured
    scores = [[8.1, 15.0, 19.2], [10.2, 16.9, 20.3, 22.0]]     # one curve per shape (may end early)

A curve may stop before the last step (a shape measured over fewer steps). What the scores are
(e.g. the mean validation BLEU of the config's splits) is the table's business: larger is better.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .checks import ConfigError, check_types, parse_override, setting


@dataclass(frozen=True)
class SizingConfig:
    """Shapes to choose among by the time budget (the `[sizing]` section; off unless auto)."""

    auto: bool = False
    """With train.max_minutes: measure each shape's training step on this machine, and train the
    one whose curve scores best at the steps the budget buys (transformer.training.sizing)."""
    names: tuple[str, ...] = ()
    """The shapes' names, as the run's header states the choice."""
    sets: tuple[tuple[str, ...], ...] = ()
    """Each shape's changes to the config, as --set takes them (section.key=value); [] = the
    config as written."""
    steps: tuple[int, ...] = ()
    """The training steps at which the curves were measured, ascending."""
    scores: tuple[tuple[float, ...], ...] = ()
    """Each shape's score at those steps (larger is better); a curve may end early."""
    training_share: float = setting(0.9, gt=0, le=1)
    """The share of the budget that goes to training steps (the rest: validation, checkpoints),
    measured on runs of the config."""
    chosen: str | None = None
    """Written by the trainer into the run's config.toml: the shape it chose (a resumed run keeps
    it)."""

    def __post_init__(self) -> None:
        check_types(self, "sizing")
        set_ = object.__setattr__
        set_(self, "names", tuple(self.names))
        set_(self, "sets", tuple(tuple(s) for s in self.sets))
        set_(self, "steps", tuple(self.steps))
        set_(self, "scores", tuple(tuple(float(v) for v in c) for c in self.scores))
        if not self.names and not self.auto:
            return
        if not self.names:
            raise ConfigError("sizing.auto needs sizing.names, sets, steps and scores: the table")
        n = len(self.names)
        if len(set(self.names)) != n:
            raise ConfigError(f"sizing.names repeats a name: {list(self.names)}")
        if len(self.sets) != n or len(self.scores) != n:
            raise ConfigError(
                f"sizing: {n} names need as many sets and scores rows (sets has "
                f"{len(self.sets)}, scores {len(self.scores)})"
            )
        if not self.steps or any(b <= a for a, b in zip(self.steps, self.steps[1:], strict=False)):
            raise ConfigError(f"sizing.steps must be ascending and not empty: {list(self.steps)}")
        if any(s <= 0 for s in self.steps):
            raise ConfigError(f"sizing.steps must be positive: {list(self.steps)}")
        for name, curve in zip(self.names, self.scores, strict=True):
            if not curve or len(curve) > len(self.steps):
                raise ConfigError(
                    f"sizing.scores of {name!r} has {len(curve)} values for "
                    f"{len(self.steps)} steps: give one per step, from the first"
                )
            if not all(math.isfinite(v) for v in curve):
                raise ConfigError(f"sizing.scores of {name!r} must be finite numbers")
        for name, changes in zip(self.names, self.sets, strict=True):
            for text in changes:
                try:
                    section = parse_override(text)[0]
                except ConfigError as e:
                    raise ConfigError(f"sizing.sets of {name!r}: {e}") from None
                if section not in ("model", "data", "train"):
                    raise ConfigError(
                        f"sizing.sets of {name!r}: {text!r} changes [{section}]; a shape changes "
                        "only [model], [data] or [train]"
                    )
        if self.chosen is not None and self.chosen not in self.names:
            raise ConfigError(f"sizing.chosen={self.chosen!r} is not one of sizing.names")
