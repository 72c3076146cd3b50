"""Validation during training (training/validation.py): the fixed BLEU sample."""

from __future__ import annotations

from itertools import pairwise

from transformer.training.validation import bleu_sample


def test_bleu_sample_is_fixed_and_evenly_spread():
    assert bleu_sample(10, 4) == [0, 2, 5, 7]
    assert bleu_sample(3, 200) == [0, 1, 2] and bleu_sample(5, 5) == [0, 1, 2, 3, 4]  # all, when no more than asked
    assert bleu_sample(1000, 200) == list(range(0, 1000, 5))
    for n_valid, n in ((1000, 300), (997, 200), (201, 200), (7, 3)):
        sample = bleu_sample(n_valid, n)
        gaps = [b - a for a, b in pairwise(sample)]
        assert len(sample) == n and sample[0] == 0 and sample[-1] < n_valid, (n_valid, n)
        assert min(gaps) >= 1 and max(gaps) - min(gaps) <= 1, (n_valid, n, sorted(set(gaps)))  # sorted, evenly spread
        step = -(-n_valid // n)  # ceil(n_valid / n): no gap, nor the tail after the last index, is wider
        assert max(gaps) <= step and n_valid - sample[-1] <= step, (n_valid, n)
