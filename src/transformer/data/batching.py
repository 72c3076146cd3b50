"""Batches by token count, grouped by length, shuffled per epoch from a seed (§5.1).

The paper batches "sentence pairs together by approximate sequence length", about 25,000
source and 25,000 target tokens per batch. Here a batch holds as many examples as fit in
`batch_tokens` padded tokens (rows x longest row), so padding stays small.

Conventions (B batch, S source length, T target length):
- source ids are the tokenizer's ids, no special tokens added;
- decoder input  = [start_id] + y   (teacher forcing, shifted right, §3.1)
- decoder output = y + [eos_id]     (what the loss compares against)
A language model (decoder-only) example has no source: input [bos] + y, output y + [eos].
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .tokenizer import Tokenizer


@dataclass
class Example:
    """One training example as token ids (no specials): source (None for a language model) and
    target."""

    src: list[int] | None
    tgt: list[int]
    line: int = -1
    """0-based line of the text it came from (-1: not from a file)."""

    @property
    def size(self) -> int:
        """Longest padded row this example needs (target side counts its extra <s>/</s>)."""
        return max(len(self.src) if self.src is not None else 0, len(self.tgt) + 1)


def encode_examples(
    targets: list[str],
    tgt_tok: Tokenizer,
    max_len: int,
    sources: list[str] | None = None,
    src_tok: Tokenizer | None = None,
) -> tuple[list[Example], int]:
    """Tokenize texts; drop examples longer than max_len tokens (a side plus its <s>/</s>). Returns
    (examples, dropped)."""
    tgt_ids = tgt_tok.encode_batch(targets)
    src_ids = src_tok.encode_batch(sources) if sources is not None else [None] * len(tgt_ids)
    examples, dropped = [], 0
    for line, (s, t) in enumerate(zip(src_ids, tgt_ids, strict=True)):
        ex = Example(s, t, line)
        if ex.size > max_len or not t or (s is not None and not s):
            dropped += 1
        else:
            examples.append(ex)
    return examples, dropped


def batch_seed(seed: int, epoch: int, batch: int | None = None) -> int:
    """The seed of what is drawn for an epoch (the order of its batches) or, given `batch`, for one
    batch of it (masking, corruption, augmentation): a pure function of (seed, epoch, batch), so a
    resumed run draws what the uninterrupted one did."""
    mixed = seed * 1_000_003 + epoch
    return mixed if batch is None else mixed * 1_000_003 + batch


def fixed_size_batches(n: int, per_batch: int, seed: int, epoch: int) -> list[list[int]]:
    """An epoch's batches of per_batch examples each out of n, in an order drawn from
    batch_seed(seed, epoch); whole batches only (the rest waits for another epoch's order): how
    images, which all cost the same, are batched."""
    g = torch.Generator().manual_seed(batch_seed(seed, epoch))
    order = torch.randperm(n, generator=g)
    return [order[k * per_batch : (k + 1) * per_batch].tolist() for k in range(n // per_batch)]


def batch_indices(sizes, batch_tokens: int, seed: int, epoch: int, shuffle: bool = True):
    """Group example indices by length into batches of at most batch_tokens padded tokens.

    sizes: each example's padded row (a list or an array). With shuffle, equal-length examples
    are mixed and batch order is permuted, both from (seed, epoch): the same arguments always
    give the same batches (exact resume relies on it). Returns a sequence of lists of indices
    (Batches: two arrays, so 4.5M examples cost 36 MB, not a list per batch).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    n = len(sizes)
    if shuffle:
        g = torch.Generator().manual_seed(batch_seed(seed, epoch))
        order = torch.randperm(n, generator=g).numpy()
    else:
        order = np.arange(n)
    order = order[np.argsort(sizes[order], kind="stable")]  # stable: ties keep the random order
    starts = batch_bounds(sizes[order], batch_tokens)
    perm = torch.randperm(len(starts) - 1, generator=g).numpy() if shuffle else None
    return Batches(order, starts, perm)


def padding_share(
    batches: Sequence[list[int]], tgt_lengths: np.ndarray, src_lengths: np.ndarray | None = None
) -> float:
    """Share of padded positions among all positions of these batches: target rows (each target
    plus its <s>/</s>) and, when given, source rows."""
    real = padded = 0
    for side in (tgt_lengths + 1, src_lengths):
        if side is None:
            continue
        for batch in batches:
            lengths = side[batch]
            real += int(lengths.sum())
            padded += int(lengths.max()) * len(batch)
    return 1.0 - real / padded if padded else 0.0


class Batches(Sequence):
    """An epoch's batches as one permutation of the examples and the bounds of each batch in it:
    batches[k] is a list of example indices; slices give lists of those."""

    def __init__(self, order: np.ndarray, starts: np.ndarray, perm: np.ndarray | None = None):
        self.order, self.starts = order, starts  # starts: (n_batches + 1,) positions in order
        self.perm = perm if perm is not None else np.arange(len(starts) - 1)

    def __len__(self) -> int:
        return len(self.perm)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        b = int(self.perm[k])
        return self.order[self.starts[b] : self.starts[b + 1]].tolist()

    def __eq__(self, other) -> bool:
        return list(self) == list(other)


def batch_bounds(sorted_sizes: np.ndarray, batch_tokens: int) -> np.ndarray:
    """Greedy batches over examples sorted by size: each takes examples while rows x longest row
    stays within batch_tokens (at least one example). Returns the start of each batch and the end.

    With sizes sorted, the longest row of a batch from a to j is sizes[j], and sizes[j] * (j - a +
    1) grows with j, so each batch's end is found by binary search."""
    n = len(sorted_sizes)
    starts = [0]
    a = 0
    while a < n:
        lo, hi = a + 1, n  # the batch is [a, end); end in [a + 1, n]
        while lo < hi:  # the largest end with sizes[end - 1] * (end - a) <= batch_tokens
            mid = (lo + hi + 1) // 2
            if int(sorted_sizes[mid - 1]) * (mid - a) <= batch_tokens:
                lo = mid
            else:
                hi = mid - 1
        a = lo
        starts.append(a)
    return np.asarray(starts, dtype=np.int64)


@dataclass
class Batch:
    """Padded tensors for one batch; masks are True at real tokens."""

    src: torch.Tensor | None  # (B, S) source ids, or None for a language model
    src_mask: torch.Tensor | None  # (B, S)
    tgt_in: torch.Tensor  # (B, T) decoder input: [start] + y
    tgt_out: torch.Tensor  # (B, T) expected output: y + [eos], pad_id where padded
    n_tokens: int  # real target tokens (the loss's normaliser)

    def to(self, device: torch.device | str) -> Batch:
        move = lambda t: to_device(t, device) if t is not None else None
        return Batch(
            move(self.src),
            move(self.src_mask),
            move(self.tgt_in),
            move(self.tgt_out),
            self.n_tokens,
        )


def to_device(t: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """A batch's tensor on `device`; to a GPU through pinned memory, so that the copy is queued
    behind the work already on the GPU instead of making the CPU wait for it."""
    if torch.device(device).type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """(B, L) right-padded ids, filled in one assignment: a copy per row costs a GPU-fed loop
    ~1,200 tensor copies for the paper's 25k-token batches, milliseconds while the GPU waits."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    out = np.full((len(rows), int(lengths.max())), pad_id, dtype=np.int64)
    total = int(lengths.sum())
    if total:
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=total)
        out[np.arange(out.shape[1])[None, :] < lengths[:, None]] = flat  # row after row
    return torch.from_numpy(out)


def pad_rows(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad rows of ids: (ids, mask), both (B, L), mask True at real tokens."""
    ids = _pad(rows, pad_id)
    lengths = torch.tensor([len(r) for r in rows])
    return ids, torch.arange(ids.size(1))[None, :] < lengths[:, None]


def collate(examples: list[Example], pad_id: int, start_id: int, eos_id: int) -> Batch:
    """Right-pad a list of examples into a Batch with shifted targets (see the module doc)."""
    tgt_in = _pad([[start_id] + e.tgt for e in examples], pad_id)  # (B, T)
    tgt_out = _pad([e.tgt + [eos_id] for e in examples], pad_id)  # (B, T)
    n_tokens = sum(len(e.tgt) + 1 for e in examples)
    if examples[0].src is None:
        return Batch(None, None, tgt_in, tgt_out, n_tokens)
    src, src_mask = pad_rows([e.src for e in examples], pad_id)  # (B, S) each
    return Batch(src, src_mask, tgt_in, tgt_out, n_tokens)
