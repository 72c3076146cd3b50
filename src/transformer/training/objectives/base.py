"""What every objective shares: the interface the loop drives, the step's sums, one batch cache and
one validation loop.

The rules every objective keeps:
- The loss is summed over a step's units (target tokens, chosen tokens or texts) and divided by
  their count over the whole step (all accumulated batches, all processes): `units` gives a
  batch's count before any batch of the step runs.
- What is random in a batch (masking, corruption, augmentation) draws from a generator seeded by
  data.batching.batch_seed(seed, epoch, batch), never from the global one, so a resumed run draws
  what the uninterrupted one did. `key` = (epoch, batch number in the epoch) names a batch.
- Validation runs in eval mode over the same batches every time (one fixed masking or corruption
  of the validation texts), through `validation_sums`: loss, NLL and perplexity per unit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...config import RunConfig
from ...evaluation.metrics import perplexity
from ...model.transformer import Model

MAX_LOG_PPL = 50.0
"""Perplexity is logged as exp(min(mean NLL, this)): a diverged run logs exp(50), not an
overflow."""


def autocast(device: torch.device, precision: str):
    """The forward pass's autocast context for train.precision (none for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


@dataclass
class StepSums:
    """A batch's summed loss (to optimise) and NLL (to report), the units they are summed over, and
    the input tokens it processed (for tokens/s)."""

    loss: torch.Tensor
    nll: torch.Tensor
    units: int
    tokens: int
    logits: torch.Tensor | None = None
    """mlm and classify: the (detached) logits the loss was taken on, for validation's accuracy;
    qa: the start and end logits (B, L, 2), for its answers."""


class Objective:
    """The interface the loop uses; see the package doc for the objectives."""

    name = ""
    best_key, higher_is_better = "valid_loss", False
    """The validation metric best/ is chosen by, and which way is better."""

    def __init__(self, config: RunConfig):
        self.config = config
        self.model_config = None  # set by bind(), once the model exists

    # data
    def batches(self, epoch: int) -> Sequence[list[int]]:
        raise NotImplementedError

    def padding_share(self, batches: Sequence[list[int]]) -> float:
        raise NotImplementedError

    def units(self, indices: list[int], key: tuple[int, int]) -> int:
        """What the loss of this batch is summed over; key = (epoch, batch number), as collate
        takes it."""
        raise NotImplementedError

    def collate(self, indices: list[int], key: tuple[int, int]):
        raise NotImplementedError

    def attention_shape(self) -> tuple[int, int]:
        """(rows, positions) of a typical training batch: where attention_impl = "auto" is measured
        (here from `sizes`, the padded row of each example, which the token-batched objectives
        keep)."""
        return typical_shape(self.sizes, self.config.train.batch_tokens)

    @property
    def has_valid(self) -> bool:
        raise NotImplementedError

    # model
    def new_model(self) -> Model:
        """A fresh model for the run, or the one train.init_from names (with a new head where the
        objective needs one)."""
        raise NotImplementedError

    def bind(self, model: Model) -> None:
        self.model_config = model.config

    def loss(self, net: torch.nn.Module, model: Model, batch, device: torch.device) -> StepSums:
        raise NotImplementedError

    def validate(self, model: Model, device: torch.device) -> dict[str, float]:
        raise NotImplementedError

    def describe(self, result: dict[str, float]) -> str:
        return f"valid loss {result['valid_loss']:.4f}  ppl {result['valid_ppl']:.2f}"

    def improved(self, result: dict[str, float], best: float | None) -> bool:
        value = result[self.best_key]
        return best is None or (value > best if self.higher_is_better else value < best)

    def save_files(self) -> dict:
        """What save_model writes besides the weights: tokenizer(s) and the objective's records."""
        raise NotImplementedError


def typical_shape(sizes, batch_tokens: int) -> tuple[int, int]:
    """The median padded row length of token-count batches, and how many such rows a batch holds."""
    length = max(1, int(np.median(np.asarray(sizes)))) if len(sizes) else 1
    return max(1, batch_tokens // length), length


class BatchCache:
    """Batches made once per key: the loop asks for a batch twice in a step (its unit count, then
    the batch), and a batch drawn at random must be the same both times (and cost one draw).
    Only the current step's batches are ever asked for again, so the cache is emptied when full."""

    def __init__(self, limit: int = 64):
        self.limit = limit
        self.batches: dict[tuple[int, int], Any] = {}

    def get(self, key: tuple[int, int], make: Callable[[], Any]):
        """The batch of `key`, made by make() the first time it is asked for."""
        if key not in self.batches:
            if len(self.batches) > self.limit:
                self.batches.clear()
            self.batches[key] = make()
        return self.batches[key]


@torch.no_grad()
def validation_sums(
    objective: Objective,
    model: Model,
    device: torch.device,
    batches: Iterable,
    observe: Callable[[Any, StepSums], None] | None = None,
) -> dict[str, float]:
    """Loss, NLL and perplexity per unit over validation batches, in eval mode (the model's mode is
    restored after); observe(batch, sums) sees each batch on the device with its sums (accuracy)."""
    was_training = model.training
    model.eval()
    loss = nll = units = 0.0
    for batch in batches:
        batch = batch.to(device)
        out = objective.loss(model, model, batch, device)
        # summed on the device, read once at the end (a GPU then never waits between batches)
        loss, nll, units = loss + out.loss.detach(), nll + out.nll.detach(), units + out.units
        if observe is not None:
            observe(batch, out)
    model.train(was_training)
    loss, nll = float(loss), float(nll)
    return {
        "valid_loss": loss / units,
        "valid_nll": nll / units,
        "valid_ppl": perplexity(nll, units, max_nll=MAX_LOG_PPL),
    }
