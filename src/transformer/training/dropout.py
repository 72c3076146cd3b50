"""Late dropout (Liu et al. 2023, "Dropout Reduces Underfitting", §5): every dropout of the model
off for the first share of training, then on at the rates the model was built with.

Why: a small model on a small corpus under a time budget is in two regimes in turn. Early it
underfits, and dropout only slows it; late it over-fits (its training NLL falls below the
validation's), and dropout is what holds it back. `train.late_dropout = s` trains without dropout
until a share s of the budget is spent, then with it to the end. Whether that pays on a given
recipe is measured, not assumed: docs/experiments/ keeps the runs (dropout against none at a
fixed step count: table3.md; late dropout on the Bible hour: recipe.md).

The share is the one the cosine schedule reads (schedule.ScheduleClock.budget_spent): of
max_minutes on the run's clock when a time budget is set, of max_steps otherwise, whichever is
further along. The clock is saved in every checkpoint, so a resumed run switches at the same step
as the uninterrupted one.
"""

from __future__ import annotations

from torch import nn

from ..model.attention import MultiHeadAttention


def dropout_is_on(share_spent: float, late_dropout: float) -> bool:
    """Whether the update after `share_spent` (0..1) of the budget trains with dropout."""
    return share_spent >= late_dropout


class DropoutSwitch:
    """Sets every dropout rate of a model to 0 (off) or back to the rate it was built with (on):
    nn.Dropout modules (embeddings, residuals, the FFN's activation, heads) and the attention
    weights' dropout. Eval mode turns dropout off as before; this is for training steps."""

    def __init__(self, model: nn.Module) -> None:
        self.rates = [(m, "p", m.p) for m in model.modules() if isinstance(m, nn.Dropout)]
        self.rates += [
            (m, "dropout", m.dropout) for m in model.modules() if isinstance(m, MultiHeadAttention)
        ]
        self.on = True

    def set(self, on: bool) -> None:
        if on != self.on:
            for module, name, rate in self.rates:
                setattr(module, name, rate if on else 0.0)
            self.on = on


class LateDropout:
    """train.late_dropout as the loop applies it: before each update, dropout off while less than
    `late_dropout` of the budget is spent, on from then."""

    def __init__(self, model: nn.Module, late_dropout: float) -> None:
        self.switch = DropoutSwitch(model)
        self.late_dropout = late_dropout

    def before_update(self, share_spent: float) -> bool:
        """Set dropout for the next update; True when this turns it on (the loop logs it)."""
        on = dropout_is_on(share_spent, self.late_dropout)
        turned_on = on and not self.switch.on
        self.switch.set(on)
        return turned_on
