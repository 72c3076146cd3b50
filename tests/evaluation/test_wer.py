"""Word error rate: the normalisation, S/D/I counted by hand, and the rate against jiwer on random
pairs."""

from __future__ import annotations

import random

import pytest

from transformer.evaluation.overlap import normalize_transcript, wer, word_errors


@pytest.mark.parametrize(
    "text, normalised",
    [
        ("Hello, World!", "hello world"),
        ("Don't STOP -- believing.", "don't stop believing"),
        ("Don’t", "don't"),  # the typographic apostrophe as '
        ("'Quoted,' the students' o'clock", "quoted the students o'clock"),  # edges dropped
        ("well-known e-mail — a/b", "well known e mail a b"),  # hyphens, dashes, slashes: spaces
        ("U.S. costs $3.50 (50%)", "u s costs 3 50 50"),  # every mark a space, digits kept
        ("  Café\tüber\n naïve  ", "café über naïve"),  # accents kept, whitespace collapsed
        ("?!... --", ""),
    ],
)
def test_normalisation(text, normalised):
    assert normalize_transcript(text) == normalised


def test_errors_counted_by_hand():
    # (substitutions, deletions, insertions, reference words)
    assert word_errors("the cat sat", "The cat sat.") == (0, 0, 0, 3)
    assert word_errors("the dog sat", "the cat sat") == (1, 0, 0, 3)
    assert word_errors("the sat", "the cat sat") == (0, 1, 0, 3)
    assert word_errors("the cat sat down", "the cat sat") == (0, 0, 1, 3)
    assert word_errors("", "a b c") == (0, 3, 0, 3)
    assert word_errors("a b", "") == (0, 0, 2, 0)
    assert word_errors("x y z", "a b c") == (3, 0, 0, 3)
    # a tie of two edits: two substitutions, or b matched with a deleted and c inserted; the
    # alignment with the fewest substitutions (the most matches) is counted
    assert word_errors("b c", "a b") == (0, 1, 1, 2)
    # "don't" is one word; "well-known" two
    assert word_errors("I don't know", "i do not know") == (1, 1, 0, 4)
    assert word_errors("a well known fact", "a well-known fact") == (0, 0, 0, 4)


def test_corpus_rate():
    # 1 deletion over 3 + 1 words, then the insertions an empty reference gets
    assert wer(["a b", "c"], ["a b d", "c"]) == 25.0
    assert wer(["a b c d"], ["a"]) == 300.0  # it can pass 100
    assert wer([""], [""]) == 0.0 and wer([], []) == 0.0
    assert wer(["a"], [""]) == 100.0  # no reference words: 100 when anything was heard
    with pytest.raises(ValueError, match="aligned line by line"):
        wer(["a"], [])


def _edited(words: list[str], vocabulary: list[str], r: random.Random) -> list[str]:
    """The words with random substitutions, deletions and insertions."""
    out = []
    for w in words:
        match r.random():
            case p if p < 0.15:
                out.append(r.choice(vocabulary))  # substituted (sometimes by itself)
            case p if p < 0.25:
                pass  # deleted
            case p if p < 0.35:
                out += [w, r.choice(vocabulary)]  # a word inserted after it
            case _:
                out.append(w)
    return out


def test_rate_matches_jiwer_on_random_pairs():
    jiwer = pytest.importorskip("jiwer")
    r = random.Random(0)
    vocabulary = "the a cat Cat's dog sat on mat, don't well-known U.S. über naïve THE of".split()
    hypotheses, references = [], []
    for _ in range(500):
        reference = r.choices(vocabulary, k=r.randint(1, 20))
        hypotheses.append(" ".join(_edited(reference, vocabulary, r)))
        references.append(" ".join(reference))
    hyps = [normalize_transcript(h) for h in hypotheses]
    refs = [normalize_transcript(t) for t in references]
    for hyp, ref, hypothesis, reference in zip(hyps, refs, hypotheses, references, strict=True):
        expected = jiwer.process_words(ref, hyp)  # jiwer takes (reference, hypothesis)
        s, d, i, n = word_errors(hypothesis, reference)
        assert (s + d + i, n) == (
            expected.substitutions + expected.deletions + expected.insertions,
            len(ref.split()),
        )
        # both alignments have the fewest edits; of those, ours has the fewest substitutions
        # (jiwer's backtrace breaks ties its own way)
        assert s <= expected.substitutions
    assert wer(hypotheses, references) == pytest.approx(100 * jiwer.wer(refs, hyps), abs=1e-9)
    assert wer(hypotheses[:1], references[:1]) == pytest.approx(
        100 * jiwer.wer(refs[0], hyps[0]), abs=1e-9
    )
