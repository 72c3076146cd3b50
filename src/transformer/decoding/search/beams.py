"""The beam step: beam search over a lane (lanes.py), a group of G rows per request (the paper's
decoder, §6.1: beam 4, length penalty alpha = 0.6). `beam_search` is this lane stepped to the end
(batch.py); the server's continuous batching steps the same lane between admissions.

Legend (model/__init__.py): N requests (sentences) still searching, G beam size, V vocabulary,
M = 2G candidates per sentence, W the longest path kept; attention records as in history.py
(layers, H heads, T' steps, S source length, keys).

Conventions (also in docs):
- Each step ranks the G*V continuations of a sentence's live beams by raw log-probability and
  keeps the top 2G candidates, so the G next live beams never run short when some candidates
  are </s>. At the first step only one beam exists, so it alone expands.
- A </s> candidate ranked within the top G becomes a finished hypothesis, scored
  log P(Y | X) / lp(|Y|) with |Y| counting </s>, or only the output tokens with
  length_counts_eos false (CTranslate2's Whisper; penalties.py). Live beams are ranked by the
  raw log-probability; the length penalty applies to finished hypotheses only.
- At a sentence's maximum length its top-G candidates are all finalised; those that are not
  </s> are finalised without it (|Y| = the maximum length).
- early_stopping=True: a sentence stops once G hypotheses have finished (fairseq, Hugging Face's
  early_stopping=True). "never": it stops only when no live beam can still beat the G-th best
  finished one, bounding a live beam by its log-probability over the most favourable length
  penalty it could still reach. False: Hugging Face's heuristic (the bound uses the current length).
- A sentence that stops leaves the cache: finished sentences stop costing work.
- Repetition guards (repetition.py) act on each hypothesis's own output, which follows it through
  the reorders; the log-probabilities ranked above are those the guards leave.
- Joining: requests that enter a lane that has not stepped yet (an offline batch, or the server's
  first admissions) enter with their one beam; requests that join a lane already stepping enter
  with G beams, their one beam and G - 1 copies scored -inf, whose candidates rank below every real
  one, so their first step chooses what it chooses alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .history import AttentionHistory
from .lanes import Lane, Request
from .one_row import attention_history, left_pad_paths
from .penalties import best_attainable, length_penalty, penalized_score
from .step import blocked_tokens


@dataclass
class Hypothesis:
    """A finished hypothesis: output tokens (without </s>), its penalised score and raw
    log-probability."""

    tokens: torch.Tensor
    """(T,) output ids, without </s>."""
    score: float
    """log P(Y | X) / lp(|Y|): what hypotheses are ranked by."""
    log_prob: float
    """log P(Y | X), </s> included when the hypothesis ended with it."""
    attention: dict | None = None
    """{"self": (layers, H, T', keys), "cross": (layers, H, T', S)} when asked for."""


def is_done(
    finished: list[Hypothesis],
    best_live: float,
    step_len: int,
    max_len: int,
    k: int,
    alpha: float,
    kind: str,
    early_stopping: bool | str,
    counts_eos: bool = True,
) -> bool:
    """Whether a sentence stops (the early_stopping conventions), given its finished hypotheses and
    its best live beam's log-probability after step_len tokens (counts_eos: whether |Y| counts
    </s>)."""
    if len(finished) < k:
        return False
    if early_stopping is True:
        return True
    worst_kept = sorted(h.score for h in finished)[-k]  # the G-th best finished score
    if early_stopping == "never":
        bound = best_attainable(best_live, step_len, max_len, alpha, kind, counts_eos)
    else:  # False: Hugging Face's heuristic, the current length
        bound = best_live / length_penalty(step_len, alpha, kind)
    return not bound > worst_kept


class BeamLane(Lane):
    """Beam search: a group of G rows per request (module rules)."""

    def __init__(self, model: torch.nn.Module, settings):
        super().__init__(model, settings)
        s = settings
        self.k, self.alpha, self.kind = s.beam_size, s.length_penalty, s.length_penalty_kind
        self.early_stopping, self.n_best = s.early_stopping, s.n_best
        self.counts_eos = s.length_counts_eos
        self.scores: torch.Tensor | None = None  # (N, G) live beams' log-probabilities
        self.paths: torch.Tensor | None = None
        """(N, G, W): each live beam's tokens, right-aligned (request i's are the last steps_i)."""
        self.finished: list[list[Hypothesis]] = []
        self.stepped = False  # whether the lane's requests have G beams (module rules)
        self.history: AttentionHistory | None = None  # offline: attention by cache row

    def admit_batch(self, stepper, seqs: list[Request]) -> None:
        super().admit_batch(stepper, seqs)
        if stepper.need_weights and self.seqs:
            steps = max(seq.room for seq in self.seqs)
            self.history = attention_history(stepper, len(self.seqs), steps)

    def _join_new(self, stepper, log_probs, seqs, numbers) -> None:
        n, k, device = len(seqs), self.k, stepper.device
        beams = 1
        if self.stepped and self.seqs:  # G beams, all but one scored -inf (module rules)
            beams = k
            rows = torch.arange(n, device=device).repeat_interleave(k)
            stepper.reorder(rows, group_size=k)  # a prefix tree: the copies share its cells
            log_probs = log_probs[rows]
        scores = torch.full((n, beams), -float("inf"), device=device)
        scores[:, 0] = 0.0
        paths = torch.zeros(n, beams, 0, dtype=torch.long, device=device)
        fresh = not self.seqs
        self._join(stepper, log_probs, seqs)
        if fresh:
            self.scores, self.paths, self.finished = scores, paths, [[] for _ in seqs]
            self.stepped = False
            return
        self.scores = torch.cat([self.scores, scores])
        width = max(self.paths.shape[2], paths.shape[2])
        self.paths = torch.cat([left_pad_paths(self.paths, width), left_pad_paths(paths, width)])
        self.finished += [[] for _ in seqs]

    def step(self) -> list[Request]:
        if not self.seqs:
            return []
        with torch.inference_mode():
            return self.advance()

    def advance(self) -> list[Request]:
        """One step of beam search for every request in the lane (module rules): `step` without
        inference mode, which an offline batch (batch.py) steps with, inside step.inference."""
        cfg, device, k = self.config, self.stepper.device, self.k
        b, beams = self.scores.shape
        log_probs = self.log_probs
        if self.history is not None:
            self.history.write(self.clock, self.stepper.weights)
        steps = torch.tensor([s.steps for s in self.seqs]).repeat_interleave(beams)
        min_len = torch.tensor([s.settings.min_len for s in self.seqs]).repeat_interleave(beams)
        blocked_tokens(log_probs, cfg, steps, min_len)
        cand_scores, cand_beam, cand_token, is_eos = candidates(
            self.scores, log_probs, k, cfg.eos_id
        )  # (N, M), best first
        at_max = torch.tensor([s.steps + 1 >= s.room for s in self.seqs], device=device)  # (N,)
        in_top_k = torch.arange(2 * k, device=device) < k
        final = in_top_k & (is_eos | at_max[:, None]) & torch.isfinite(cand_scores)  # (N, M)
        self._finalise(final.nonzero(), beams, cand_scores, cand_beam, cand_token, is_eos)
        next_scores, next_beam, next_token = next_beams(
            cand_scores, cand_beam, cand_token, is_eos, k
        )
        done = self._stop(at_max.tolist(), next_scores.max(dim=1).values.tolist())
        keep = [i for i, seq in enumerate(self.seqs) if not seq.done]
        self.clock += 1
        if not keep:
            self.stepper = self.log_probs = self.scores = None
            self.seqs, self.paths, self.finished = [], None, []
            return done
        keep_t = torch.tensor(keep, dtype=torch.long, device=device)
        rows = (keep_t[:, None] * beams + next_beam[keep_t]).view(-1)  # cache rows of kept beams
        # Beams follow their parents within their sentence; stopped sentences leave the cache.
        self.stepper.reorder(rows, group_size=k, sources=None if len(keep) == b else keep_t)
        if self.history is not None:
            self.history.reorder(rows)
        self.paths = torch.cat(
            [self.paths[keep_t[:, None], next_beam[keep_t]], next_token[keep_t, :, None]], dim=2
        )
        self.scores = next_scores[keep_t]
        self.finished = [self.finished[i] for i in keep]
        self.seqs = [self.seqs[i] for i in keep]
        self.stepped = True
        self.log_probs = self.stepper.step(next_token[keep_t].view(-1))
        return done

    def _finalise(self, where, beams, cand_scores, cand_beam, cand_token, is_eos) -> None:
        """The finished hypotheses of the candidates `where` (F, 2): request, candidate."""
        if not len(where):
            return
        i_t, c_t = where[:, 0], where[:, 1]
        parent = cand_beam[i_t, c_t]
        paths = self.paths[i_t, parent].tolist()  # (F, W)
        width = self.paths.shape[2]
        for i, beam, path, eos, token, raw in zip(
            i_t.tolist(),
            parent.tolist(),
            paths,
            is_eos[i_t, c_t].tolist(),
            cand_token[i_t, c_t].tolist(),
            cand_scores[i_t, c_t].tolist(),
            strict=True,
        ):
            steps = self.seqs[i].steps
            tokens = path[width - steps :] + ([] if eos else [token])
            attention = (
                None if self.history is None else self.history.take(i * beams + beam, len(tokens))
            )
            length = len(tokens) + (1 if eos and self.counts_eos else 0)  # |Y|
            score = penalized_score(raw, length, self.alpha, self.kind)
            self.finished[i].append(Hypothesis(torch.tensor(tokens), score, raw, attention))

    def _stop(self, at_max: list[bool], best_live: list[float]) -> list[Request]:
        """Each request takes its step; those that stop (their length bound, no live beam, the
        early_stopping rule, or cancelled) get their n_best hypotheses and are returned."""
        done = []
        for i, seq in enumerate(self.seqs):
            seq.steps += 1
            if seq.cancelled():
                seq.finish = "cancelled"
            elif (
                at_max[i]
                or best_live[i] == -float("inf")
                or is_done(
                    self.finished[i],
                    best_live[i],
                    seq.steps,
                    seq.room,
                    self.k,
                    self.alpha,
                    self.kind,
                    self.early_stopping,
                    self.counts_eos,
                )
            ):
                # sorted is stable: on a tie, the hypothesis that finished first comes first
                seq.results = sorted(self.finished[i], key=lambda h: -h.score)[: self.n_best]
                seq.hypotheses = [h.tokens.tolist() for h in seq.results]
                seq.tokens = seq.hypotheses[0] if seq.hypotheses else []
                seq.finish = "stop"
            if seq.done:
                done.append(seq)
        return done


def candidates(
    beam_scores: torch.Tensor, log_probs: torch.Tensor, k: int, eos_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each sentence's 2k best continuations of its live beams (beam_scores (N, G), log_probs
    (N * G, V)), ranked by raw log-probability, best first: their scores, beams, tokens and whether
    the token is </s>, each (N, 2k)."""
    b, beams = beam_scores.shape
    vocab = log_probs.shape[-1]
    cand = (beam_scores[:, :, None] + log_probs.view(b, beams, vocab)).view(b, beams * vocab)
    scores, index = _top_candidates(cand, 2 * k)
    token = index % vocab
    return scores, index // vocab, token, token == eos_id


def next_beams(
    cand_scores: torch.Tensor,
    cand_beam: torch.Tensor,
    cand_token: torch.Tensor,
    is_eos: torch.Tensor,
    k: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The G next live beams of each sentence: its best k candidates that are not </s>, by raw
    log-probability (a sentence short of them gets -inf beams). Scores, parent beams and tokens,
    each (N, G)."""
    n_cand = cand_scores.shape[1]
    rank = is_eos.long() * n_cand + torch.arange(n_cand, device=cand_scores.device)
    order = rank.argsort(dim=-1)[:, :k]
    scores = cand_scores.gather(1, order).masked_fill(is_eos.gather(1, order), -float("inf"))
    return scores, cand_beam.gather(1, order), cand_token.gather(1, order)


def _top_candidates(cand: torch.Tensor, n_cand: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The n_cand best continuations (N, M) of (N, G * V) scores, best first; a vocabulary too small
    to fill them pads the list with impossible (-inf) entries."""
    top = min(n_cand, cand.shape[1])
    scores, index = cand.topk(top, dim=-1)
    if top < n_cand:
        fill = n_cand - top
        scores = torch.cat([scores, scores.new_full((cand.shape[0], fill), -float("inf"))], dim=1)
        index = torch.cat([index, index.new_zeros(cand.shape[0], fill)], dim=1)
    return scores, index
