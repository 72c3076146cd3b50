"""The lanes (decoding/search/lanes.py, one_row.py, beams.py) against plain reference computations:
each search written the simplest way (one sentence at a time, the whole prefix recomputed every step,
the rules of the module docstrings spelled out here), on small random models with padding and
masks."""

from __future__ import annotations

import math

import pytest
import torch

import transformer as T
from transformer.config import DecodeConfig, cpu_tiny
from transformer.decoding.search.beams import BeamLane
from transformer.decoding.search.lanes import Request
from transformer.decoding.search.one_row import OneLane
from transformer.decoding.search.step import Stepper, inference

V = 24
SOURCES = [[5, 6, 7, 8, 9, 10], [11, 12], [13], [14, 15, 16, 17]]


def tiny(arch: str = "encoder-decoder", seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = cpu_tiny(
        vocab_size=V,
        arch=arch,
        d_model=32,
        d_ff=64,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        output_bias=True,
    )
    model = T.build_model(cfg).eval()
    with torch.no_grad():  # a likelier </s>: outputs end at different lengths
        model.lm_head.bias[cfg.eos_id] += 1.5
    return model


def padded(rows: list[list[int]], fill: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) ids right-padded with `fill` (not the pad id: only the mask says what is real)."""
    ids = torch.full((len(rows), max(map(len, rows))), fill)
    mask = torch.zeros(ids.shape, dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = torch.tensor(r), True
    return ids, mask


def next_log_probs(model, src: list[int], out: list[int], n: int, p: float, t: int, min_len: int):
    """log P(next | src, out) by recomputing the whole prefix, with the guards and blocks of the
    rules: repetition penalty on the logits, log_softmax, n-grams blocked, no padding, no </s>
    before min_len."""
    cfg = model.config
    with torch.no_grad():
        logits = model(torch.tensor([src]), torch.tensor([[cfg.start_id, *out]]))[0, -1].float()
    for tok in set(out):
        logits[tok] = logits[tok] * p if logits[tok] < 0 else logits[tok] / p
    lp = torch.log_softmax(logits, -1)
    if n and len(out) >= n:
        tail = out[len(out) - n + 1 :]
        for i in range(len(out) - n + 1):
            if out[i : i + n - 1] == tail:
                lp[out[i + n - 1]] = -math.inf
    lp[cfg.pad_id] = -math.inf
    if t < min_len:
        lp[cfg.eos_id] = -math.inf
    return lp


@pytest.mark.parametrize("min_len,n,p", [(0, 0, 1.0), (3, 2, 1.0), (2, 0, 1.4), (1, 3, 1.2)])
def test_one_row_lane_is_plain_greedy(min_len, n, p):
    model = tiny()
    ids, mask = padded(SOURCES, fill=9)
    out, scores = T.greedy_search(
        model,
        ids,
        src_mask=mask,
        max_len_a=1.0,
        max_len_b=3,
        min_len=min_len,
        no_repeat_ngram_size=n,
        repetition_penalty=p,
        return_scores=True,
    )
    for i, src in enumerate(SOURCES):
        want, total = [], 0.0
        for t in range(len(src) + 3):
            lp = next_log_probs(model, src, want, n, p, t, min_len)
            tok = int(lp.argmax())
            total += float(lp[tok])
            if tok == model.config.eos_id:
                break
            want.append(tok)
        row = out[i].tolist()
        assert row[: len(want)] == want and set(row[len(want) :]) <= {model.config.pad_id}
        assert float(scores[i]) == pytest.approx(total, abs=1e-4)


def filtered(lp: torch.Tensor, temperature: float, k: int, top_p: float) -> torch.Tensor:
    """Probabilities after temperature, top-k and top-p, written out (one row)."""
    lp = torch.log_softmax(lp / temperature, -1)
    if k:
        lp = torch.where(lp >= lp.topk(k).values[-1], lp, -math.inf)
    probs = lp.softmax(-1)
    order = probs.argsort(descending=True)
    kept, mass = torch.zeros_like(probs, dtype=torch.bool), 0.0
    for tok in order.tolist():
        if mass >= top_p:
            break
        kept[tok], mass = True, mass + float(probs[tok])
    probs = torch.where(kept, probs, 0.0)
    return probs / probs.sum()


@pytest.mark.parametrize("temperature,k,top_p", [(1.0, 5, 1.0), (0.8, 0, 0.7), (1.2, 8, 0.9)])
def test_one_row_lane_draws_as_a_plain_loop_with_one_generator(temperature, k, top_p):
    """The batch's one generator draws once a step over the rows still decoding, in row order."""
    model = tiny()
    got = T.sample(
        model,
        SOURCES,
        max_new_tokens=6,
        temperature=temperature,
        top_k=k,
        top_p=top_p,
        min_new_tokens=1,
        no_repeat_ngram_size=2,
        generator=torch.Generator().manual_seed(3),
    )
    g = torch.Generator().manual_seed(3)
    outs, alive = [[] for _ in SOURCES], list(range(len(SOURCES)))
    for t in range(6):
        probs = torch.stack(
            [
                filtered(
                    next_log_probs(model, SOURCES[i], outs[i], 2, 1.0, t, 1), temperature, k, top_p
                )
                for i in alive
            ]
        )
        tokens = torch.multinomial(probs, 1, generator=g).squeeze(1).tolist()
        for i, tok in zip(list(alive), tokens, strict=True):
            if tok == model.config.eos_id:
                alive.remove(i)
            else:
                outs[i].append(tok)
        if not alive:
            break
    for i, want in enumerate(outs):
        row = got[i].tolist()
        assert row[: len(want)] == want and set(row[len(want) :]) <= {model.config.pad_id}


def plain_beam(model, src, s: DecodeConfig, max_new: int) -> list[tuple[list[int], float]]:
    """Beam search for one sentence, as beams.py's conventions say, recomputing every prefix:
    the n_best (tokens, score), best first."""
    k, eos = s.beam_size, model.config.eos_id

    def lp_of(n):
        return (
            ((5 + n) / 6) ** s.length_penalty
            if s.length_penalty_kind == "wu"
            else n**s.length_penalty
        )

    beams, finished = [([], 0.0)], []
    for t in range(max_new):
        cands = []
        for b, (out, score) in enumerate(beams):
            lp = next_log_probs(
                model, src, out, s.no_repeat_ngram_size, s.repetition_penalty, t, s.min_len
            )
            cands += [(score + float(lp[v]), b, v) for v in range(V)]
        cands = sorted(cands, key=lambda c: -c[0])[: 2 * k]
        at_max = t + 1 >= max_new
        for score, b, v in cands[:k]:
            if (v == eos or at_max) and score > -math.inf:
                out = beams[b][0] + ([] if v == eos else [v])
                finished.append((out, score / lp_of(t + 1)))
        beams = [(beams[b][0] + [v], score) for score, b, v in cands if v != eos][:k]
        if at_max or not beams or beams[0][1] == -math.inf:
            break
        if len(finished) >= k:
            worst = sorted(f[1] for f in finished)[-k]
            best = beams[0][1]
            if s.early_stopping is True:
                break
            if s.early_stopping == "never":
                bound = best / max(lp_of(min(t + 2, max_new)), lp_of(max_new))
            else:
                bound = best / lp_of(t + 1)
            if not bound > worst:
                break
    return sorted(finished, key=lambda f: -f[1])[: s.n_best]


@pytest.mark.parametrize("early", [True, False, "never"])
@pytest.mark.parametrize(
    "kind,alpha,min_len,n,p",
    [("wu", 0.6, 0, 0, 1.0), ("power", 1.5, 2, 2, 1.0), ("wu", 1.0, 1, 0, 1.3)],
)
def test_beam_lane_is_plain_beam_search(early, kind, alpha, min_len, n, p):
    model = tiny(seed=1)
    s = DecodeConfig(
        beam_size=3,
        n_best=2,
        early_stopping=early,
        length_penalty_kind=kind,
        length_penalty=alpha,
        min_len=min_len,
        max_len_a=1.0,
        max_len_b=2,
        no_repeat_ngram_size=n,
        repetition_penalty=p,
    )
    ids, mask = padded(SOURCES, fill=9)
    out, scores = T.beam_search(
        model,
        ids,
        src_mask=mask,
        return_scores=True,
        **{
            f: getattr(s, f)
            for f in (
                "beam_size",
                "n_best",
                "early_stopping",
                "length_penalty_kind",
                "length_penalty",
                "min_len",
                "max_len_a",
                "max_len_b",
                "no_repeat_ngram_size",
                "repetition_penalty",
            )
        },
    )
    for i, src in enumerate(SOURCES):
        want = plain_beam(model, src, s, len(src) + 2)
        for j, (tokens, score) in enumerate(want):
            row = out[i, j].tolist()
            assert row[: len(tokens)] == tokens and set(row[len(tokens) :]) <= {model.config.pad_id}
            assert float(scores[i, j]) == pytest.approx(score, abs=1e-4)


def test_a_lane_stepped_by_hand_is_the_offline_search():
    """greedy_search and beam_search are their lanes admitted once and stepped until empty."""
    model = tiny()
    for settings, search in [
        (DecodeConfig(beam_size=1, min_len=1), lambda: T.greedy_search(model, SOURCES, min_len=1)),
        (DecodeConfig(beam_size=3, n_best=1), lambda: T.beam_search(model, SOURCES, beam_size=3)),
    ]:
        lane = (OneLane if settings.beam_size == 1 else BeamLane)(model, settings)
        seqs = [Request(None, settings, rejoin=False) for _ in SOURCES]
        with inference(model):
            lane.admit_batch(Stepper(model, SOURCES, guards=lane.guards), seqs)
        steps = 0
        while len(lane):
            lane.step()
            steps += 1
        want = search()
        assert [seq.tokens for seq in seqs] == [
            [t for t in row if t != model.config.pad_id] for row in want.tolist()
        ]
        assert steps <= max(len(src) for src in SOURCES) + 50
        with pytest.raises(ValueError, match="offline batch"):
            lane.admit([Request([5], settings)])


def test_search_under_a_decode_config_is_the_keyword_search():
    """decoding.search.batch.search takes a DecodeConfig already validated (Pipeline's) and decodes as
    the keyword shells do under the same settings."""
    from transformer.decoding.search.batch import search

    model = tiny()
    ids, mask = padded(SOURCES, fill=9)
    s = DecodeConfig(beam_size=1, min_len=1, max_len_b=4, no_repeat_ngram_size=2)
    want = T.greedy_search(
        model, ids, src_mask=mask, min_len=1, max_len_b=4, no_repeat_ngram_size=2
    )
    assert torch.equal(search(model, ids, s, src_mask=mask), want)
    s = DecodeConfig(beam_size=3, n_best=2, early_stopping="never", length_penalty=1.0)
    prefix = [model.config.start_id, 7]
    got, attention = search(
        model, SOURCES, s, return_attention=True, prefix=prefix, suppress_tokens=[8]
    )
    want, expected = T.beam_search(
        model,
        SOURCES,
        beam_size=3,
        n_best=2,
        early_stopping="never",
        length_penalty=1.0,
        return_attention=True,
        prefix=prefix,
        suppress_tokens=[8],
    )
    assert torch.equal(got, want) and torch.equal(attention["cross"], expected["cross"])
    assert got.shape[1] == 2 and 8 not in got.flatten().tolist()
