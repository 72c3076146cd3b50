"""Several prepared corpora mixed by weight (data.text.train_weights): each epoch draws every
source's examples its weight's times (a fraction: a seeded share of them), laid end to end and read
as one corpus (CorpusView)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .corpus import Corpus


class CorpusView(Sequence):
    """Rows of several prepared corpora, chosen by an index: what one epoch of a mixture reads.

    Arrays as Corpus's (tgt_lengths, src_lengths, sizes, lines), for the chosen rows in order."""

    def __init__(self, parts: Sequence[Corpus], index: np.ndarray):
        self.parts = parts
        self.starts = np.cumsum([0] + [len(p) for p in parts])
        self.index = index
        """Rows into the parts laid end to end (part k's row r is starts[k] + r)."""
        joined = {
            name: np.concatenate([getattr(p, name) for p in parts])
            for name in ("tgt_lengths", "sizes", "lines")
        }
        self.tgt_lengths = joined["tgt_lengths"][index]
        self.sizes = joined["sizes"][index]
        self.lines = joined["lines"][index]
        self.src_lengths = (
            None
            if parts[0].src_lengths is None
            else np.concatenate([p.src_lengths for p in parts])[index]
        )

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        row = int(self.index[i])
        k = int(np.searchsorted(self.starts, row, side="right")) - 1
        return self.parts[k][row - int(self.starts[k])]

    @property
    def dropped(self) -> dict[str, int]:
        return {key: sum(p.dropped[key] for p in self.parts) for key in self.parts[0].dropped}


class Mixture:
    """Several prepared corpora sampled by weight: an epoch holds weight x each part's examples
    (each row `floor(weight)` times, plus a random `frac(weight)` share of its rows drawn anew each
    epoch), a pure function of (seed, epoch): a resumed run reads the epochs it would have read."""

    def __init__(self, parts: Sequence[Corpus], weights: Sequence[float], seed: int):
        if len(parts) != len(weights):
            raise ValueError(f"{len(parts)} corpora but {len(weights)} weights")
        self.parts, self.weights, self.seed = list(parts), [float(w) for w in weights], seed
        self._cached: tuple[int, CorpusView] | None = None

    def counts(self) -> list[int]:
        """Examples each part gives an epoch."""
        counts = []
        for part, weight in zip(self.parts, self.weights, strict=True):
            whole, share = _whole_and_share(len(part), weight)
            counts.append(whole * len(part) + share)
        return counts

    def epoch(self, epoch: int) -> CorpusView:
        if self._cached is None or self._cached[0] != epoch:
            chosen, start = [], 0
            for k, (part, weight) in enumerate(zip(self.parts, self.weights, strict=True)):
                n = len(part)
                whole, share = _whole_and_share(n, weight)
                rows = [np.tile(np.arange(n, dtype=np.int64), whole)]
                if share:
                    rng = np.random.default_rng([self.seed, epoch, k])
                    rows.append(np.sort(rng.choice(n, size=share, replace=False)))
                chosen.append(np.concatenate(rows) + start)
                start += n
            self._cached = (epoch, CorpusView(self.parts, np.concatenate(chosen)))
        return self._cached[1]


def _whole_and_share(n: int, weight: float) -> tuple[int, int]:
    """(times every row is taken, rows taken once more at random) for n rows at this weight."""
    whole = int(weight)
    return whole, min(n, round((weight - whole) * n))
