"""Decoding: greedy, beam search and sampling (fairseq-style tests: scripted probabilities, brute force, parity)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import transformer as T
from tests.decoding.scripted import ScriptedModel
from transformer.config import cpu_tiny
from transformer.decoding.search.draw import top_k_filter, top_p_filter
from transformer.decoding.search.penalties import best_attainable, length_penalty, penalized_score

PAD, EOS, START = 0, 3, 2


def tiny(arch="encoder-decoder", vocab=24, seed=0, **kw):
    torch.manual_seed(seed)
    values = dict(d_model=32, d_ff=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2)
    return T.build_model(cpu_tiny(vocab_size=vocab, arch=arch, **{**values, **kw})).eval()


# --------------------------------------------------------------------------------------------
# A fake model that emits scripted per-step distributions (the prefix decides them).


class Scripted(ScriptedModel):
    """Next-token probabilities from table[(sentence, prefix)] (tests/decoding/scripted.py)."""

    def __init__(self, table: dict, vocab: int = 6):
        super().__init__(vocab)
        self.table = table

    def row(self, sentence, prefix):
        probs = self.table.get((sentence, prefix), {EOS: 1.0})
        row = torch.full((self.config.vocab_size,), 1e-30)
        for tok, p in probs.items():
            row[tok] = p
        return row.log()

# Sentence 1: "4 </s>" has P = .4*.9 = .36 at |Y| = 2; "5 4 </s>" has .6*.5*1.0 = .30 at |Y| = 3;
# "5 5 </s>" has .6*.5*.8 = .24; the greedy path is 5, then 4 or 5 (tie broken by rank), ...
TABLE = {
    (1, ()): {4: 0.4, 5: 0.6},
    (1, (4,)): {EOS: 0.9, 4: 0.1},
    (1, (5,)): {4: 0.5, 5: 0.5},
    (1, (5, 4)): {EOS: 1.0},
    (1, (5, 5)): {EOS: 0.8, 4: 0.2},
    (1, (4, 4)): {EOS: 1.0},
    (1, (5, 5, 4)): {EOS: 1.0},
    # Sentence 2: </s> is the most likely first token.
    (2, ()): {EOS: 0.7, 4: 0.3},
    (2, (4,)): {EOS: 0.2, 4: 0.8},
    (2, (4, 4)): {EOS: 1.0},
    # Sentence 3: "4 </s>" has P = .52*.95 = .494, "5 4 </s>" .48*.6 = .288, "5 5 </s>" .192.
    (3, ()): {4: 0.52, 5: 0.48},
    (3, (4,)): {EOS: 0.95, 4: 0.05},
    (3, (5,)): {4: 0.6, 5: 0.4},
    (3, (5, 4)): {EOS: 1.0},
    (3, (5, 5)): {EOS: 1.0},
}


def lp_wu(n, a=0.6):
    return ((5 + n) / 6) ** a


def test_scripted_without_length_penalty():
    model = Scripted(TABLE)
    ids, scores = T.beam_search(model, torch.tensor([[1], [2]]), beam_size=2, length_penalty=0.0, n_best=2,
                                max_len_b=10, return_scores=True)
    assert ids[0].tolist() == [[4, 0], [5, 4]]
    assert scores[0].tolist() == pytest.approx([math.log(0.36), math.log(0.30)], abs=1e-6)
    # </s> at the first step finishes the best hypothesis at once: the empty output.
    # With early_stopping=True the second slot is "4 </s>" (.06), finished at step 1 before "4 4 </s>" (.24).
    assert ids[1].tolist() == [[0, 0], [4, 0]]
    assert scores[1].tolist() == pytest.approx([math.log(0.7), math.log(0.3 * 0.2)], abs=1e-6)
    # "never" keeps going while a live beam (.24) can still beat the 2nd best finished one (.06).
    ids, scores = T.beam_search(model, torch.tensor([[2]]), beam_size=2, length_penalty=0.0, n_best=2,
                                max_len_b=10, early_stopping="never", return_scores=True)
    assert ids[0].tolist() == [[0, 0], [4, 4]]
    assert scores[0].tolist() == pytest.approx([math.log(0.7), math.log(0.3 * 0.8)], abs=1e-6)


def test_scripted_with_length_penalty_counts_eos():
    model = Scripted(TABLE)
    for kind, lp in (("wu", lp_wu), ("power", lambda n, a=0.6: n ** a)):
        ids, scores = T.beam_search(model, torch.tensor([[1]]), beam_size=2, length_penalty=0.6,
                                    length_penalty_kind=kind, n_best=2, max_len_b=10, return_scores=True)
        expect = sorted([(math.log(0.36) / lp(2), [4, 0]), (math.log(0.30) / lp(3), [5, 4])], reverse=True)
        assert ids[0].tolist() == [e[1] for e in expect]
        assert scores[0].tolist() == pytest.approx([e[0] for e in expect], abs=1e-6)


def test_scripted_length_without_eos_ranks_as_ctranslate2():
    # CTranslate2's Whisper divides log P (</s> included) by the tokens before </s>: "4" scores
    # log .494 / 1, "5 4" log .288 / 2, and "5 4" wins; counting </s> (/ 2 and / 3), "4" wins.
    model = Scripted(TABLE)
    hyps = {True: [[4, 0], [5, 4], [5, 5]], False: [[5, 4], [4, 0], [5, 5]]}
    for counts, lengths in ((True, (2, 3, 3)), (False, (1, 2, 2))):
        ids, scores = T.beam_search(model, torch.tensor([[3]]), beam_size=2, length_penalty=1.0,
                                    length_penalty_kind="power", length_counts_eos=counts, n_best=2,
                                    max_len_b=10, return_scores=True)
        raw = {(4, 0): math.log(0.494), (5, 4): math.log(0.288), (5, 5): math.log(0.192)}
        expect = {h: raw[h] / n for h, n in zip(raw, lengths, strict=True)}
        assert ids[0].tolist() == hyps[counts][:2]
        assert scores[0].tolist() == pytest.approx([expect[tuple(h)] for h in hyps[counts][:2]], abs=1e-6)
    # An empty output has |Y| = 0 without </s>: under |Y|^alpha it ranks last, not first.
    ids, scores = T.beam_search(model, torch.tensor([[2]]), beam_size=2, length_penalty=1.0,
                                length_penalty_kind="power", length_counts_eos=False, n_best=2,
                                max_len_b=10, return_scores=True)
    assert ids[0].tolist() == [[4], [0]]
    assert scores[0, 0] == pytest.approx(math.log(0.3 * 0.2)) and scores[0, 1] == -math.inf


def test_scripted_beams_finish_at_different_lengths_and_early_stopping():
    # beam 3: "4 </s>" finishes at step 1, "5 4 </s>" and "5 5 </s>" at step 2 -> 3 finished, stop.
    model = Scripted(TABLE)
    ids, scores = T.beam_search(model, torch.tensor([[1]]), beam_size=3, length_penalty=0.0, n_best=3,
                                max_len_b=10, return_scores=True)
    assert ids[0].tolist() == [[4, 0], [5, 4], [5, 5]]
    assert scores[0].tolist() == pytest.approx([math.log(p) for p in (0.36, 0.30, 0.24)], abs=1e-6)


def test_scripted_min_len_blocks_eos():
    model = Scripted(TABLE)
    ids, scores = T.beam_search(model, torch.tensor([[2]]), beam_size=2, length_penalty=0.0, min_len=2,
                                max_len_b=10, return_scores=True)
    # Only "4 4 </s>" is reachable with at least 2 tokens before </s>.
    assert ids.tolist() == [[4, 4]]
    assert scores.tolist() == pytest.approx([math.log(0.3 * 0.8 * 1.0)], abs=1e-5)
    assert T.greedy_search(model, torch.tensor([[2]]), min_len=2, max_len_b=10).tolist() == [[4, 4]]


def test_scripted_open_hypotheses_finalised_at_max_length():
    model = Scripted(TABLE)
    ids, scores = T.beam_search(model, torch.tensor([[1]]), beam_size=2, length_penalty=0.6, max_len_a=0,
                                max_len_b=1, n_best=2, return_scores=True)
    # One step allowed: the top-2 candidates "5" (.6) and "4" (.4) are finalised without </s>, |Y| = 1.
    assert ids[0].tolist() == [[5], [4]]
    assert scores[0].tolist() == pytest.approx([math.log(0.6) / lp_wu(1), math.log(0.4) / lp_wu(1)], abs=1e-6)


def test_penalties_are_the_named_formulas():
    assert length_penalty(2, 0.6, "wu") == pytest.approx((7 / 6) ** 0.6)
    assert length_penalty(2, 0.6, "power") == pytest.approx(2 ** 0.6)
    assert length_penalty(torch.tensor([1.0, 5.0]), 0.0, "wu").tolist() == [1.0, 1.0]
    # the bound is reached at the longest length for alpha > 0 and at the next one for alpha < 0
    assert best_attainable(-2.0, 1, 5, 1.0, "power") == pytest.approx(-2.0 / 5)
    assert best_attainable(-2.0, 1, 5, -1.0, "power") == pytest.approx(-2.0 * 2)
    # without </s> in |Y| a live hypothesis of 1 token can still finish at |Y| = 1
    assert best_attainable(-2.0, 1, 5, -1.0, "power", counts_eos=False) == pytest.approx(-2.0)
    assert penalized_score(-1.0, 0, 1.0, "power") == -math.inf
    assert penalized_score(-1.0, 0, 0.0, "power") == -1.0
    with pytest.raises(ValueError, match="length_penalty_kind"):
        length_penalty(2, 0.6, "fairseq")


# --------------------------------------------------------------------------------------------
# Exhaustive check on a tiny random model.


def _score_all(model, src, hyps):
    """Raw log P(Y | X) of every hypothesis (list of token lists, </s> included if present), by full recompute."""
    width = max(len(h) for h in hyps)
    tgt = torch.full((len(hyps), width + 1), PAD)
    tgt[:, 0] = START
    for i, h in enumerate(hyps):
        tgt[i, 1 : len(h) + 1] = torch.tensor(h)
    with torch.no_grad():
        lp = torch.log_softmax(model(src.expand(len(hyps), -1), tgt[:, :-1]).float(), -1)
    out = []
    for i, h in enumerate(hyps):
        out.append(sum(float(lp[i, t, tok]) for t, tok in enumerate(h)))
    return out


@pytest.mark.parametrize("kind,alpha,early,counts_eos", [("wu", 0.6, True, True), ("power", 1.0, "never", True),
                                                         ("wu", 0.0, True, True), ("power", -0.5, "never", True),
                                                         ("power", 1.0, "never", False),
                                                         ("power", -0.5, "never", False)])
def test_beam_equals_brute_force(kind, alpha, early, counts_eos):
    model = tiny(vocab=5, seed=3, d_model=16, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                 output_bias=True, tie_embeddings=False)
    with torch.no_grad():  # peakier distributions and a rarer </s>: a narrow beam gets these wrong
        model.lm_head.weight.mul_(4)
        model.lm_head.bias[EOS] = -1.0
    src = torch.tensor([[4, 1, 4]])
    max_len = 5
    words = [1, 2, 4]  # every id except <pad> (never generated) and </s>
    hyps = [list(w) + [EOS] for n in range(max_len) for w in itertools.product(words, repeat=n)]
    hyps += [list(w) for w in itertools.product(words, repeat=max_len)]  # open at the maximum length
    raw = _score_all(model, src, hyps)
    size = [len(h) - (h[-1] == EOS and not counts_eos) for h in hyps]  # |Y|
    scored = [(penalized_score(r, n, alpha, kind), h) for r, n, h in zip(raw, size, hyps, strict=True)]
    best_score, best = max(scored, key=lambda x: x[0])
    ids, score = T.beam_search(model, src, beam_size=400, length_penalty=alpha, length_penalty_kind=kind,
                               length_counts_eos=counts_eos, max_len_a=0, max_len_b=max_len,
                               early_stopping=early, return_scores=True)
    out = ids[0].tolist()
    expect = [t for t in best if t != EOS]
    assert out[: len(expect)] == expect and all(t == PAD for t in out[len(expect) :])
    assert float(score[0]) == pytest.approx(best_score, abs=1e-4)


# --------------------------------------------------------------------------------------------
# Real models: beam 1 = greedy, top-k 1 = greedy, seeds, cache = recompute, batch = one at a time.


def _reference_greedy(model, src, max_new):
    """Greedy by recomputing the whole prefix every step (no cache)."""
    tgt = torch.tensor([[START]])
    out, total = [], 0.0
    with torch.no_grad():
        for _ in range(max_new):
            lp = torch.log_softmax(model(src, tgt)[:, -1].float(), -1)
            lp[:, PAD] = -float("inf")
            tok = int(lp.argmax())
            total += float(lp[0, tok])
            if tok == EOS:
                break
            out.append(tok)
            tgt = torch.cat([tgt, torch.tensor([[tok]])], 1)
    return out, total


SOURCES = [[5, 6, 7, 8, 9, 10, 3], [11, 12, 3], [13, 3], [14, 15, 16, 17, 3]]


def _batch(rows):
    ids = torch.full((len(rows), max(map(len, rows))), PAD)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    return ids


@pytest.mark.parametrize("impl", ["fused", "textbook"])
def test_cached_greedy_equals_recompute_and_batch_equals_single(impl):
    model = tiny(attention_impl=impl)
    ids, scores = T.greedy_search(model, _batch(SOURCES), max_len_a=1, max_len_b=3, return_scores=True)
    for i, src in enumerate(SOURCES):
        ref, ref_score = _reference_greedy(model, torch.tensor([src]), len(src) + 3)
        row = ids[i].tolist()
        assert row[: len(ref)] == ref and all(t == PAD for t in row[len(ref) :])
        assert float(scores[i]) == pytest.approx(ref_score, abs=1e-4)


def test_beam_batch_equals_one_at_a_time():
    model = tiny()
    kw = dict(beam_size=3, max_len_a=1, max_len_b=4, n_best=2, early_stopping="never")
    ids, scores = T.beam_search(model, _batch(SOURCES), return_scores=True, **kw)
    for i, src in enumerate(SOURCES):
        one, one_score = T.beam_search(model, torch.tensor([src]), return_scores=True, **kw)
        width = one.shape[-1]
        assert ids[i, :, :width].tolist() == one[0].tolist()
        assert (ids[i, :, width:] == PAD).all()
        assert torch.allclose(scores[i], one_score[0], atol=1e-4)


def test_beam_one_equals_greedy_and_top_k_one_equals_greedy():
    for arch in ("encoder-decoder", "decoder"):
        model = tiny(arch)
        src = [[2, 5, 6, 7], [2, 9], [2, 11, 12]]
        greedy, g_scores = T.greedy_search(model, src, max_len_b=6, return_scores=True)
        beam, b_scores = T.beam_search(model, src, beam_size=1, length_penalty=0.0, max_len_b=6, return_scores=True)
        assert torch.equal(greedy, beam) and torch.allclose(g_scores, b_scores, atol=1e-5)
        # sample bounds every row by max_new_tokens alone: compare with greedy under the same bound
        greedy = T.greedy_search(model, src, max_len_a=0, max_len_b=7)
        sampled = T.sample(model, src, max_new_tokens=7, top_k=1, temperature=0.7,
                           generator=torch.Generator().manual_seed(0))
        assert torch.equal(sampled, greedy)


def test_temperature_zero_is_greedy_and_draws_nothing():
    """The one rule for temperature 0: each step takes the argmax, whatever top_k / top_p say, and the
    generator is not used (no random number drawn)."""
    for arch in ("encoder-decoder", "decoder"):
        model = tiny(arch)
        src = [[2, 5, 6, 7], [2, 9], [2, 11, 12]]
        greedy, g_scores = T.greedy_search(model, src, max_len_a=0, max_len_b=7, return_scores=True)
        generator = torch.Generator().manual_seed(0)
        state = generator.get_state()
        sampled, s_scores = T.sample(model, src, max_new_tokens=7, temperature=0, top_k=3, top_p=0.5,
                                     generator=generator, return_scores=True)
        assert torch.equal(sampled, greedy) and torch.allclose(s_scores, g_scores, atol=1e-5)
        assert torch.equal(generator.get_state(), state)


def test_same_seed_same_samples_and_filters():
    model = tiny("decoder")
    prompts = [[2, 5, 6], [2, 7]]
    draw = lambda seed: T.sample(model, prompts, max_new_tokens=8, temperature=1.3, top_k=10, top_p=0.9,
                                 generator=torch.Generator().manual_seed(seed))
    assert torch.equal(draw(7), draw(7))
    assert not all(torch.equal(draw(7), draw(s)) for s in (8, 9, 10))
    lp = torch.log_softmax(torch.tensor([[3.0, 2.0, 1.0, 0.0]]), -1)
    assert torch.isfinite(top_k_filter(lp, 2)).tolist() == [[True, True, False, False]]
    p = lp.exp()[0]
    kept = torch.isfinite(top_p_filter(lp, float(p[0] + p[1] / 2))).tolist()
    assert kept == [[True, True, False, False]]
    assert torch.isfinite(top_p_filter(lp, 0.01)).tolist() == [[True, False, False, False]]


def _first_token_frequencies(model, prompt, n, **kw):
    """How often each token is drawn first, over n samples of one prompt (</s> counted as itself)."""
    out = T.sample(model, [prompt] * n, max_new_tokens=1, generator=torch.Generator().manual_seed(0), **kw)
    first = out[:, 0] if out.shape[1] else torch.full((n,), PAD)
    first = torch.where(first == PAD, EOS, first)  # </s> is not output: an empty row drew it
    return torch.bincount(first, minlength=model.config.vocab_size).float() / n


def test_sampling_draws_from_the_tempered_and_filtered_distribution():
    model = tiny("decoder")
    prompt = [2, 9, 4]
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([prompt]))[0, -1].float(), -1)
    lp[PAD] = -float("inf")
    top = int(lp.argmax())
    tv = lambda p, q: float((p - q).abs().sum()) / 2  # total variation distance
    freq = {}
    for t in (0.5, 2.0):
        freq[t] = _first_token_frequencies(model, prompt, 4000, temperature=t)
        assert tv(freq[t], torch.softmax(lp / t, -1)) < 0.05  # 4,000 draws: the sampling error is ~0.02
    # a low temperature sharpens the distribution, a high one flattens it
    assert freq[0.5][top] > 0.9 > 0.4 > freq[2.0][top]
    entropy = lambda p: -float((p[p > 0] * p[p > 0].log()).sum())
    assert entropy(freq[0.5]) < entropy(torch.softmax(lp, -1)) < entropy(freq[2.0])
    # top-k and top-p restrict the tempered distribution, then renormalise it
    tempered = torch.log_softmax(lp / 2.0, -1)[None]
    k3 = _first_token_frequencies(model, prompt, 4000, temperature=2.0, top_k=3)
    assert set(k3.nonzero().squeeze(1).tolist()) == set(lp.topk(3).indices.tolist())
    assert tv(k3, top_k_filter(tempered, 3).softmax(-1)[0]) < 0.05
    nucleus = top_p_filter(tempered, 0.5).softmax(-1)[0]
    assert 2 < int((nucleus > 0).sum()) < 10  # the nucleus is a real subset here
    p5 = _first_token_frequencies(model, prompt, 4000, temperature=2.0, top_p=0.5)
    assert set(p5.nonzero().squeeze(1).tolist()) <= set(nucleus.nonzero().squeeze(1).tolist())
    assert tv(p5, nucleus) < 0.05


def test_sample_scores_are_the_models_log_probabilities_of_the_drawn_tokens():
    model = tiny("decoder", seed=2)
    prompts, max_new = [[2, 9, 4], [2, 13, 14], [2, 11], [2, 5, 6, 7], [2, 8]], 6
    ids, scores = T.sample(model, prompts, max_new_tokens=max_new, temperature=0.7, top_k=5, return_scores=True,
                           generator=torch.Generator().manual_seed(0))
    lengths = (ids != PAD).sum(-1).tolist()
    assert min(lengths) < max_new == max(lengths)  # rows that ended with </s> (it counts too) and at the bound
    for prompt, row, n, score in zip(prompts, ids.tolist(), lengths, scores.tolist(), strict=True):
        assert all(t == PAD for t in row[n:])
        seq = prompt + row[:n]
        with torch.no_grad():  # the untempered, unfiltered model, by full recompute
            lp = torch.log_softmax(model(torch.tensor([seq]))[0].float(), -1)  # (P + n, V)
        expected = sum(float(lp[len(prompt) - 1 + i, tok]) for i, tok in enumerate(row[:n]))
        if n < max_new:
            expected += float(lp[-1, EOS])
        assert score == pytest.approx(expected, abs=1e-4)


def test_sample_min_new_tokens_blocks_eos_until_then():
    model = tiny("decoder", output_bias=True, tie_embeddings=False)
    with torch.no_grad():
        model.lm_head.bias[EOS] = 8.0  # </s> is all but certain whenever it is allowed
    draw = lambda m: T.sample(model, [[2, 9, 4]] * 64, max_new_tokens=8, min_new_tokens=m,
                              generator=torch.Generator().manual_seed(0))
    assert draw(0).shape[1] == 0  # without the bound every row ends at once
    lengths = (draw(3) != PAD).sum(-1)
    assert (lengths >= 3).all() and (lengths == 3).float().mean() > 0.9  # </s> is allowed from the 4th token on


def test_decoder_only_left_padded_batch_equals_single_prompts():
    model = tiny("decoder")
    prompts = [[2, 5, 6, 7, 8], [2, 9], [2, 11, 12]]
    right = _batch(prompts)  # right-padded tensor input is re-padded on the left
    for fn in (lambda x: T.greedy_search(model, x, max_len_a=0, max_len_b=5, return_scores=True),
               lambda x: T.beam_search(model, x, beam_size=3, max_len_a=0, max_len_b=5, return_scores=True)):
        ids, scores = fn(right)
        ids_list, _ = fn(prompts)
        assert torch.equal(ids, ids_list)
        for i, p in enumerate(prompts):
            one, one_score = fn([p])
            assert ids[i, : one.shape[1]].tolist() == one[0].tolist()
            assert float(scores[i]) == pytest.approx(float(one_score[0]), abs=1e-4)


def _reference_lm_greedy(model, prompt, max_new):
    """A language model's greedy continuation by recomputing the whole sequence every step (no cache):
    (tokens without </s>, summed log-probabilities with </s>, whether it ended with </s>)."""
    seq, total = list(prompt), 0.0
    with torch.no_grad():
        for _ in range(max_new):
            lp = torch.log_softmax(model(torch.tensor([seq]))[0, -1].float(), -1)
            lp[PAD] = -float("inf")
            tok = int(lp.argmax())
            total += float(lp[tok])
            if tok == EOS:
                return seq[len(prompt) :], total, True
            seq.append(tok)
    return seq[len(prompt) :], total, False


@pytest.mark.parametrize("impl", ["fused", "textbook"])
def test_decoder_only_cached_equals_recompute(impl):
    model = tiny("decoder", seed=2, output_bias=True, tie_embeddings=False, attention_impl=impl)
    with torch.no_grad():
        model.lm_head.bias[EOS] = 0.5  # </s> likely enough that some rows end before the bound
    prompts, max_new = [[2, 9, 4], [2, 13, 14], [2, 11]], 6
    ids, scores = T.greedy_search(model, prompts, max_len_a=0, max_len_b=max_new, return_scores=True)
    refs = [_reference_lm_greedy(model, p, max_new) for p in prompts]
    # the case is not vacuous: every row generates, one runs to the bound, one ends with </s> before it
    assert all(gen for gen, _, _ in refs)
    assert any(len(gen) == max_new and not ended for gen, _, ended in refs)
    assert any(len(gen) < max_new and ended for gen, _, ended in refs)
    assert ids.shape == (len(prompts), max(len(gen) for gen, _, _ in refs))
    for row, score, (gen, ref_score, _) in zip(ids.tolist(), scores.tolist(), refs, strict=True):
        assert row == gen + [PAD] * (len(row) - len(gen))  # only padding after </s>, which is not output
        assert score == pytest.approx(ref_score, abs=1e-4)


def test_attention_weights_are_returned_per_layer_and_head():
    model = tiny()
    src = _batch(SOURCES[:2])
    ids, att = T.greedy_search(model, src, max_len_b=3, return_attention=True)
    b, t = ids.shape
    assert att["cross"].shape == (b, 2, 4, t, src.shape[1]) and att["self"].shape == (b, 2, 4, t, t)
    rows = att["cross"].sum(-1)  # each query's weights sum to 1 over the source
    assert torch.allclose(rows[ids[:, None, None, :].expand_as(rows) != PAD], torch.tensor(1.0), atol=1e-5)
    assert (att["cross"][1, ..., 3:] == 0).all()  # padded source positions get no weight
    ids_b, att_b = T.beam_search(model, src, beam_size=2, n_best=2, max_len_b=3, return_attention=True)
    assert att_b["cross"].shape[:2] == (b, 2) and att_b["cross"].shape[-2] == ids_b.shape[-1]


def test_attention_has_no_row_for_the_query_that_predicted_eos():
    # Sentence 0 is made to end with </s> after one token; sentence 1 runs to the length bound.
    model = tiny()
    src = _batch(SOURCES[:2])
    calls = []

    def end_sentence_0(module, args, out):
        calls.append(None)
        if len(calls) == 2:  # the second step: </s> for row 0
            out = out.clone()
            out[0, :, EOS] = 1e4
        return out

    handle = model.lm_head.register_forward_hook(end_sentence_0)
    try:
        ids, att = T.greedy_search(model, src, max_len_a=0, max_len_b=4, return_attention=True)
        calls.clear()
        ids_b, att_b = T.beam_search(model, src, beam_size=1, max_len_a=0, max_len_b=4, return_attention=True)
    finally:
        handle.remove()
    for ids_, att_ in ((ids, att), (ids_b, att_b)):
        assert (ids_ != PAD).sum(-1).tolist() == [1, 4]
        for kind in ("self", "cross"):
            assert (att_[kind][0, :, :, 1:] == 0).all()  # no row for the </s> query, nothing after it
            assert torch.allclose(att_[kind][:, :, :, 0].sum(-1), torch.tensor(1.0), atol=1e-5)
            assert torch.allclose(att_[kind][1].sum(-1), torch.tensor(1.0), atol=1e-5)  # every row of the long one
    torch.testing.assert_close(att_b["cross"], att["cross"])  # beam 1 = greedy, weights too


def test_bad_input_gives_clear_errors():
    model = tiny()
    with pytest.raises(T.ConfigError, match="n_best"):
        T.beam_search(model, [[5, 3]], beam_size=2, n_best=3)
    with pytest.raises(ValueError, match="cannot generate"):
        T.greedy_search(tiny("encoder"), [[5, 3]])
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        T.greedy_search(tiny("decoder"), [[2, 5], []])
    with pytest.raises(ValueError, match="length_penalty_kind"):
        T.beam_search(model, [[5, 3]], length_penalty_kind="gnmt")


# --------------------------------------------------------------------------------------------
# Parity with Hugging Face generate on a random Marian model (nothing downloaded).


def _until(row: list[int], stop: int) -> list[int]:
    return row[: row.index(stop)] if stop in row else row


@pytest.mark.parametrize("beam,alpha,n_best,early,min_len", [
    (1, 1.0, 1, True, 0), (1, 1.0, 1, True, 3), (5, 0.6, 3, True, 0), (3, -0.5, 2, True, 2),
    (4, 1.0, 2, "never", 0),
])
def test_marian_greedy_and_beam_match_hf_generate(beam, alpha, n_best, early, min_len):
    transformers = pytest.importorskip("transformers")
    from transformer.interop.hf import from_hf

    torch.manual_seed(0)
    config = transformers.MarianConfig(
        vocab_size=61, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=64,
        pad_token_id=60, decoder_start_token_id=60, eos_token_id=0)
    hf = transformers.MarianMTModel(config).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "embed_positions" not in name:  # the fixed sinusoid table stays as it is
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
        hf.final_logits_bias[0, 0] += 0.8  # </s> often enough that hypotheses end at different lengths
    ours = from_hf(hf)
    src = torch.randint(1, 60, (4, 9), generator=g)
    mask = torch.arange(9)[None] < torch.tensor([[9], [5], [7], [3]])
    src = src.masked_fill(~mask, 60)
    max_new = 12
    # Equivalent settings: HF's lengths count the decoder start token; it never generates <pad> here
    # because ours never does; no forced </s>, no n-gram blocking, no sampling.
    with torch.no_grad():
        out = hf.generate(input_ids=src, attention_mask=mask.long(), max_length=max_new + 1, min_length=min_len + 1,
                          num_beams=beam, length_penalty=alpha, early_stopping=early, num_return_sequences=n_best,
                          do_sample=False, suppress_tokens=[60], forced_eos_token_id=None, bad_words_ids=None,
                          no_repeat_ngram_size=0, repetition_penalty=1.0, output_scores=True,
                          return_dict_in_generate=True)
    theirs = [_until(row[1:], 0) for row in out.sequences.tolist()]
    if beam == 1:
        ids = T.greedy_search(ours, src, src_mask=mask, max_len_a=0, max_len_b=max_new, min_len=min_len)
    else:
        ids, scores = T.beam_search(ours, src, src_mask=mask, beam_size=beam, length_penalty=alpha,
                                    length_penalty_kind="power", max_len_a=0, max_len_b=max_new, min_len=min_len,
                                    n_best=n_best, early_stopping=early, return_scores=True)
        assert torch.allclose(scores.reshape(-1), out.sequences_scores, atol=1e-4)
    mine = [_until(row, 60) for row in ids.reshape(4 * n_best, ids.shape[-1]).tolist()]
    assert mine == theirs
    if beam > 1:  # hypotheses of different lengths: the test exercises </s> handling
        assert len({len(r) for r in mine}) > 1
