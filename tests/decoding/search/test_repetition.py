"""Repetition guards (decoding/search/repetition.py): no_repeat_ngram_size and repetition_penalty, checked
against their definitions with scripted models (exact outputs), against references written from the
definitions on real tiny models (greedy by recompute, beam scores, brute force), against Hugging
Face, and through the pipeline, the command line and the server."""

from __future__ import annotations

import functools
import itertools
import math

import pytest
import torch
from torch import nn

import transformer as T
from tests.cli.common import run as run_cli
from tests.decoding.scripted import ScriptedModel
from transformer.config import DecodeConfig, ModelConfig, cpu_tiny
from transformer.decoding.search.penalties import length_penalty
from transformer.decoding.search.repetition import (
    RepetitionGuards,
    block_repeated_ngrams,
    penalize_repetitions,
)
from transformer.decoding.search.step import Stepper
from transformer.model.cache import KVCache

PAD, START, EOS = 0, 2, 3
THE, GATE, DOOR, IS, OF = 4, 5, 6, 7, 8
FLOOR = -30.0
"""The logit of every token a script does not name."""


# --------------------------------------------------------------------------------------------
# The definitions, written out plainly: the references every test compares with.


def ngrams(seq: list[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)]


def banned(history: list[int], n: int) -> set[int]:
    """The tokens that would complete an n-gram already in history."""
    if n <= 0 or len(history) < n:
        return set()
    tail = tuple(history[len(history) - n + 1 :])
    return {g[-1] for g in ngrams(history, n) if g[:-1] == tail}


def penalized(logits: torch.Tensor, history: list[int], p: float) -> torch.Tensor:
    """CTRL / CTranslate2 / Hugging Face: each token already output, its logit / p if positive,
    * p if not."""
    out = logits.clone()
    for tok in set(history):
        x = float(logits[tok])
        out[tok] = x / p if x > 0 else x * p
    return out


def guarded(logits: torch.Tensor, history: list[int], n: int, p: float) -> torch.Tensor:
    """Next-token log-probabilities (V,) under both guards (and <pad> never generated)."""
    lp = torch.log_softmax(penalized(logits.float(), history, p), -1)
    for tok in banned(history, n):
        lp[tok] = -math.inf
    lp[PAD] = -math.inf
    return lp


# --------------------------------------------------------------------------------------------
# Scripted models: next-token logits from a script of (sentence, output so far), so that without
# a guard the output loops. The output so far rides in the cache's self-attention slot, so beam
# reordering moves it as it moves real keys and values.


class Scripted(ScriptedModel):
    """script(sentence, prefix) -> {token: logit} (tests/decoding/scripted.py)."""

    def __init__(self, script, vocab: int = 10):
        super().__init__(vocab)
        self.script = script

    def row(self, sentence, prefix):
        return logit_row(self.script(sentence, prefix), self.config.vocab_size)


class ScriptedLM(T.DecoderOnly):
    """A language model: script(sequence) -> {token: logit}; sequence = the prompt, then the
    output."""

    def __init__(self, script, vocab: int = 10):
        nn.Module.__init__(self)
        self.config = ModelConfig(vocab_size=vocab, d_model=8, n_heads=1, d_ff=8, arch="decoder")
        self.script = script
        self.anchor = nn.Parameter(torch.zeros(1))

    def new_cache(self):
        return KVCache.empty(1)

    def forward(self, ids, attention_mask=None, cache=None, need_weights=False, last_only=False):
        layer = cache.layers[0]
        seq = ids.float() if layer.self_kv is None else torch.cat([layer.self_kv[0], ids.float()], 1)
        layer.self_kv = (seq, seq)
        rows = [
            logit_row(self.script(tuple(t for t in row if t != PAD)), self.config.vocab_size)
            for row in seq.long().tolist()
        ]
        return torch.stack(rows)[:, None]  # (B, 1, V)


def logit_row(logits: dict, vocab: int) -> torch.Tensor:
    row = torch.full((vocab,), FLOOR)
    for tok, x in logits.items():
        row[tok] = x
    return row


def probabilities(table: dict):
    """A script from next-token probabilities: logits log p (log-probabilities already)."""
    return lambda key: {tok: math.log(p) for tok, p in table.get(key, {EOS: 1.0}).items()}


# "the gate is the gate is ...": the next token depends on the last one only.
CHAIN = {
    (): {THE: 1.0},
    THE: {GATE: 0.6, DOOR: 0.3, EOS: 0.1},
    GATE: {IS: 0.5, OF: 0.4, EOS: 0.1},
    IS: {THE: 0.9, EOS: 0.1},
    OF: {THE: 0.9, EOS: 0.1},
    DOOR: {EOS: 0.9, THE: 0.1},
}
chain = Scripted(lambda s, prefix: probabilities(CHAIN)(prefix[-1] if prefix else ()))


@pytest.mark.parametrize(
    "n, expected",
    [
        (0, [THE, GATE, IS] * 3 + [THE]),  # off: the loop runs to the length bound
        (1, [THE, GATE, IS]),  # every token once, then </s> is all that is left
        (2, [THE, GATE, IS, THE, DOOR]),  # "the gate" again is blocked
        (3, [THE, GATE, IS, THE, GATE, OF, THE, GATE]),  # "the gate is" / "the gate of" blocked
    ],
)
def test_greedy_no_repeat_ngram_scripted(n, expected):
    ids, score = T.greedy_search(
        chain, [[1]], max_len_a=0, max_len_b=10, no_repeat_ngram_size=n, return_scores=True
    )
    assert ids[0].tolist() == expected
    # -inf on the blocked tokens, not renormalised: the score is still log P(Y | X) of the model
    seq = expected + ([EOS] if len(expected) < 10 else [])
    logp = sum(math.log(CHAIN[p[-1] if p else ()][t]) for p, t in prefixes(seq))
    assert float(score[0]) == pytest.approx(logp, abs=1e-5)


def prefixes(seq: list[int]):
    return [(tuple(seq[:i]), tok) for i, tok in enumerate(seq)]


def test_sampling_at_temperature_0_and_top_k_1_follows_the_guards():
    for n, expected in ((2, [THE, GATE, IS, THE, DOOR]), (3, [THE, GATE, IS, THE, GATE, OF, THE, GATE])):
        for kw in (dict(temperature=0.0), dict(top_k=1, temperature=0.8)):
            out = T.sample(chain, [[1]], max_new_tokens=10, no_repeat_ngram_size=n,
                           generator=torch.Generator().manual_seed(0), **kw)
            assert out[0].tolist() == expected, kw


# Logits, not probabilities: a positive logit is divided by the penalty, a negative one multiplied.
LOGITS = {
    (): {THE: 3.0},
    THE: {GATE: 2.0, DOOR: 1.0},
    GATE: {IS: -1.0, OF: -1.4},
    IS: {THE: 2.5, EOS: 1.0},
    OF: {EOS: 2.0},
    DOOR: {EOS: 5.0},
}
penalised_chain = Scripted(lambda s, prefix: LOGITS.get(prefix[-1] if prefix else (), {EOS: 0.0}))


@pytest.mark.parametrize(
    "p, expected",
    [
        (1.0, [THE, GATE, IS] * 3 + [THE]),
        (1.2, [THE, GATE, IS] * 3 + [THE]),  # 2.5/1.2 > 1, 2/1.2 > 1, -1*1.2 > -1.4: still loops
        (1.5, [THE, GATE, IS, THE, GATE, OF]),  # -1 * 1.5 < -1.4 (dividing would have kept "is")
        (3.0, [THE, GATE, IS]),  # 2.5 / 3 < 1: </s>
    ],
)
def test_greedy_repetition_penalty_scripted(p, expected):
    ids = T.greedy_search(penalised_chain, [[1]], max_len_a=0, max_len_b=10, repetition_penalty=p)
    assert ids[0].tolist() == expected


def test_repetition_penalty_is_the_formula_on_logits():
    """Each step's log-probabilities are log_softmax of the penalised logits (not of penalised
    log-probabilities), a token seen twice penalised once; greedy's score sums them."""
    p = 1.5
    stepper = Stepper(penalised_chain, [[1]], guards=RepetitionGuards(0, p))
    seq = [THE, GATE, IS, THE, GATE, OF]
    with torch.inference_mode():
        got = [stepper.start()[0]] + [stepper.step(torch.tensor([t]))[0] for t in seq]
    for i, lp in enumerate(got):
        logits = logit_row(LOGITS.get(seq[i - 1] if i else (), {EOS: 0.0}), 10)
        want = torch.log_softmax(penalized(logits, seq[:i], p), -1)
        torch.testing.assert_close(lp, want, rtol=0, atol=1e-6)
    assert stepper.output.tolist() == [seq]
    _, score = T.greedy_search(penalised_chain, [[1]], max_len_b=10, repetition_penalty=p,
                               return_scores=True)
    want = sum(float(got[i][t]) for i, t in enumerate([*seq, EOS]))
    assert float(score[0]) == pytest.approx(want, abs=1e-5)


def test_the_functions_are_the_definitions():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 9, generator=g) * 3
    logits[0, 2] = 0.0
    history = torch.randint(0, 9, (4, 7), generator=g)
    history[1] = torch.tensor([1, 2, 1, 2, 1, 2, 1])
    for p in (0.5, 1.3, 4.0):
        want = torch.stack([penalized(logits[r], history[r].tolist(), p) for r in range(4)])
        torch.testing.assert_close(penalize_repetitions(logits, history, p), want)
    for n in range(0, 9):
        lp = block_repeated_ngrams(torch.zeros(4, 9), history, n)
        want = [banned(row, n) for row in history.tolist()]
        assert [set(torch.isinf(row).nonzero().flatten().tolist()) for row in lp] == want, n
    assert banned([1, 2, 1, 2, 1, 2, 1], 2) == {2} and banned([1, 2, 1], 1) == {1, 2}


def test_the_functions_match_hugging_face():
    logits_process = pytest.importorskip("transformers.generation.logits_process")
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        history = torch.randint(0, 6, (3, 12), generator=g)
        scores = torch.randn(3, 6, generator=g) * 2
        for p in (0.7, 1.3):
            hf = logits_process.RepetitionPenaltyLogitsProcessor(p)(history, scores.clone())
            assert torch.equal(penalize_repetitions(scores, history, p), hf)
        for n in (1, 2, 3):
            hf = logits_process.NoRepeatNGramLogitsProcessor(n)(history, scores.clone())
            assert torch.equal(block_repeated_ngrams(scores.clone(), history, n), hf)


# Beam search: a hypothesis's history follows it when beams are reordered. With n = 1 (each token
# once): after step 1 the beams are "4" (.5) and "5" (.4); at step 2 they swap: "5 7" (.032) comes
# from beam 1 and becomes beam 0, "4 6" (.030) from beam 0 becomes beam 1. At step 3 the new beam 0
# must block 5 (its own history), not 4: "5 7 4" (.0064) and "4 6 5" (.006); with the histories of
# the slots instead, "5 7 5" (.0224) would win.
SWAP = {
    (): {4: 0.5, 5: 0.4, EOS: 0.1},
    (4,): {4: 0.9, 6: 0.06, EOS: 0.04},
    (5,): {5: 0.9, 7: 0.08, 6: 0.02},
    (5, 7): {5: 0.7, 4: 0.2, EOS: 0.1},
    (4, 6): {4: 0.7, 5: 0.2, EOS: 0.1},
}
swap = Scripted(lambda s, prefix: probabilities(SWAP)(prefix))


def test_beam_histories_follow_their_beams_through_reordering():
    kw = dict(beam_size=2, n_best=2, length_penalty=0.0, max_len_a=0, max_len_b=10, return_scores=True)
    ids, scores = T.beam_search(swap, [[1]], **kw)
    assert ids[0].tolist() == [[4, 4], [5, 5]]  # off: the repeats win
    ids, scores = T.beam_search(swap, [[1]], no_repeat_ngram_size=1, **kw)
    assert ids[0].tolist() == [[5, 7, 4], [4, 6, 5]]
    assert scores[0].tolist() == pytest.approx([math.log(0.0064), math.log(0.006)], abs=1e-5)


def test_language_model_history_is_the_output_not_the_prompt():
    # Prompt "<s> the gate"; the output "is the gate is" may reuse "the gate" (a bigram of the
    # prompt); "is the" again is blocked, so </s>. Counting the prompt (Hugging Face) would block
    # "the gate" at once: "is the door".
    table = {GATE: {IS: 0.6, OF: 0.4}, IS: {THE: 0.9, EOS: 0.1}, THE: {GATE: 0.6, DOOR: 0.4},
             OF: {THE: 0.9, EOS: 0.1}, DOOR: {EOS: 1.0}}
    lm = ScriptedLM(lambda seq: probabilities(table)(seq[-1]))
    prompts = [[START, THE, GATE], [START, DOOR, START, THE, GATE]]  # different lengths: left-padded
    for fn in (
        lambda: T.greedy_search(lm, prompts, max_len_a=0, max_len_b=8, no_repeat_ngram_size=2),
        lambda: T.sample(lm, prompts, max_new_tokens=8, temperature=0, no_repeat_ngram_size=2),
    ):
        assert fn().tolist() == [[IS, THE, GATE, IS]] * 2
    assert T.greedy_search(lm, prompts, max_len_a=0, max_len_b=8)[0].tolist() == [IS, THE, GATE] * 2 + [IS, THE]


# --------------------------------------------------------------------------------------------
# Real tiny models (random: they loop) against references from the definitions.


def tiny(arch="encoder-decoder", vocab=24, seed=0, **kw):
    torch.manual_seed(seed)
    values = dict(d_model=32, d_ff=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2)
    return T.build_model(cpu_tiny(vocab_size=vocab, arch=arch, **{**values, **kw})).eval()


SOURCES = [[5, 6, 7, 8, 9, 10, 3], [11, 12, 3], [13, 3], [14, 15, 16, 17, 3]]
GUARDS = [(2, 1.0), (3, 1.0), (1, 1.0), (0, 1.3), (0, 0.7), (2, 1.5)]


def next_logits(model, src, out):
    """The model's next-token logits (V,) after output `out`, by full recompute (no cache)."""
    return _next_logits(model, tuple(src), tuple(out))


@functools.cache
def _next_logits(model, src: tuple, out: tuple) -> torch.Tensor:
    with torch.no_grad():
        if isinstance(model, T.DecoderOnly):
            return model(torch.tensor([src + out]))[0, -1].float()
        return model(torch.tensor([src]), torch.tensor([[START, *out]]))[0, -1].float()


def reference_greedy(model, src, max_new, n, p):
    out, total = [], 0.0
    for _ in range(max_new):
        lp = guarded(next_logits(model, src, out), out, n, p)
        tok = int(lp.argmax())
        total += float(lp[tok])
        if tok == EOS:
            break
        out.append(tok)
    return out, total


def reference_score(model, src, hyp, ended, n, p):
    """log P of a hypothesis under the guards (</s> included when it ended with it)."""
    seq = hyp + ([EOS] if ended else [])
    return sum(float(guarded(next_logits(model, src, seq[:i]), seq[:i], n, p)[t]) for i, t in enumerate(seq))


def rows_of(ids):
    return [[t for t in row if t != PAD] for row in ids.tolist()]


@pytest.mark.parametrize("n, p", GUARDS)
def test_greedy_equals_the_reference_and_a_batch_equals_one_at_a_time(n, p):
    for arch, sources in (("encoder-decoder", SOURCES), ("decoder", [[2, 5, 6, 7], [2, 9], [2, 11, 12]])):
        model = tiny(arch)
        ids, scores = T.greedy_search(model, sources, max_len_a=0, max_len_b=10, no_repeat_ngram_size=n,
                                      repetition_penalty=p, return_scores=True)
        for src, row, score in zip(sources, rows_of(ids), scores.tolist(), strict=True):
            ref, ref_score = reference_greedy(model, src, 10, n, p)
            assert row == ref and score == pytest.approx(ref_score, abs=1e-4)
            if n:
                assert len(set(ngrams(row, n))) == len(ngrams(row, n))
        sampled = T.sample(model, sources, max_new_tokens=10, top_k=1, no_repeat_ngram_size=n,
                           repetition_penalty=p, generator=torch.Generator().manual_seed(0))
        assert torch.equal(sampled, T.greedy_search(model, sources, max_len_a=0, max_len_b=10,
                                                    no_repeat_ngram_size=n, repetition_penalty=p))


def test_the_real_models_loop_without_the_guards():
    """The tests above are not vacuous: unguarded, greedy repeats n-grams on every source."""
    ids = T.greedy_search(tiny(), SOURCES, max_len_a=0, max_len_b=10)
    assert all(len(set(ngrams(row, 3))) < len(ngrams(row, 3)) for row in rows_of(ids))


@pytest.mark.parametrize("beam", [2, 3, 4])
@pytest.mark.parametrize("n, p", [(2, 1.0), (0, 1.4), (3, 0.8)])
def test_beam_scores_are_the_guarded_log_probabilities_of_each_hypothesis(beam, n, p):
    """Every hypothesis of every beam is scored under its own history (a history that did not
    follow its beam through the reorders would score, or block, with another's)."""
    model, max_new = tiny(), 8
    ids, scores = T.beam_search(model, SOURCES, beam_size=beam, n_best=beam, length_penalty=0.0,
                                max_len_a=0, max_len_b=max_new, no_repeat_ngram_size=n,
                                repetition_penalty=p, return_scores=True)
    for i, src in enumerate(SOURCES):
        for hyp, score in zip(rows_of(ids[i]), scores[i].tolist(), strict=True):
            if score == -math.inf:
                continue
            assert score == pytest.approx(reference_score(model, src, hyp, len(hyp) < max_new, n, p), abs=1e-4)
            if n:
                assert len(set(ngrams(hyp, n))) == len(ngrams(hyp, n))
        one, one_scores = T.beam_search(model, [src], beam_size=beam, n_best=beam, length_penalty=0.0,
                                        max_len_a=0, max_len_b=max_new, no_repeat_ngram_size=n,
                                        repetition_penalty=p, return_scores=True)
        assert rows_of(ids[i]) == rows_of(one[0])
        assert torch.allclose(scores[i], one_scores[0], atol=1e-4)


@pytest.mark.parametrize("n, p", [(2, 1.0), (1, 1.0), (0, 2.0), (2, 0.6)])
def test_wide_beam_finds_the_best_guarded_sequence_by_brute_force(n, p):
    model = tiny(vocab=5, seed=3, d_model=16, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                 output_bias=True, tie_embeddings=False)
    with torch.no_grad():
        model.lm_head.weight.mul_(4)
        model.lm_head.bias[EOS] = -1.0
    src, max_len, words = [4, 1, 4], 5, [1, 2, 4]
    hyps = [(list(w), True) for k in range(max_len) for w in itertools.product(words, repeat=k)]
    hyps += [(list(w), False) for w in itertools.product(words, repeat=max_len)]
    scored = []
    for hyp, ended in hyps:
        raw = reference_score(model, src, hyp, ended, n, p)
        scored.append((raw / length_penalty(len(hyp) + ended, 0.6, "wu"), hyp))
    best_score, best = max(scored, key=lambda x: x[0])
    ids, score = T.beam_search(model, [src], beam_size=400, max_len_a=0, max_len_b=max_len,
                               early_stopping="never", no_repeat_ngram_size=n, repetition_penalty=p,
                               return_scores=True)
    assert rows_of(ids) == [best]
    assert float(score[0]) == pytest.approx(best_score, abs=1e-4)


def test_decoder_only_left_padded_batch_equals_one_at_a_time():
    model = tiny("decoder")
    prompts = [[2, 5, 6, 7, 8], [2, 9], [2, 11, 12]]
    guard = dict(no_repeat_ngram_size=2, repetition_penalty=1.3)
    for fn in (lambda x: T.greedy_search(model, x, max_len_a=0, max_len_b=8, return_scores=True, **guard),
               lambda x: T.beam_search(model, x, beam_size=3, max_len_a=0, max_len_b=8, return_scores=True,
                                       **guard)):
        ids, scores = fn(prompts)
        for i, prompt in enumerate(prompts):
            one, one_score = fn([prompt])
            assert rows_of(ids[i : i + 1]) == rows_of(one)
            assert float(scores[i]) == pytest.approx(float(one_score[0]), abs=1e-4)


def test_sampling_never_repeats_a_blocked_ngram():
    model = tiny("decoder")
    out = T.sample(model, [[2, 9, 4]] * 16, max_new_tokens=12, temperature=1.5, no_repeat_ngram_size=2,
                   generator=torch.Generator().manual_seed(0))
    for row in rows_of(out):
        assert len(set(ngrams(row, 2))) == len(ngrams(row, 2))


def test_off_is_todays_decoding_bit_for_bit():
    """Off (the defaults) keeps no history at all; guards that never fire (n longer than any
    output, penalty 1) give the same bits as off, so the guarded step changes nothing else."""
    model = tiny()
    stepper = Stepper(model, SOURCES)
    assert stepper.guards is None and stepper.output is None
    assert RepetitionGuards.of(0, 1.0) is None
    for search in (
        lambda **g: T.greedy_search(model, SOURCES, max_len_b=6, return_scores=True, **g),
        lambda **g: T.beam_search(model, SOURCES, beam_size=3, n_best=2, max_len_b=6, return_scores=True, **g),
        lambda **g: T.sample(model, SOURCES, max_new_tokens=6, temperature=1.2, return_scores=True,
                             generator=torch.Generator().manual_seed(0), **g),
    ):
        off, off_scores = search()
        for guard in (dict(no_repeat_ngram_size=0, repetition_penalty=1.0), dict(no_repeat_ngram_size=50)):
            ids, scores = search(**guard)
            assert torch.equal(ids, off) and torch.equal(scores, off_scores)


def test_bad_values_are_refused():
    with pytest.raises(T.ConfigError, match="no_repeat_ngram_size=-1"):
        T.greedy_search(tiny(), [[5, 3]], no_repeat_ngram_size=-1)
    for p in (0.0, -1.0, math.inf):
        with pytest.raises(T.ConfigError, match="repetition_penalty"):
            T.beam_search(tiny(), [[5, 3]], repetition_penalty=p)
    assert DecodeConfig().no_repeat_ngram_size == 0 and DecodeConfig().repetition_penalty == 1.0


# --------------------------------------------------------------------------------------------
# Parity with Hugging Face generate on a random Marian model (nothing downloaded). HF's greedy
# search applies both guards as we do; its beam search applies the penalty to log-probabilities
# (repetition.py), so beams are compared with the n-gram guard only.


@pytest.mark.parametrize("beam, n, p", [(1, 2, 1.0), (1, 3, 1.3), (1, 0, 1.6), (1, 2, 0.8), (4, 2, 1.0), (3, 3, 1.0)])
def test_marian_matches_hf_generate(beam, n, p):
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
        for name, param in hf.named_parameters():
            if "embed_positions" not in name:
                param.add_(torch.randn(param.shape, generator=g) * 0.1)
    ours = from_hf(hf)
    src = torch.randint(1, 60, (4, 9), generator=g)
    mask = torch.arange(9)[None] < torch.tensor([[9], [5], [7], [3]])
    src = src.masked_fill(~mask, 60)
    max_new = 12
    with torch.no_grad():
        out = hf.generate(input_ids=src, attention_mask=mask.long(), max_length=max_new + 1, num_beams=beam,
                          length_penalty=1.0, early_stopping=True, do_sample=False, suppress_tokens=[60],
                          forced_eos_token_id=None, bad_words_ids=None, no_repeat_ngram_size=n,
                          repetition_penalty=p, output_scores=True, return_dict_in_generate=True)
    until = lambda row, stop: row[: row.index(stop)] if stop in row else row  # noqa: E731
    theirs = [until(row[1:], 0) for row in out.sequences.tolist()]
    guard = dict(no_repeat_ngram_size=n, repetition_penalty=p)
    if beam == 1:
        ids = T.greedy_search(ours, src, src_mask=mask, max_len_a=0, max_len_b=max_new, **guard)
        plain = T.greedy_search(ours, src, src_mask=mask, max_len_a=0, max_len_b=max_new)
    else:
        kw = dict(src_mask=mask, beam_size=beam, length_penalty=1.0, length_penalty_kind="power",
                  max_len_a=0, max_len_b=max_new)
        ids, scores = T.beam_search(ours, src, return_scores=True, **kw, **guard)
        plain = T.beam_search(ours, src, **kw)
        assert torch.allclose(scores, out.sequences_scores, atol=1e-4)
    assert [until(row, 60) for row in ids.tolist()] == theirs
    assert not torch.equal(ids, plain)  # the guard changed something


# --------------------------------------------------------------------------------------------
# Through the pipeline, the command line and the server.


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    from transformer.data.tokenizer import train_bpe

    text = ["the cat sat on the mat", "a dog ran in the park", "el gato se sentó", "hace sol hoy"] * 20
    tok = train_bpe(text, vocab_size=300)
    tmp = tmp_path_factory.mktemp("repetition")
    out = {}
    for arch in ("encoder-decoder", "decoder"):
        torch.manual_seed(0)
        model = T.build_model(cpu_tiny(vocab_size=tok.vocab_size, arch=arch, max_positions=64))
        out[arch] = T.save_model(model, tmp / arch, tokenizer=tok,
                                 decode=DecodeConfig(beam_size=1, max_len_b=12, max_new_tokens=12))
    return out


LINES = ["the cat sat on the mat", "hace sol hoy", "a dog"]


def test_pipeline_passes_the_guards_to_every_search(model_dirs):
    from transformer.decoding.pipeline import Pipeline

    mt = Pipeline.load(model_dirs["encoder-decoder"])
    for beam in (1, 3):
        s = mt.settings(beam_size=beam, no_repeat_ngram_size=2, repetition_penalty=1.2)
        want = [mt.target_tokenizer.decode(mt.search([mt.source_tokenizer.encode(x)], s)[0].tolist()).strip()
                for x in LINES]
        got = mt.translate(LINES, beam_size=beam, no_repeat_ngram_size=2, repetition_penalty=1.2)
        assert got == want and got != mt.translate(LINES, beam_size=beam)
    lm = Pipeline.load(model_dirs["decoder"])
    ids = [lm.prompt_ids("the cat")]
    greedy = T.greedy_search(lm.model, ids, max_len_a=0, max_len_b=12, no_repeat_ngram_size=2)
    assert lm.generate("the cat", temperature=0, no_repeat_ngram_size=2) == lm.target_tokenizer.decode(
        greedy[0].tolist())
    beam = T.beam_search(lm.model, ids, beam_size=2, max_len_a=0, max_len_b=12, repetition_penalty=1.5)
    assert lm.generate("the cat", beam_size=2, repetition_penalty=1.5) == lm.target_tokenizer.decode(
        beam[0].tolist())


def test_cli_flags(model_dirs, tmp_path, capsys):
    from transformer.decoding.pipeline import Pipeline

    mt, lm = model_dirs["encoder-decoder"], model_dirs["decoder"]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    rc, out, err = run_cli(["translate", mt, "--input", src, "--no-repeat-ngram", "3"], capsys)
    assert rc == 0 and out.splitlines() == Pipeline.load(mt).translate(LINES, no_repeat_ngram_size=3)
    rc, out, _ = run_cli(["generate", lm, "--prompt", "the cat", "--temperature", "0",
                          "--repetition-penalty", "1.3", "--no-repeat-ngram", "2"], capsys)
    want = Pipeline.load(lm).generate("the cat", temperature=0, repetition_penalty=1.3, no_repeat_ngram_size=2)
    assert rc == 0 and out == want + "\n"
    # a text-to-text model answers generate as translate does, guards included
    rc, out, _ = run_cli(["generate", mt, "--prompt", "the cat", "--no-repeat-ngram", "2"], capsys)
    assert rc == 0 and out == Pipeline.load(mt).translate(["the cat"], no_repeat_ngram_size=2)[0] + "\n"


@pytest.mark.parametrize("command, flags, line", [
    ("translate", ["--no-repeat-ngram", "-1"], "--no-repeat-ngram -1: give a number of tokens >= 0 (0 = off)"),
    ("translate", ["--repetition-penalty", "0"], "--repetition-penalty 0.0: give a number > 0 (1 = off)"),
    ("translate", ["--repetition-penalty", "-2"], "--repetition-penalty -2.0: give a number > 0 (1 = off)"),
    ("generate", ["--repetition-penalty", "0"], "--repetition-penalty 0.0: give a number > 0 (1 = off)"),
])
def test_cli_bad_values_give_one_line_and_exit_2(model_dirs, tmp_path, capsys, command, flags, line):
    model = model_dirs["encoder-decoder" if command == "translate" else "decoder"]
    extra = ["--input", tmp_path / "missing.txt"] if command == "translate" else ["--prompt", "x"]
    rc, out, err = run_cli([command, model, *extra, *flags], capsys)
    assert rc == 2 and out == ""
    assert err == f"transformer {command}: error: {line}\n"


def test_server_passes_the_guards(model_dirs):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from transformer.config import ServeConfig
    from transformer.decoding.pipeline import Pipeline
    from transformer.serve import create_app

    guard = {"no_repeat_ngram_size": 2, "repetition_penalty": 1.4}
    mt = Pipeline.load(model_dirs["encoder-decoder"])
    with TestClient(create_app(mt, ServeConfig())) as client:
        r = client.post("/v1/translate", json={"text": LINES, **guard})
        assert r.status_code == 200 and r.json()["translations"] == mt.translate(LINES, **guard)
    lm = Pipeline.load(model_dirs["decoder"])
    with TestClient(create_app(lm, ServeConfig())) as client:
        r = client.post("/v1/generate", json={"prompt": "the cat", "temperature": 0, **guard})
        assert r.status_code == 200 and r.json()["text"] == lm.generate("the cat", temperature=0, **guard)
        assert r.json()["text"] != lm.generate("the cat", temperature=0)
