"""Lanes: running batches of requests decoded over one KV cache, one token per request per step.
Every search runs on one: the offline searches (`greedy_search`, `sample`, `beam_search`) admit
their batch at once and step the lane until it is empty; the server (continuous.py) admits
requests between steps and answers each as it finishes.

Legend (model/__init__.py): B rows, N requests, G beams per request, V vocabulary, W the widest
output kept so far; R requests of an offline batch.

The rules a lane keeps (the searches' own rules: one_row.py and beams.py):
- A request's decoding is its own: its rows attend only to its own keys (the joined cache pads the
  others: KVCache.extend), and its step count, length bound, min_len and repetition history are its
  own, whatever joined or left around it.
- Admission: newcomers' sources are encoded (or prompts read) together in one Stepper, their first
  log-probabilities computed, and they join the lane's cache. A request with no room for a token
  (its length bound, or the position table, allows none) is done at once, with nothing.
- Length bound: `max_new` tokens when the request gives it, else floor(max_len_a * source length +
  max_len_b) (Stepper.max_new_tokens' rule), </s> included; capped by the position table (an
  encoder-decoder's forced prefix and a prompt take positions first).
- A request that finishes, or that nobody waits for, leaves at once and frees its rows.
- An offline batch (`admit_batch`) comes with its Stepper already built (tensors with masks, speech
  features, pixels, a forced prefix, suppressed tokens, attention weights asked for) into an empty
  lane; the lane then also records what the offline results need (summed log-probabilities, the
  attention weights), by request number, and admits nothing more.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ...config import DecodeConfig
from .repetition import RepetitionGuards
from .step import Stepper


def never() -> bool:
    """The default of Request.cancelled: someone always waits."""
    return False


@dataclass(eq=False)
class Request:
    """One request in a lane: a source (or prompt) and how to decode it."""

    source: list[int] | None
    """Token ids; None for an offline batch's requests (admit_batch's Stepper holds the sources)."""
    settings: DecodeConfig
    generator: torch.Generator | None = None
    """Sampling draws from it (temperature > 0); None: the most probable token (greedy). Requests
    that share one draw together, in one call over their rows (an offline batch's one generator)."""
    max_new: int | None = None
    """Tokens to generate at most (</s> included); None: the source's bound from max_len_a/b."""
    on_token: Callable[[int], bool | None] | None = None
    """Called with each new token (</s> not included); a true return ends the request there."""
    cancelled: Callable[[], bool] = never
    """True when nobody waits for the result any more: the request leaves at the next step."""
    rejoin: bool = True
    """A language model's request whose context fills before max_new joins again from the last half
    of its context (generate.sample_long's rule); False: it ends there ("length"), as `sample`."""
    tokens: list[int] = field(default_factory=list)
    """The output so far (without </s>); for beam search, the best hypothesis at the end."""
    hypotheses: list[list[int]] = field(default_factory=list)
    """Beam search: the n_best outputs, best first."""
    results: list = field(default_factory=list)
    """Beam search: the n_best finished hypotheses (beams.Hypothesis), best first."""
    finish: str | None = None
    """"stop" (</s> or on_token), "length" or "cancelled" once done."""
    steps: int = 0
    """Tokens chosen since the request (re)joined, </s> included: its step count."""
    room: int = 0
    """The steps it may take in this stay (its length bound, or the context's room)."""
    context: list[int] = field(default_factory=list)
    """A language model's prompt plus the tokens of earlier stays (sampling past the context)."""

    @property
    def done(self) -> bool:
        return self.finish is not None

    @property
    def hooked(self) -> bool:
        """Whether the request watches its tokens one by one (on_token, cancelled)."""
        return self.on_token is not None or self.cancelled is not never


class Lane:
    """A running batch (module rules). `admit(requests)` adds requests and returns those already
    done; `step()` advances every request one token and returns those that finished."""

    def __init__(self, model: torch.nn.Module, settings: DecodeConfig):
        self.model = model.eval()  # decoding: no dropout
        self.config = model.config
        self.settings = settings
        self.guards = RepetitionGuards.of(
            settings.no_repeat_ngram_size, settings.repetition_penalty
        )
        self.stepper: Stepper | None = None
        self.seqs: list[Request] = []
        self.log_probs: torch.Tensor | None = None  # (B, V) of every row's next token
        self.rejoin: list[Request] = []  # language-model requests whose context was full
        self.recording = False  # an offline batch's lane (admit_batch)
        self.clock = 0  # steps since an offline batch's admission: its attention's row

    @property
    def rows(self) -> int:
        return 0 if self.log_probs is None else self.log_probs.shape[0]

    def __len__(self) -> int:
        return len(self.seqs) + len(self.rejoin)

    def admit(self, seqs: list[Request]) -> list[Request]:
        """Newcomers join (module rules); returns those done at once."""
        if self.recording:
            raise ValueError("this lane decodes an offline batch: it admits nothing more")
        with torch.inference_mode():
            stepper = Stepper(self.model, [s.context or s.source for s in seqs], guards=self.guards)
            self._enter(stepper, seqs)
        return [s for s in seqs if s.done]

    def admit_batch(self, stepper: Stepper, seqs: list[Request]) -> None:
        """An offline batch, one request per row of its Stepper, into this empty lane (module
        rules). Call inside step.inference."""
        if len(self):
            raise ValueError("an offline batch needs an empty lane")
        self.recording, self.clock = True, 0
        self._enter(stepper, seqs)

    def _enter(self, stepper: Stepper, seqs: list[Request]) -> None:
        """Newcomers' first log-probabilities, then the lane's own way of joining (_join_new)."""
        set_rooms(stepper, seqs)
        keep = [i for i, seq in enumerate(seqs) if not seq.done]
        if not keep:
            return
        log_probs = stepper.start()  # (N, V)
        if len(keep) < len(seqs):  # requests with no room leave before the first step
            index = torch.tensor(keep, dtype=torch.long, device=stepper.device)
            stepper.reorder(index)
            log_probs = log_probs[index]
            if stepper.weights is not None:
                stepper.weights = {
                    k: None if v is None else [w[index] for w in v]
                    for k, v in stepper.weights.items()
                }
        self._join_new(stepper, log_probs, [seqs[i] for i in keep], keep)

    def _join_new(
        self, stepper: Stepper, log_probs: torch.Tensor, seqs: list[Request], numbers: list[int]
    ) -> None:
        """Newcomers (numbers: their places in their admission) join the lane."""
        raise NotImplementedError

    def _join(self, stepper: Stepper, log_probs: torch.Tensor, seqs: list[Request]) -> None:
        """Newcomers' cache, guards' history and log-probabilities join the lane's."""
        if self.stepper is None or not self.seqs:
            self.stepper, self.log_probs, self.seqs = stepper, log_probs, list(seqs)
            return
        mine, theirs = self.stepper, stepper
        mine.cache.extend(theirs.cache)
        if mine.output is not None:
            width = max(mine.output.shape[1], theirs.output.shape[1])
            vocab = log_probs.shape[1]
            mine.output = torch.cat(
                [left_pad(mine.output, width, vocab), left_pad(theirs.output, width, vocab)]
            )
        self.log_probs = torch.cat([self.log_probs, log_probs])
        self.seqs += seqs

    def step(self) -> list[Request]:
        raise NotImplementedError


def set_rooms(stepper: Stepper, seqs: list[Request]) -> None:
    """Each request's room for this stay (module rules), its step count reset; a request with no
    room is done ("length")."""
    limit = stepper.max_positions
    for seq, length in zip(seqs, stepper.src_lengths.tolist(), strict=True):
        s = seq.settings
        if seq.max_new is None:
            seq.max_new = max(0, math.floor(s.max_len_a * length + s.max_len_b))
        if stepper.decoder_only:  # the prompt takes its positions: N <= max_positions - P + 1
            want = seq.max_new - len(seq.tokens)
            room = want if limit is None else min(want, limit - length + 1)
        else:  # <s> (or the forced prefix) first: T <= max_positions - prefix + 1
            room = (
                seq.max_new
                if limit is None
                else min(seq.max_new, limit - stepper.prefix_length + 1)
            )
        seq.room, seq.steps = max(0, room), 0
        if seq.room == 0:
            seq.finish = "length"


def left_pad(history: torch.Tensor, width: int, value: int) -> torch.Tensor:
    """(B, T) -> (B, width), `value` on the left."""
    missing = width - history.shape[1]
    if missing == 0:
        return history
    return torch.cat([history.new_full((history.shape[0], missing), value), history], dim=-1)
