"""Evaluation: BLEU/chrF agree with sacreBLEU and carry signatures; perplexity matches the definition."""

from __future__ import annotations

import math

import pytest
import sacrebleu
import torch

import transformer as T
from transformer.config import cpu_tiny
from transformer.evaluation import bleu, chrf, model_nll, perplexity, text_perplexity
from transformer.evaluation.metrics import has_loop, loop_rate

HYP = ["the cat sat on the mat", "a dog barked loudly at night"]
REF = ["the cat sat on a mat", "the dog barked loudly at night"]


def test_bleu_and_chrf_match_sacrebleu_with_signatures():
    b = bleu(HYP, REF)
    assert b.score == pytest.approx(sacrebleu.corpus_bleu(HYP, [REF]).score)
    assert "tok:13a" in b.signature and "nrefs:1" in b.signature and b.name == "BLEU"
    assert bleu(REF, REF).score == pytest.approx(100.0)
    c = chrf(HYP, REF)
    assert c.score == pytest.approx(sacrebleu.corpus_chrf(HYP, [REF]).score)
    assert "nc:6" in c.signature and 0 < c.score < 100
    two = bleu(HYP, [REF, HYP])  # several reference sets
    assert two.score == pytest.approx(100.0) and "nrefs:2" in two.signature


def test_misaligned_references_are_a_clear_error():
    with pytest.raises(ValueError, match="2 hypotheses but 1 lines"):
        bleu(HYP, REF[:1])


def test_perplexity_definition_and_decoder_only_nll_matches_shifted_log_probs():
    """A random (non-uniform) language model, so that an off-by-one in the shift shows: each token
    after the first is scored by the distribution at the position before it. Sequences of different
    lengths in one batch (padded) give what each gives alone."""
    assert perplexity(2 * math.log(7), 2) == pytest.approx(7.0)
    with pytest.raises(ValueError, match="at least one"):
        perplexity(1.0, 0)
    torch.manual_seed(0)
    lm = T.build_model(cpu_tiny(vocab_size=16, arch="decoder")).eval()
    sequences = [[2, 5, 6, 7, 8], [2, 9], [2, 11, 4]]
    expect = 0.0
    for seq in sequences:  # one at a time, no padding
        with torch.no_grad():
            lp = torch.log_softmax(lm(torch.tensor([seq])), -1)[0]  # (T, V)
        expect -= sum(float(lp[i, seq[i + 1]]) for i in range(len(seq) - 1))
    nll, n = model_nll(lm, sequences, batch_size=3)
    assert n == 7 and nll == pytest.approx(expect, rel=1e-5)
    assert model_nll(lm, sequences, batch_size=1) == pytest.approx((expect, 7), rel=1e-5)
    assert model_nll(lm, [[2]]) == (0.0, 0)  # nothing to predict
    encode = lambda s: [2] + [4 + ord(ch) % 8 for ch in s]
    lines = ["a b", "c", "hello"]
    expect = 0.0
    for line in lines:
        seq = encode(line)
        with torch.no_grad():
            lp = torch.log_softmax(lm(torch.tensor([seq])), -1)[0]
        expect -= sum(float(lp[i, seq[i + 1]]) for i in range(len(seq) - 1))
    assert text_perplexity(lm, lines + ["   "], encode=encode) == pytest.approx(math.exp(expect / 9), rel=1e-5)


def test_model_nll_matches_summed_token_log_probs_with_padding():
    torch.manual_seed(0)
    model = T.build_model(cpu_tiny(vocab_size=16)).eval()
    sources, targets = [[5, 6, 3], [7, 3]], [[8, 9, 10], [11]]
    nll, n = model_nll(model, targets, sources=sources, batch_size=2)
    expect = 0.0
    for s, t in zip(sources, targets, strict=True):  # one at a time, no padding
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([s]), torch.tensor([[2] + t])), -1)[0]
        expect -= sum(float(lp[i, tok]) for i, tok in enumerate(t + [3]))
    assert n == 6 and nll == pytest.approx(expect, rel=1e-5)


LOOPS = [
    "Bllllllllll.",
    "The gate is the gate of the gate.",
    "What is the who is is is the who is is is is",
    "He made the stororor of the winter of the storororororor.",
    "the who is the who is the who is",
    "No, no, no, no.",  # emphasis has three; four in a row is a loop
    "And the Lord said to the Lord said to the Lord said to Moses.",  # a 4-word span, three times
    "77777777777777777777",  # digits and punctuation: ten in a row
    "“ “ “ “ “ “ “ “ “ “ “ “",
]
NOT_LOOPS = [
    "I said no, no, no.",  # emphasis: punctuation after each of the three
    "Mississippi",
    "www",
    "The year 1000000 passed.",  # digits count only ten in a row
    "Wait . . . what?",
    "Joram his son, Ahaziah his son, Joash his son,",  # a list, not a loop
    "Yahweh said to Moses, “Go in to Pharaoh, and tell him, ‘This is what Yahweh, the God of the "
    "Hebrews, says: “Let my people go, that they may serve me. For if you refuse to let them go, and "
    "hold them still, behold, Yahweh’s hand is on your livestock which are in the field, on the "
    "horses, on the donkeys, on the camels, on the herds, and on the flocks with a very grievous "
    "pestilence, and Yahweh will make a distinction between the livestock of Israel and the "
    "livestock of Egypt; and nothing shall die of all that belongs to the children of Israel.”’”",
    "There was a certain Jew in the citadel of Susa whose name was Mordecai, the son of Jair, the son "
    "of Shimei, the son of Kish, a Benjamite,",  # "the son of" three times in a long verse
    "",
]


@pytest.mark.parametrize("text", LOOPS)
def test_degenerate_repetition_is_a_loop(text):
    assert has_loop(text)


@pytest.mark.parametrize("text", NOT_LOOPS)
def test_ordinary_repetition_is_not_a_loop(text):
    assert not has_loop(text)


def test_loop_rate_is_the_share_of_looping_lines():
    assert loop_rate(LOOPS[:2] + NOT_LOOPS[:2]) == 0.5
    assert loop_rate([]) == 0.0


def _by_hand(lm, ids, window, ignore=None):
    """Each token after the first scored from the (up to) `window` tokens before it: summed NLL and
    count, one forward pass per token."""
    nll, n = 0.0, 0
    for p in range(1, len(ids)):
        if ids[p] == ignore:
            continue
        context = ids[max(0, p - window) : p] if p > window else ids[:p]
        with torch.no_grad():
            lp = torch.log_softmax(lm(torch.tensor([context])), -1)[0, -1]
        nll, n = nll - float(lp[ids[p]]), n + 1
    return nll, n


@pytest.mark.parametrize("window,stride", [(6, 6), (6, 1), (6, 4), (40, 40)])
def test_stream_nll_in_sliding_windows_by_hand(window, stride):
    """A random language model over one stream: stride = window scores blocks side by side (each
    token with the tokens before it in its block); stride 1 gives each token (after the first
    window) the full window of context. Compared with each token scored alone from its context."""
    from transformer.evaluation.scoring import stream_nll, windows

    torch.manual_seed(0)
    lm = T.build_model(cpu_tiny(vocab_size=16, arch="decoder")).eval()
    ids = [2, 5, 6, 7, 8, 3, 2, 9, 11, 4, 4, 5, 12, 13, 3, 2, 6, 7, 3]
    spans = windows(len(ids), window, stride)
    scored = [p for b, e, first in spans for p in range(max(b, first) + 1, e + 1)]
    assert scored == list(range(1, len(ids)))  # every token after the first, once, in order
    nll, n = stream_nll(lm, ids, window, stride, ignore=2, batch_size=3)
    if stride == 1 or window >= len(ids):  # each token from the whole window before it
        expect = _by_hand(lm, ids, window, ignore=2)
    else:  # each token from the tokens before it in the window that scores it
        expect = (0.0, 0)
        for b, e, first in spans:
            for p in range(max(b, first) + 1, e + 1):
                part = _by_hand(lm, ids[b : p + 1], window, ignore=2)
                whole = _by_hand(lm, ids[b:p], window, ignore=2)
                expect = (expect[0] + part[0] - whole[0], expect[1] + part[1] - whole[1])
    assert n == expect[1] == len(ids) - 1 - ids[1:].count(2)
    assert nll == pytest.approx(expect[0], rel=1e-5)


def test_score_text_per_character_by_hand(tmp_path):
    """Nats per character = the stream's summed NLL (its </s> included, <s> never a target) over
    the characters of the text; bits = nats / ln 2."""
    from transformer.data.tokenizer import train_char
    from transformer.evaluation.scoring import score_text

    text = "ab ba\nabba\n\nb a\n"
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    tok = train_char([text], 16, min_frequency=1)
    torch.manual_seed(1)
    lm = T.build_model(cpu_tiny(vocab_size=16, arch="decoder", max_positions=64)).eval()
    score = score_text(lm, tmp_path / "t.txt", tok)
    ids = [2] + tok.encode(text) + [3]
    nll, n = _by_hand(lm, ids, 64, ignore=2)
    assert (score.tokens, score.chars) == (n, len(text)) == (len(text) + 1, 16)
    assert score.nll == pytest.approx(nll, rel=1e-5)
    assert score.nll_per_char == pytest.approx(nll / len(text), rel=1e-5)
    assert score.bits_per_char == pytest.approx(nll / len(text) / math.log(2), rel=1e-5)
    assert score.perplexity == pytest.approx(math.exp(nll / n), rel=1e-5)
