"""The verse-level alignment check (transformer.data.sources.bible.verse_align): shifted numbering and mismatched
verses are dropped, aligned chapters kept whole, and the dynamic programme finds the cheapest path."""

import random

import pytest

from transformer.data.sources.bible import align, misalignment
from transformer.data.sources.bible.verse_align import (
    MAX_OFFSET,
    MISMATCH_COST,
    SHIFT_COST,
    LengthModel,
    aligned_verses,
    best_path,
    fit_length_model,
)


def _chapter(rng, n, ratio=1.1, noise=0.15):
    """n verse pairs of varied length: the target ratio x as long as the source, +-noise."""
    pairs = []
    for _ in range(n):
        a = rng.randint(25, 250)
        b = max(5, round(a * ratio * (1 + rng.uniform(-noise, noise))))
        pairs.append(("s" * a, "t" * b))
    return pairs


def _shifted(pairs, split, merge):
    """The target splits verse `split` in two and joins verses `merge` and `merge + 1`: every
    target verse in between holds the source's verse before (0-based indices)."""
    targets = [b for _, b in pairs]
    half = len(targets[split]) // 2
    shifted = targets[:split] + ["t" * half, "t" * (len(targets[split]) - half)] + targets[split + 1:merge]
    shifted += [targets[merge] + " " + targets[merge + 1]] + targets[merge + 2:]
    assert len(shifted) == len(pairs)
    return [(a, b) for (a, _), b in zip(pairs, shifted, strict=True)]


MODEL = LengthModel(ratio=1.1, variance=2.0)


def test_aligned_chapters_are_kept_whole():
    rng = random.Random(0)
    chapters = [_chapter(rng, rng.randint(5, 60)) for _ in range(200)]
    model = fit_length_model([pair for chapter in chapters for pair in chapter])
    dropped = sum(not kept for chapter in chapters for kept in aligned_verses(chapter, model))
    assert dropped == 0


def test_a_numbering_shifted_mid_chapter_drops_the_shifted_verses_only():
    rng = random.Random(1)
    for _ in range(20):
        pairs = _shifted(_chapter(rng, 30), split=14, merge=24)
        keep = aligned_verses(pairs, MODEL)
        # target verses 15 and 16 hold source verse 15's halves, target 17-25 sources 16-24, target
        # 26 sources 25 and 26 together: verses 15-26 do not translate each other
        assert keep == [True] * 14 + [False] * 12 + [True] * 4


def test_a_shift_that_runs_to_the_chapter_end():
    rng = random.Random(2)
    pairs = _chapter(rng, 20)
    targets = [b for _, b in pairs]
    # the target's verse 12 is the source's 12 and 13 together; the target's last verse is a
    # half of the source's last: verses 12-20 are shifted by one
    tail = targets[:11] + [targets[11] + " " + targets[12]] + targets[13:] + ["t" * 40]
    keep = aligned_verses([(a, b) for (a, _), b in zip(pairs, tail, strict=True)], MODEL)
    assert keep == [True] * 11 + [False] * 9


def test_a_verse_with_a_clause_the_other_lacks_is_dropped_alone():
    rng = random.Random(3)
    pairs = _chapter(rng, 12, noise=0.05)
    a, b = pairs[6]
    pairs[6] = (a + " " + "s" * 3 * len(a), b)  # a subscription, a clause of the verse before
    keep = aligned_verses(pairs, MODEL)
    assert keep == [True] * 6 + [False] + [True] * 5


def test_short_verses_may_differ_more_than_long_ones():
    # "No matarás." against "“You shall not murder.": twice as long, and a translation
    assert MODEL.cost(11, 22) < MISMATCH_COST
    assert MODEL.cost(200, 400) > MISMATCH_COST


def test_the_length_model_is_robust_to_a_misaligned_minority():
    rng = random.Random(4)
    good = [pair for _ in range(50) for pair in _chapter(rng, 20, ratio=1.2, noise=0.1)]
    bad = [(a, "t" * rng.randint(5, 400)) for a, _ in good[:50]]  # 5% unrelated pairs
    clean, dirty = fit_length_model(good), fit_length_model(good[50:] + bad)
    assert clean.ratio == pytest.approx(1.2, abs=0.02)
    assert dirty.variance < 1.5 * clean.variance
    assert fit_length_model([("same", "same")] * 10).variance > 0  # identical lengths stay finite


def _brute_force(pairs, model):
    """The cheapest path by enumerating every bead sequence within MAX_OFFSET of the diagonal."""
    n = len(pairs)
    src = [len(a) for a, _ in pairs]
    tgt = [len(b) for _, b in pairs]

    def paths(i, j):
        if (i, j) == (n, n):
            yield 0.0
            return
        steps = []
        if i < n and j < n:
            steps.append((1, 1, min(model.cost(src[i], tgt[j]), MISMATCH_COST)))
        if i + 1 < n and j < n:
            steps.append((2, 1, model.cost(src[i] + src[i + 1], tgt[j]) + SHIFT_COST))
        if i < n and j + 1 < n:
            steps.append((1, 2, model.cost(src[i], tgt[j] + tgt[j + 1]) + SHIFT_COST))
        steps += [(1, 0, SHIFT_COST)] * (i < n) + [(0, 1, SHIFT_COST)] * (j < n)
        for di, dj, cost in steps:
            if abs(i + di - j - dj) <= MAX_OFFSET and i + di <= n and j + dj <= n:
                yield from (cost + rest for rest in paths(i + di, j + dj))

    return min(paths(0, 0))


@pytest.mark.parametrize("seed", range(6))
def test_the_dynamic_programme_finds_the_cheapest_path(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 5)
    pairs = [("s" * rng.randint(1, 120), "t" * rng.randint(1, 120)) for _ in range(n)]
    cost, beads = best_path(pairs, MODEL)
    assert cost == pytest.approx(_brute_force(pairs, MODEL))
    # the beads cover both texts once, in order
    assert [i for i, _, di, _, _ in beads for i in range(i, i + di)] == list(range(n))
    assert [j for _, j, _, dj, _ in beads for j in range(j, j + dj)] == list(range(n))
    assert all(i == j and di == dj == 1 for i, j, di, dj, kept in beads if kept)  # kept: verse k against verse k


def test_align_drops_the_misaligned_verses_and_keeps_the_rest_of_the_chapter():
    rng = random.Random(5)
    chapters = {c: _chapter(rng, 30, ratio=1.0) for c in range(1, 11)}
    chapters[3] = _shifted(chapters[3], split=21, merge=25)
    assert misalignment(chapters[3]) is None  # a short shift: the chapter checks keep the chapter
    src = {("Gen", c, v): a for c, pairs in chapters.items() for v, (a, _) in enumerate(pairs, start=1)}
    tgt = {("Gen", c, v): b for c, pairs in chapters.items() for v, (_, b) in enumerate(pairs, start=1)}
    result = align(src, tgt)
    assert not result.dropped_chapters
    assert result.misaligned_verses == [("Gen", 3, v) for v in range(22, 28)]
    assert len(result.pairs) == 300 - 6
    assert ("Gen", 3, 21) in result.pairs and ("Gen", 3, 28) in result.pairs
    assert not set(result.misaligned_verses) & set(result.pairs)

