"""The one-row step: greedy search and sampling, one row per request and one token per row per step,
over a lane (lanes.py). `greedy_search` and `sample` are this lane stepped to the end (batch.py);
the server's continuous batching steps the same lane between admissions.

Legend (model/__init__.py): B rows, R requests of an offline batch, V vocabulary, T output tokens,
W the widest stay kept; attention records as in history.py (layers, H heads, S source length,
keys).

The rules of a step:
- Padding is never generated (unless it is also </s>); </s> is blocked before a request's min_len
  tokens (step.blocked_tokens). The repetition guards are in the log-probabilities already
  (the Stepper applies them).
- A request takes the most probable token when it has no generator or temperature 0; otherwise it
  draws (draw.py). Requests sharing a generator draw together, one call over their rows in row
  order: an offline batch's one generator draws once a step for the whole batch, a server
  request's own generator once a step for its row.
- A request ends at </s> ("stop") or at its room ("length"); a request that watches its tokens
  (on_token, cancelled) may end earlier. A language model's request whose context fills before
  max_new joins again from the last half of its context (generate.sample_long's rule) when it
  allows it (Request.rejoin).
- Finished rows leave the cache at once; the others feed their token and get the next
  log-probabilities.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .draw import draw
from .history import AttentionHistory
from .lanes import Lane, Request
from .step import Stepper, blocked_tokens

OnStep = Callable[[torch.Tensor, torch.Tensor], None]


def self_key_count(stepper: Stepper, steps: int) -> int:
    """Self-attention keys seen while predicting `steps` tokens: <s> (or the decoder prefix) +
    outputs, or the padded prompt + outputs."""
    if steps == 0:
        return 0
    first = stepper.src_ids.shape[1] if stepper.decoder_only else stepper.prefix_length
    return first + steps - 1


def attention_history(stepper: Stepper, rows: int, steps: int) -> AttentionHistory:
    """Room for `rows` rows of attention over `steps` steps."""
    return AttentionHistory(
        rows,
        len(stepper.model.decoder.layers),
        stepper.config.n_heads,
        steps,
        self_key_count(stepper, steps),
        None if stepper.decoder_only else stepper.source_positions,
        stepper.device,
    )


class OneLane(Lane):
    """Greedy search and sampling: one row per request (module rules)."""

    def __init__(self, model: torch.nn.Module, settings):
        super().__init__(model, settings)
        self.steps = self.room = self.min_len = None  # (B,) each, on the CPU
        self.paths: torch.Tensor | None = None  # (B, W): each row's tokens this stay, right-aligned
        self.keys: list = []  # each row's draw: None (the most probable token) or its generator's
        self.hooked: list[bool] = []  # each row's request watches its tokens (Request.hooked)
        self.on_step: OnStep | None = None
        """Offline: called after each step with the request numbers of the rows (B,) and their
        tokens (B,), </s> included."""
        self.numbers: torch.Tensor | None = None  # (B,) offline: each row's request number
        self.totals: torch.Tensor | None = None  # (R,) offline: summed log-probabilities
        self.history: AttentionHistory | None = None  # (R, ...) offline: attention by request

    def admit_batch(self, stepper: Stepper, seqs: list[Request]) -> None:
        self.totals = torch.zeros(len(seqs), device=stepper.device)
        self.numbers = None
        super().admit_batch(stepper, seqs)
        if stepper.need_weights:
            steps = max((seq.room for seq in seqs), default=0)
            self.history = attention_history(stepper, len(seqs), steps)

    def _join_new(self, stepper, log_probs, seqs, numbers) -> None:
        if self.recording:
            self.numbers = torch.tensor(numbers, dtype=torch.long, device=stepper.device)
        fresh = not self.seqs
        self._join(stepper, log_probs, seqs)
        steps = torch.zeros(len(seqs), dtype=torch.long)
        room = torch.tensor([s.room for s in seqs])
        min_len = torch.tensor([s.settings.min_len for s in seqs])
        paths = torch.zeros(len(seqs), 0, dtype=torch.long, device=stepper.device)
        keys, hooked = [_draw_key(s) for s in seqs], [s.hooked for s in seqs]
        if fresh:
            self.steps, self.room, self.min_len, self.paths = steps, room, min_len, paths
            self.keys, self.hooked = keys, hooked
            return
        self.steps = torch.cat([self.steps, steps])
        self.room = torch.cat([self.room, room])
        self.min_len = torch.cat([self.min_len, min_len])
        self.paths = torch.cat([self.paths, left_pad_paths(paths, self.paths.shape[1])])
        self.keys += keys
        self.hooked += hooked

    def step(self) -> list[Request]:
        done = []
        if self.rejoin:
            back, self.rejoin = self.rejoin, []
            done = self.admit(back)
        if not self.seqs:
            return done
        with torch.inference_mode():
            return done + self.advance()

    def advance(self) -> list[Request]:
        """One token for every row (module rules); returns the requests that finished. `step` with
        neither the rejoining nor inference mode: an offline batch (batch.py) steps with it, inside
        step.inference."""
        cfg, stepper, log_probs = self.config, self.stepper, self.log_probs
        if self.history is not None:
            self.history.write(self.clock, stepper.weights, self.numbers)
        blocked_tokens(log_probs, cfg, self.steps, self.min_len)
        tokens = self._choose(log_probs)  # (B,)
        if self.on_step is not None:
            self.on_step(self.numbers, tokens)
        if self.totals is not None:
            self.totals[self.numbers] += log_probs.gather(1, tokens[:, None]).squeeze(1)
        self.clock += 1
        self.steps += 1
        self.paths = torch.cat([self.paths, tokens[:, None]], dim=1)
        is_eos = (tokens == cfg.eos_id).cpu()
        stop = (is_eos | (self.steps >= self.room)).tolist()  # (B,)
        events = [
            i for i, (end, watch) in enumerate(zip(stop, self.hooked, strict=True)) if end or watch
        ]
        if events:
            self._events(events, tokens, is_eos.tolist(), stop)
        leave = [i for i in events if stop[i] or self.seqs[i].done]
        done = [self.seqs[i] for i in events if self.seqs[i].done]
        if leave:
            gone = set(leave)
            keep = [i for i in range(len(self.seqs)) if i not in gone]
            index = torch.tensor(keep, dtype=torch.long, device=stepper.device)
            stepper.reorder(index)  # finished rows leave the cache
            self._keep(keep, index)
            tokens = tokens[index]
        if self.seqs:
            self.log_probs = stepper.step(tokens)
        else:
            self.stepper = self.log_probs = None
        return done

    def _choose(self, log_probs: torch.Tensor) -> torch.Tensor:
        """Each row's token (B,) (module rules: argmax, or one draw per generator)."""
        if all(key is None for key in self.keys):
            return log_probs.argmax(dim=-1)
        groups: dict = {}
        for i, key in enumerate(self.keys):
            if key is not None:
                groups.setdefault(key, []).append(i)
        if len(groups) == 1 and len(next(iter(groups.values()))) == len(self.keys):
            return _draw_rows(log_probs, self.seqs[0])  # one generator for the whole batch
        tokens = log_probs.argmax(dim=-1)
        for rows in groups.values():
            part = (
                log_probs[rows[0] : rows[0] + 1]
                if len(rows) == 1
                else log_probs[torch.tensor(rows, device=log_probs.device)]
            )
            tokens[rows] = _draw_rows(part, self.seqs[rows[0]])
        return tokens

    def _events(self, events: list[int], tokens, is_eos, stop) -> None:
        """What happens to the rows that stop or watch their tokens (module rules)."""
        width = self.paths.shape[1]
        values = tokens[events].tolist()
        quiet = [i for i in events if not self.seqs[i].hooked]
        stays = dict(zip(quiet, self.paths[quiet].tolist() if quiet else [], strict=True))
        for i, token in zip(events, values, strict=True):
            seq, eos = self.seqs[i], is_eos[i]
            seq.steps = int(self.steps[i])
            if i in stays:  # a row that stops, its stay's tokens taken at once
                seq.tokens += stays[i][width - seq.steps : width - int(eos)]
            if seq.hooked and seq.cancelled():
                seq.finish = "cancelled"
            elif eos:
                seq.finish = "stop"
            else:
                if seq.hooked:
                    seq.tokens.append(token)
                if seq.on_token is not None and seq.on_token(token):
                    seq.finish = "stop"
                elif stop[i]:
                    self._at_room(seq)

    def _at_room(self, seq: Request) -> None:
        """A request at its room: done ("length"), or (a language model's context full before
        max_new) back for another stay from the last half of its context."""
        if self.stepper.decoder_only and seq.rejoin and len(seq.tokens) < seq.max_new:
            stay = seq.tokens[len(seq.tokens) - seq.steps :]
            keep = max(1, self.stepper.max_positions // 2)
            seq.context = ((seq.context or seq.source) + stay)[-keep:]
            self.rejoin.append(seq)
        else:
            seq.finish = "length"

    def _keep(self, keep: list[int], index: torch.Tensor) -> None:
        """Only the rows `keep` (index: the same on the lane's device) stay."""
        rows = torch.tensor(keep, dtype=torch.long)
        self.seqs = [self.seqs[i] for i in keep]
        self.keys = [self.keys[i] for i in keep]
        self.hooked = [self.hooked[i] for i in keep]
        self.steps, self.room, self.min_len = self.steps[rows], self.room[rows], self.min_len[rows]
        self.paths = self.paths[index]
        if self.numbers is not None:
            self.numbers = self.numbers[index]


def _draw_key(seq: Request):
    """Rows with the same key draw together: None takes the most probable token."""
    s = seq.settings
    if seq.generator is None or s.temperature == 0:
        return None
    return (id(seq.generator), s.temperature, s.top_k, s.top_p)


def _draw_rows(log_probs: torch.Tensor, seq: Request) -> torch.Tensor:
    s = seq.settings
    return draw(log_probs, s.temperature, s.top_k, s.top_p, seq.generator)


def left_pad_paths(paths: torch.Tensor, width: int) -> torch.Tensor:
    """(..., W) -> (..., max(W, width)), zeros on the left (never read: a row reads its last
    steps)."""
    missing = width - paths.shape[-1]
    return paths if missing <= 0 else torch.nn.functional.pad(paths, (missing, 0))
