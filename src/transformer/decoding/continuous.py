"""Continuous (iteration-level) batching: running batches on the KV cache that requests join and
leave between decoding steps (Orca, OSDI 2022), for a server.

Legend (model/__init__.py): B rows, N requests (sentences), G beams per request, V vocabulary.

A `Lane` is one running batch of requests decoded the same way: `OneLane` takes one token per row
per step (greedy search and sampling, one row per request), `BeamLane` runs beam search (a group
of G rows per request, joining and leaving together). The rules:
- Each request gets the tokens it would get decoded alone (`greedy_search`, `sample`,
  `beam_search`, `Pipeline.generate`): its rows attend only to its own keys (the joined cache pads
  the others: KVCache.extend), its step count, length bound, min_len and repetition history are its
  own, and a sampled request draws from its own generator, one draw per step as alone.
- Newcomers are admitted together: their sources are encoded (or prompts read) in one batch, and
  they join the lane's cache (a beam request as G beams, all but one scored -inf: its first step
  then ranks the candidates of its one real beam, as beam search alone does).
- A request that finishes (</s>, its length bound, its beam search's stopping rule, or its
  on_token asking to stop) or that nobody waits for leaves at once and frees its rows.
- Sampling past the context (Pipeline._sample_long's rule): a language-model request that fills
  the model's positions before its max_new_tokens leaves and joins again with the last half of its
  context, its cache filled anew.
- All requests of a lane share its repetition guards (they are part of its key); their histories
  are left-padded with the id V, which the guards skip (repetition.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..config import DecodeConfig
from .beam import Hypothesis, _is_done, candidates, next_beams
from .penalties import length_penalty
from .repetition import RepetitionGuards
from .sampling import draw
from .step import Stepper, blocked_tokens


@dataclass(eq=False)
class Sequence:
    """One request in a running batch: a source (or prompt) and how to decode it."""

    source: list[int]
    settings: DecodeConfig
    generator: torch.Generator | None = None
    """Sampling draws from it (temperature > 0); None: the most probable token (greedy)."""
    max_new: int | None = None
    """Tokens to generate at most (</s> included); None: the source's bound from max_len_a/b."""
    on_token: Callable[[int], bool | None] | None = None
    """Called with each new token (</s> not included); a true return ends the request there."""
    cancelled: Callable[[], bool] = lambda: False
    """True when nobody waits for the result any more: the request leaves at the next step."""
    tokens: list[int] = field(default_factory=list)
    """The output so far (without </s>); for beam search, the best hypotheses at the end."""
    hypotheses: list[list[int]] = field(default_factory=list)
    """Beam search: the n_best outputs, best first."""
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


def lane_key(s: DecodeConfig) -> tuple:
    """What requests must share to share a lane: the kind of search, beam search's settings and the
    repetition guards. Lengths, min_len and the sampling draw are per request."""
    guards = (s.no_repeat_ngram_size, s.repetition_penalty)
    if s.beam_size > 1:
        return (
            "beam",
            s.beam_size,
            s.length_penalty,
            s.length_penalty_kind,
            s.early_stopping,
            s.n_best,
            *guards,
        )
    return ("one", *guards)


class Lane:
    """A running batch (module rules). `admit(seqs)` adds requests and returns those already done;
    `step()` advances every request one token and returns those that finished."""

    def __init__(self, model: torch.nn.Module, settings: DecodeConfig):
        self.model = model.eval()  # serving: no dropout, for good
        self.config = model.config
        self.settings = settings
        self.guards = RepetitionGuards.of(
            settings.no_repeat_ngram_size, settings.repetition_penalty
        )
        self.stepper: Stepper | None = None
        self.seqs: list[Sequence] = []
        self.log_probs: torch.Tensor | None = None  # (B, V) of every row's next token
        self.rejoin: list[Sequence] = []  # language-model requests whose context was full

    @property
    def rows(self) -> int:
        return 0 if self.log_probs is None else self.log_probs.shape[0]

    def __len__(self) -> int:
        return len(self.seqs) + len(self.rejoin)

    def _start(
        self, seqs: list[Sequence]
    ) -> tuple[Stepper | None, torch.Tensor | None, list[Sequence]]:
        """Encode newcomers' sources (or read their prompts) together: their stepper, first
        log-probabilities (N, V), and the requests that may produce a token (the others are done,
        with nothing: Stepper.max_new_tokens' bound is 0)."""
        stepper = Stepper(self.model, [s.context or s.source for s in seqs], guards=self.guards)
        limit = stepper.max_positions
        for seq, length in zip(seqs, stepper.src_lengths.tolist(), strict=True):
            s = seq.settings
            if stepper.decoder_only:  # Pipeline._sample_long's stay: up to the context's room
                if seq.max_new is None:
                    seq.max_new = s.max_new_tokens
                want = seq.max_new - len(seq.tokens)
                seq.room = want if limit is None else min(want, limit - length + 1)
            else:  # Stepper.max_new_tokens
                bound = math.floor(s.max_len_a * length + s.max_len_b)
                bound = bound if seq.max_new is None else seq.max_new
                seq.room = max(0, bound if limit is None else min(bound, limit))
            seq.steps = 0
            if seq.room <= 0:
                seq.finish = "length"
        log_probs = stepper.start()
        keep = [i for i, seq in enumerate(seqs) if not seq.done]
        if not keep:
            return None, None, []
        if len(keep) < len(seqs):
            index = torch.tensor(keep, dtype=torch.long, device=stepper.device)
            stepper.reorder(index)
            log_probs = log_probs[index]
        return stepper, log_probs, [seqs[i] for i in keep]

    def _join(self, stepper: Stepper, log_probs: torch.Tensor, seqs: list[Sequence]) -> None:
        """Newcomers (already past their first step where the lane needs it) join the lane."""
        if not seqs:
            return
        if self.stepper is None or not self.seqs:
            self.stepper, self.log_probs, self.seqs = stepper, log_probs, list(seqs)
            return
        mine, theirs = self.stepper, stepper
        mine.cache.extend(theirs.cache)
        if mine.output is not None:
            width = max(mine.output.shape[1], theirs.output.shape[1])
            vocab = log_probs.shape[1]
            mine.output = torch.cat(
                [_left_pad(mine.output, width, vocab), _left_pad(theirs.output, width, vocab)]
            )
        self.log_probs = torch.cat([self.log_probs, log_probs])
        self.seqs += seqs

    def admit(self, seqs: list[Sequence]) -> list[Sequence]:
        raise NotImplementedError

    def step(self) -> list[Sequence]:
        raise NotImplementedError


def _left_pad(history: torch.Tensor, width: int, value: int) -> torch.Tensor:
    missing = width - history.shape[1]
    if missing == 0:
        return history
    return torch.cat([history.new_full((history.shape[0], missing), value), history], dim=1)


def _left_pad_paths(paths: torch.Tensor, width: int) -> torch.Tensor:
    """(N, G, W) -> (N, G, width), zeros on the left (never read: each request reads its last
    steps)."""
    missing = width - paths.shape[2]
    return paths if missing == 0 else torch.nn.functional.pad(paths, (missing, 0))


class OneLane(Lane):
    """Greedy search and sampling: one row per request."""

    def admit(self, seqs: list[Sequence]) -> list[Sequence]:
        with torch.inference_mode():
            stepper, log_probs, alive = self._start(seqs)
            self._join(stepper, log_probs, alive)
        return [s for s in seqs if s.done]

    def step(self) -> list[Sequence]:
        if self.rejoin:
            back, self.rejoin = self.rejoin, []
            done = self.admit(back)
        else:
            done = []
        if not self.seqs:
            return done
        cfg = self.config
        with torch.inference_mode():
            steps = torch.tensor([s.steps for s in self.seqs])
            min_len = torch.tensor([s.settings.min_len for s in self.seqs])
            log_probs = self.log_probs
            blocked_tokens(log_probs, self.config, steps, min_len)
            greedy = [s.generator is None or s.settings.temperature == 0 for s in self.seqs]
            argmax = log_probs.argmax(dim=-1).tolist() if any(greedy) else None
            tokens, keep = [], []
            for i, seq in enumerate(self.seqs):
                s = seq.settings
                token = (
                    argmax[i]
                    if greedy[i]
                    else int(
                        draw(log_probs[i : i + 1], s.temperature, s.top_k, s.top_p, seq.generator)
                    )
                )
                tokens.append(token)
                seq.steps += 1
                if seq.cancelled():
                    seq.finish = "cancelled"
                elif token == cfg.eos_id:
                    seq.finish = "stop"
                else:
                    seq.tokens.append(token)
                    if seq.on_token is not None and seq.on_token(token):
                        seq.finish = "stop"
                    elif seq.steps >= seq.room:
                        if self.stepper.decoder_only and len(seq.tokens) < seq.max_new:
                            self._crop(seq)
                        else:
                            seq.finish = "length"
                if not seq.done and seq.steps < seq.room:
                    keep.append(i)
            done += [s for s in self.seqs if s.done]
            if len(keep) < len(self.seqs):
                index = torch.tensor(keep, dtype=torch.long, device=self.stepper.device)
                self.stepper.reorder(index)
                self.seqs = [self.seqs[i] for i in keep]
                tokens = [tokens[i] for i in keep]
            if self.seqs:
                self.log_probs = self.stepper.step(
                    torch.tensor(tokens, dtype=torch.long, device=self.stepper.device)
                )
            else:
                self.stepper = self.log_probs = None
        return done

    def _crop(self, seq: Sequence) -> None:
        """The context is full: the request joins again from the last half of its context and this
        stay's tokens (Pipeline._sample_long)."""
        stay = seq.tokens[len(seq.tokens) - seq.steps :]
        seq.context = ((seq.context or seq.source) + stay)[
            -max(1, self.stepper.max_positions // 2) :
        ]
        self.rejoin.append(seq)


class BeamLane(Lane):
    """Beam search: a group of G rows per request (beam.py's rules, step for step)."""

    def __init__(self, model: torch.nn.Module, settings: DecodeConfig):
        super().__init__(model, settings)
        s = settings
        self.k, self.alpha, self.kind = s.beam_size, s.length_penalty, s.length_penalty_kind
        self.early_stopping, self.n_best = s.early_stopping, s.n_best
        self.scores: torch.Tensor | None = None  # (N, G) live beams' log-probabilities
        self.paths: torch.Tensor | None = None
        """(N, G, W): each live beam's tokens, right-aligned (request i's are the last steps_i)."""
        self.finished: list[list[Hypothesis]] = []

    def admit(self, seqs: list[Sequence]) -> list[Sequence]:
        with torch.inference_mode():
            stepper, log_probs, alive = self._start(seqs)
            if alive:
                # Each newcomer enters with G beams: its one beam and G - 1 copies scored -inf,
                # whose candidates rank below every real one, so its first step in the lane
                # chooses what its first step alone chooses (beam._search starts from one beam).
                k, n = self.k, len(alive)
                rows = torch.arange(n, device=stepper.device).repeat_interleave(k)
                stepper.reorder(rows, group_size=k)  # a prefix tree: the copies share its cells
                new = BeamLane(self.model, self.settings)
                new.stepper, new.log_probs, new.seqs = stepper, log_probs[rows], alive
                new.scores = torch.full((n, k), -float("inf"), device=stepper.device)
                new.scores[:, 0] = 0.0
                new.paths = torch.zeros(n, k, 0, dtype=torch.long, device=stepper.device)
                new.finished = [[] for _ in alive]
                self._join_beams(new)
        return [s for s in seqs if s.done]

    def _join_beams(self, new: BeamLane) -> None:
        if not new.seqs:
            return
        if self.stepper is None or not self.seqs:
            self.stepper, self.log_probs, self.seqs = new.stepper, new.log_probs, new.seqs
            self.scores, self.paths, self.finished = new.scores, new.paths, new.finished
            return
        self._join(new.stepper, new.log_probs, new.seqs)
        self.scores = torch.cat([self.scores, new.scores])
        width = max(self.paths.shape[2], new.paths.shape[2])
        self.paths = torch.cat(
            [_left_pad_paths(self.paths, width), _left_pad_paths(new.paths, width)]
        )
        self.finished += new.finished

    def step(self) -> list[Sequence]:
        if not self.seqs:
            return []
        with torch.inference_mode():
            return self._advance()

    def _advance(self) -> list[Sequence]:
        """One step of beam search for every request in the lane (beam._search's body)."""
        cfg, device, k = self.config, self.stepper.device, self.k
        b, beams = self.scores.shape
        log_probs = self.log_probs
        steps = torch.tensor([s.steps for s in self.seqs]).repeat_interleave(beams)
        min_len = torch.tensor([s.settings.min_len for s in self.seqs]).repeat_interleave(beams)
        blocked_tokens(log_probs, cfg, steps, min_len)
        n_cand = 2 * k
        cand_scores, cand_beam, cand_token, is_eos = candidates(
            self.scores, log_probs, k, cfg.eos_id
        )
        at_max = torch.tensor([s.steps + 1 >= s.room for s in self.seqs], device=device)
        in_top_k = torch.arange(n_cand, device=device) < k
        final = in_top_k & (is_eos | at_max[:, None]) & torch.isfinite(cand_scores)
        where = final.nonzero()  # (F, 2): request, candidate
        if len(where):
            i_t, c_t = where[:, 0], where[:, 1]
            paths = self.paths[i_t, cand_beam[i_t, c_t]].tolist()  # (F, W)
            width = self.paths.shape[2]
            for i, path, eos, token, raw in zip(
                i_t.tolist(),
                paths,
                is_eos[i_t, c_t].tolist(),
                cand_token[i_t, c_t].tolist(),
                cand_scores[i_t, c_t].tolist(),
                strict=True,
            ):
                steps = self.seqs[i].steps
                tokens = path[width - steps :] + ([] if eos else [token])
                score = raw / length_penalty(steps + 1, self.alpha, self.kind)
                self.finished[i].append(Hypothesis(torch.tensor(tokens), score, raw))
        next_scores, next_beam, next_token = next_beams(
            cand_scores, cand_beam, cand_token, is_eos, k
        )
        best_live = next_scores.max(dim=1).values.tolist()
        keep, done = [], []
        for i, seq in enumerate(self.seqs):
            seq.steps += 1
            if seq.cancelled():
                seq.finish = "cancelled"
            elif (
                bool(at_max[i])
                or best_live[i] == -float("inf")
                or _is_done(
                    self.finished[i],
                    best_live[i],
                    seq.steps,
                    seq.room,
                    k,
                    self.alpha,
                    self.kind,
                    self.early_stopping,
                )
            ):
                best = sorted(self.finished[i], key=lambda h: -h.score)[: self.n_best]
                seq.hypotheses = [h.tokens.tolist() for h in best]
                seq.tokens = seq.hypotheses[0] if seq.hypotheses else []
                seq.finish = "stop"
            if seq.done:
                done.append(seq)
            else:
                keep.append(i)
        if not keep:
            self.stepper = self.log_probs = self.scores = None
            self.seqs, self.paths, self.finished = [], None, []
            return done
        keep_t = torch.tensor(keep, dtype=torch.long, device=device)
        rows = (keep_t[:, None] * beams + next_beam[keep_t]).view(-1)
        self.stepper.reorder(rows, group_size=k, sources=None if len(keep) == b else keep_t)
        self.paths = torch.cat(
            [self.paths[keep_t[:, None], next_beam[keep_t]], next_token[keep_t, :, None]], dim=2
        )
        self.scores = next_scores[keep_t]
        self.finished = [self.finished[i] for i in keep]
        self.seqs = [self.seqs[i] for i in keep]
        self.log_probs = self.stepper.step(next_token[keep_t].view(-1))
        return done


def new_lane(model: torch.nn.Module, settings: DecodeConfig) -> Lane:
    return (BeamLane if settings.beam_size > 1 else OneLane)(model, settings)
