"""What every objective shares (training/objectives/base.py): the batch cache that makes a batch
drawn at random once per step."""

from __future__ import annotations

from transformer.data.batching import batch_seed
from transformer.training.objectives.base import BatchCache


def test_batch_cache_makes_each_batch_once_and_empties_when_full():
    made = []

    def make(key):
        return lambda: made.append(key) or f"batch {key}"

    cache = BatchCache(limit=2)
    assert cache.get((0, 0), make((0, 0))) == cache.get((0, 0), make((0, 0))) == "batch (0, 0)"
    assert made == [(0, 0)]
    for k in (1, 2, 3):
        cache.get((0, k), make((0, k)))
    assert len(cache.batches) <= 3 and (0, 3) in cache.batches  # emptied once past the limit
    assert cache.get((0, 0), make((0, 0))) == "batch (0, 0)" and made.count((0, 0)) == 2


def test_batch_seed_is_the_epoch_seed_mixed_with_the_batch_number():
    assert batch_seed(1, 2) == 1 * 1_000_003 + 2
    assert batch_seed(1, 2, 3) == (1 * 1_000_003 + 2) * 1_000_003 + 3
    assert len({batch_seed(s, e, b) for s in range(3) for e in range(3) for b in range(3)}) == 27
