"""Continuous (iteration-level) batching: running batches on the KV cache that requests join and
leave between decoding steps (Orca, OSDI 2022), for a server.

Legend (model/__init__.py): B rows, N requests (sentences), G beams per request, V vocabulary.

A `Lane` (lanes.py) is one running batch of requests decoded the same way: `OneLane` takes one
token per row per step (greedy search and sampling, one row per request: one_row.py), `BeamLane`
runs beam search (a group of G rows per request, joining and leaving together: beams.py). They are
the very lanes the offline searches step to the end (batch.py); this module is the server's view of
them: which lane a request joins.
The rules:
- Each request gets the tokens it would get decoded alone (`greedy_search`, `sample`,
  `beam_search`, `Pipeline.generate`): its rows attend only to its own keys (the joined cache pads
  the others: KVCache.extend), its step count, length bound, min_len and repetition history are its
  own, and a sampled request draws from its own generator, one draw per step as alone.
- Newcomers are admitted together: their sources are encoded (or prompts read) in one batch, and
  they join the lane's cache (a beam request that joins a lane already stepping as G beams, all but
  one scored -inf: its first step then ranks the candidates of its one real beam, as beam search
  alone does).
- A request that finishes (</s>, its length bound, its beam search's stopping rule, or its
  on_token asking to stop) or that nobody waits for leaves at once and frees its rows.
- Sampling past the context (generate.sample_long's rule): a language-model request that fills
  the model's positions before its max_new_tokens leaves and joins again with the last half of its
  context, its cache filled anew.
- All requests of a lane share its repetition guards (they are part of its key); their histories
  are left-padded with the id V, which the guards skip (repetition.py).
"""

from __future__ import annotations

from ...config import DecodeConfig
from .beams import BeamLane
from .lanes import Lane
from .one_row import OneLane


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
            s.length_counts_eos,
            s.early_stopping,
            s.n_best,
            *guards,
        )
    return ("one", *guards)


def new_lane(model, settings: DecodeConfig) -> Lane:
    """An empty lane for requests decoded under settings (their lane_key)."""
    return (BeamLane if settings.beam_size > 1 else OneLane)(model, settings)
