"""One decoder layer's KV cache: self-attention keys/values in preallocated storage that grows by
doubling, and the fixed cross-attention keys/values (see cache.py for the layouts, flat and
prefix tree, that KVCache keeps across the layers).

Legend (model/__init__.py): B rows, K key/value heads, S cached positions (or cells), D head dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MIN_CAPACITY = 16


@dataclass
class LayerCache:
    """Cached keys/values of one decoder layer: self-attention grows, cross-attention is fixed.

    Self-attention keys/values live in preallocated storage (rows, K, capacity, D) that grows
    by doubling: a step writes its new positions (or cells) in place instead of concatenating
    the whole cache again, and `self_kv` holds views of the filled part. Copies (flat beam
    reorders, compactions) go into a second set of buffers, and the first is kept as the spare
    for the next one, so steady-state decoding allocates nothing (fresh multi-megabyte buffers
    cost page faults). Cross-attention keys/values are kept once per source (see
    KVCache.group_size).
    """

    self_kv: tuple[torch.Tensor, torch.Tensor] | None = None  # (B or N, K, S, D) each
    cross_kv: tuple[torch.Tensor, torch.Tensor] | None = None  # (B_src, K, S_src, D) each
    buffers: tuple[torch.Tensor, torch.Tensor] | None = (
        None  # (rows_max, K, capacity, D); self_kv = buffers[:rows, :, :S]
    )
    spare: tuple[torch.Tensor, torch.Tensor] | None = (
        None  # (rows_max, K, capacity, D) each: free for the next copy
    )

    def in_buffers(self) -> bool:
        """Whether self_kv is a view of the in-place storage (inference), not a tensor autograd
        saved."""
        return (
            self.buffers is not None
            and self.self_kv is not None
            and self.self_kv[0].data_ptr() == self.buffers[0].data_ptr()
        )

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add new self-attention keys/values (rows, K, T, D); return all of them
        (rows, K, S_past + T, D)."""
        if k.requires_grad or v.requires_grad:  # autograd: no in-place writes into tensors it saved
            if self.self_kv is not None:
                k = torch.cat([self.self_kv[0], k], dim=2)
                v = torch.cat([self.self_kv[1], v], dim=2)
            self.self_kv, self.buffers, self.spare = (k, v), None, None
            return self.self_kv
        rows, past = k.shape[0], 0 if self.self_kv is None else self.self_kv[0].shape[2]
        total = past + k.shape[2]
        usable = (
            past > 0
            and self.in_buffers()
            and self.buffers[0].shape[2] >= total
            and self.buffers[0].dtype == k.dtype
        )
        if not usable:
            ks, vs = (
                x.new_empty(rows, x.shape[1], max(MIN_CAPACITY, 2 * total), x.shape[3])
                for x in (k, v)
            )
            if past:
                ks[:, :, :past] = self.self_kv[0]
                vs[:, :, :past] = self.self_kv[1]
            self.buffers, self.spare = (ks, vs), None
        ks, vs = (
            self.buffers[0][:rows],
            self.buffers[1][:rows],
        )  # leading rows of contiguous buffers
        ks[:, :, past:total] = k
        vs[:, :, past:total] = v
        self.self_kv = (ks[:, :, :total], vs[:, :, :total])
        return self.self_kv

    def _target(self, rows: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Buffers with room for (rows, K, length, D): the spare set when it fits, else new ones."""
        spare, like = self.spare, self.self_kv[0]
        if (
            spare is None
            or spare[0].shape[0] < rows
            or spare[0].shape[2] < length
            or spare[0].shape[1] != like.shape[1]
            or spare[0].dtype != like.dtype
        ):
            capacity = max(
                MIN_CAPACITY, 2 * length, 0 if self.buffers is None else self.buffers[0].shape[2]
            )
            spare = tuple(
                kv.new_empty(rows, kv.shape[1], capacity, kv.shape[3]) for kv in self.self_kv
            )
        return spare

    def _swap_in(self, target: tuple[torch.Tensor, torch.Tensor], rows: int, length: int) -> None:
        self.spare, self.buffers = self.buffers, (target[0], target[1])
        self.self_kv = (target[0][:rows, :, :length], target[1][:rows, :, :length])

    def reorder_self(self, index: torch.Tensor) -> None:
        """Keep/reorder/repeat whole rows: index (B',) of current rows."""
        if self.self_kv is None:
            return
        if not self.in_buffers() or self.self_kv[0].requires_grad:
            self.self_kv = (
                self.self_kv[0].index_select(0, index),
                self.self_kv[1].index_select(0, index),
            )
            self.buffers = self.spare = None
            return
        filled, rows = self.self_kv[0].shape[2], len(index)
        target = self._target(rows, filled)
        for full, out in zip(self.self_kv, target, strict=True):
            torch.index_select(
                full, 0, index, out=out[:rows, :, :filled]
            )  # copies the filled part only
        self._swap_in(target, rows, filled)

    def gather_self(self, rows: torch.Tensor, positions: torch.Tensor) -> None:
        """New rows r' made of chosen entries: entry j of r' is old row rows[r', j], position
        positions[r', j].

        rows, positions (B', S'). Builds prefix-tree cells from flat rows, compacts cells, and
        turns cells back into flat rows.
        """
        n, length = rows.shape
        target = self._target(n, length)
        heads = torch.arange(self.self_kv[0].shape[1], device=rows.device)[
            None, :, None
        ]  # (1, K, 1)
        for full, out in zip(self.self_kv, target, strict=True):
            out[:n, :, :length] = full[
                rows[:, None, :], heads, positions[:, None, :]
            ]  # (B', K, S', D)
        self._swap_in(target, n, length)

    def join_self(self, other: LayerCache, length: int, left: bool) -> None:
        """Append other's self-attention rows after these, both padded to `length` positions (on the
        left for flat rows, on the right for tree cells), in fresh buffers with room to grow."""
        a, b = self.self_kv, other.self_kv
        rows = a[0].shape[0] + b[0].shape[0]
        buffers = tuple(
            x.new_zeros(rows, x.shape[1], max(MIN_CAPACITY, 2 * length), x.shape[3]) for x in a
        )
        for full, mine, theirs in zip(buffers, a, b, strict=True):
            for start, part in ((0, mine), (mine.shape[0], theirs)):
                n, filled = part.shape[0], part.shape[2]
                cols = slice(length - filled, length) if left else slice(0, filled)
                full[start : start + n, :, cols] = part
        self.buffers, self.spare = buffers, None
        self.self_kv = (buffers[0][:, :, :length], buffers[1][:, :, :length])


def pad_dim(t: torch.Tensor, dim: int, size: int, left: bool = False) -> torch.Tensor:
    """t padded with zeros (False) along dim to size."""
    missing = size - t.shape[dim]
    if missing == 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    pad = t.new_zeros(shape)
    return torch.cat([pad, t] if left else [t, pad], dim=dim)
