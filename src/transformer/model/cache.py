"""The KV cache of incremental decoding, and the prefix tree that beam search keeps in it.

Legend (model/__init__.py): B rows (sentences or beam rows), N sentences, G beams per sentence
(B = N * G), K key/value heads, S cached positions (or cells), D head dim; B', S' after a
reorder or gather.

Flat layout: each row keeps its own keys/values (B, K, S, D). Greedy search and sampling use
it, and so does beam search when attention weights are requested.

Prefix tree (beam search): the G beams of a sentence share their common history. Each step
appends one *cell* per beam (its new key/value) to the sentence's cells (N, K, S, D), and a
boolean `ancestors` (N, G, S) says which cells lie on each beam's path (its ancestors and
itself). A beam step that moves beams to their parents only reorders `ancestors`; no key or
value is copied. Attention is then one (G, S) block per sentence and head, masked by
`ancestors`: the G queries of a sentence read its cells once. Cells on no live beam's path are
dropped by an occasional compaction; because beams soon share most of their history, a
sentence holds far fewer cells than G * steps (docs/benchmarks/decoding.md). The flat layout copied
every row's whole history on every beam step instead.

One layer's storage (LayerCache: preallocated, growing by doubling) is layer_cache.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .layer_cache import MIN_CAPACITY, LayerCache, pad_dim

__all__ = ["MIN_CAPACITY", "KVCache", "LayerCache"]


def _join_masks(a: KVCache, b: KVCache) -> torch.Tensor | None:
    """The joined source mask (B_src + B_src', S) of two caches; None when neither source is padded
    and they are as long (or the model has no source)."""
    if a.layers[0].cross_kv is None:
        return None
    shapes = [c.layers[0].cross_kv[0].shape for c in (a, b)]
    if a.memory_mask is None and b.memory_mask is None and shapes[0][2] == shapes[1][2]:
        return None
    width = max(shape[2] for shape in shapes)
    masks = [
        torch.ones(shape[0], shape[2], dtype=torch.bool, device=c.positions.device)
        if c.memory_mask is None
        else c.memory_mask
        for c, shape in zip((a, b), shapes, strict=True)
    ]
    return torch.cat([pad_dim(m, 1, width) for m in masks])


@dataclass
class KVCache:
    """State for incremental decoding: one new position per step costs one new position of work.

    key_mask marks the real tokens among the cached self-attention keys (None = all real);
    memory_mask is the source mask for cross-attention; positions holds each row's next
    absolute position (rows of a left-padded batch count from their first real token).
    Rows come in consecutive groups of `group_size` rows that read the same source (the beams
    of one sentence): cross-attention keys/values and memory_mask are kept once per group.
    With `ancestors` set, self-attention keys/values are a prefix tree per group (the module
    docstring); `share_prefixes` lets a grouping reorder build one.
    """

    layers: list[LayerCache]
    length: int = 0
    key_mask: torch.Tensor | None = None  # (B, S)
    memory_mask: torch.Tensor | None = None  # (B_src, S_src)
    positions: torch.Tensor | None = None  # (B,)
    group_size: int = 1
    ancestors: torch.Tensor | None = None  # (N, G, S) bool: the cells on each beam's path
    share_prefixes: bool = True

    @classmethod
    def empty(cls, n_layers: int) -> KVCache:
        return cls(layers=[LayerCache() for _ in range(n_layers)])

    @property
    def tree_group(self) -> int:
        """G when self-attention is a prefix tree (one query block of G beams per sentence), else
        1."""
        return 1 if self.ancestors is None else self.group_size

    def reorder(
        self,
        index: torch.Tensor,
        group_size: int | None = None,
        sources: torch.Tensor | None = None,
    ) -> None:
        """Keep/reorder/repeat batch rows: beam search reorders, finished sentences are dropped.

        index (B',) picks the new rows from the current ones. Without group_size every row may
        come from anywhere, and cross-attention state follows its row. With group_size the new
        rows are len(sources) consecutive groups of group_size rows, group j reading current
        source sources[j] (None = every current source, in order): cross-attention state is
        then selected per source, not copied per row, and self-attention becomes (or stays) a
        prefix tree. The caller guarantees that every row of group j comes from a row that
        read source sources[j].
        """

        def pick(t, i):
            return None if t is None else t.index_select(0, i)

        n_sources = self._n_sources() if sources is None else len(sources)
        if group_size is not None and index.numel() != n_sources * group_size:
            raise ValueError(f"{index.numel()} rows cannot form {n_sources} groups of {group_size}")
        tree = (
            group_size is not None
            and group_size > 1
            and self.share_prefixes
            and all(layer.self_kv is None or layer.in_buffers() for layer in self.layers)
            and any(layer.self_kv is not None for layer in self.layers)
        )
        if self.ancestors is not None and tree and group_size == self.group_size:
            self._reorder_tree(index, group_size, sources)
        else:
            if self.ancestors is not None:
                self.flatten()
            if tree:
                self._build_tree(index, group_size)
            else:
                for layer in self.layers:
                    layer.reorder_self(index)
                self.key_mask = pick(self.key_mask, index)
        self.positions = pick(self.positions, index)
        if group_size is None:
            if self.group_size > 1:  # back to one source per row: row r reads r // group_size
                index = torch.div(index, self.group_size, rounding_mode="floor")
            for layer in self.layers:
                if layer.cross_kv is not None:
                    layer.cross_kv = (
                        pick(layer.cross_kv[0], index),
                        pick(layer.cross_kv[1], index),
                    )
            self.memory_mask = pick(self.memory_mask, index)
            self.group_size = 1
            return
        if sources is not None:
            for layer in self.layers:
                if layer.cross_kv is not None:
                    layer.cross_kv = (
                        pick(layer.cross_kv[0], sources),
                        pick(layer.cross_kv[1], sources),
                    )
            self.memory_mask = pick(self.memory_mask, sources)
        self.group_size = group_size

    def extend(self, other: KVCache) -> None:
        """Append the rows of `other` after this cache's rows (continuous batching: requests that
        join a running batch). Both caches are flat or both are prefix trees, with the same
        group_size. The shorter self-attention history is padded on the left (flat: key_mask marks
        the padding) or its cells on the right (tree: no beam's path holds them); the shorter source
        is padded on the right (memory_mask). Each row keeps its own positions, so what it computes
        is what it computed alone, up to the padding it never attends to."""
        if (self.ancestors is None) != (other.ancestors is None) or (
            self.group_size != other.group_size
        ):
            raise ValueError(
                "KVCache.extend joins caches of one layout: both flat or both prefix trees of the "
                f"same group size (here {self.group_size} and {other.group_size})"
            )
        tree = self.ancestors is not None
        length = max(self.length, other.length)
        memory_mask = _join_masks(self, other)  # before the layers' cross keys are joined
        for mine, theirs in zip(self.layers, other.layers, strict=True):
            mine.join_self(theirs, length, left=not tree)
            if mine.cross_kv is not None:
                width = max(mine.cross_kv[0].shape[2], theirs.cross_kv[0].shape[2])
                mine.cross_kv = tuple(
                    torch.cat([pad_dim(a, 2, width), pad_dim(b, 2, width)])
                    for a, b in zip(mine.cross_kv, theirs.cross_kv, strict=True)
                )
        if tree:
            self.ancestors = torch.cat(
                [pad_dim(self.ancestors, 2, length), pad_dim(other.ancestors, 2, length)]
            )
        elif self.key_mask is not None or other.key_mask is not None or self.length != other.length:
            self.key_mask = torch.cat(
                [self._keys_real(length), other._keys_real(length)]
            )  # (B + B', S)
        self.memory_mask = memory_mask
        self.positions = torch.cat([self.positions, other.positions])
        self.length = length

    def _keys_real(self, length: int) -> torch.Tensor:
        """(B, length) bool: which cached self-attention keys are real, left-padded to length."""
        rows = len(self.positions)
        real = (
            torch.ones(rows, self.length, dtype=torch.bool, device=self.positions.device)
            if self.key_mask is None
            else self.key_mask
        )
        return pad_dim(real, 1, length, left=True)

    def _n_sources(self) -> int:
        for layer in self.layers:
            if layer.cross_kv is not None:
                return layer.cross_kv[0].shape[0]
        if self.memory_mask is not None:
            return self.memory_mask.shape[0]
        if self.positions is not None:
            return len(self.positions) // self.group_size
        rows = next(
            (layer.self_kv[0].shape[0] for layer in self.layers if layer.self_kv is not None), 0
        )
        return rows // self.group_size

    # ----------------------------------------------------------------------------------------
    # The prefix tree

    def _keep_cells(
        self, keep: torch.Tensor, rows: torch.Tensor, cells: torch.Tensor
    ) -> torch.Tensor:
        """Rebuild the storage: new row r holds the entries s where keep[r, s], in order, padded to
        the longest row.

        keep, rows, cells (R, S): entry s of new row r would be old row rows[r, s], position (or
        cell) cells[r, s]. Returns the kept entries' s (R, S'); padding repeats kept or dropped
        entries (real values, never read: callers mask them).
        """
        width = int(keep.sum(dim=1).max())
        order = (
            (~keep).to(torch.int8).argsort(dim=1, stable=True)[:, :width]
        )  # kept entries first, in order
        for layer in self.layers:
            if layer.self_kv is not None:
                layer.gather_self(rows.gather(1, order), cells.gather(1, order))
        self.length = width
        return order

    def _build_tree(self, index: torch.Tensor, g: int) -> None:
        """Flat rows -> one tree per group of g new rows; row index[n * g + j] becomes beam j of
        sentence n."""
        rows = index.view(-1, g)  # (N, G): each beam's old row
        n = rows.shape[0]
        length = next(
            layer.self_kv[0].shape[2] for layer in self.layers if layer.self_kv is not None
        )
        # Beams taken from the same old row share its cells: each beam's path is the cells of the
        # first beam of its sentence that came from the same row; the others' cells are dropped.
        first = (rows[:, :, None] == rows[:, None, :]).int().argmax(dim=2)  # (N, G)
        owner = (
            torch.arange(g, device=index.device)[None, None, :] == first[:, :, None]
        )  # (N, G, G): beam j uses block g
        real = (
            torch.ones(n, g, length, dtype=torch.bool, device=index.device)
            if self.key_mask is None
            else self.key_mask.index_select(0, index).view(n, g, length)
        )  # (N, G, S) padding stays out
        ancestors = (owner[:, :, :, None] & real[:, None, :, :]).reshape(
            n, g, g * length
        )  # (N, G, G * S)
        cell_rows = (
            rows[:, :, None].expand(n, g, length).reshape(n, g * length)
        )  # block g, position t
        cell_pos = torch.arange(length, device=index.device).repeat(g)[None].expand(n, g * length)
        order = self._keep_cells(ancestors.any(dim=1), cell_rows, cell_pos)
        self.ancestors = ancestors.gather(2, order[:, None, :].expand(n, g, order.shape[1]))
        self.key_mask = None

    def _reorder_tree(self, index: torch.Tensor, g: int, sources: torch.Tensor | None) -> None:
        """Beams move to their parents: only `ancestors` changes, unless sentences leave or dead
        cells pile up."""
        parents = (index % g).view(-1, g)  # (N', G) each new beam's parent beam in its sentence
        ancestors = self.ancestors if sources is None else self.ancestors.index_select(0, sources)
        n, _, cells = ancestors.shape
        ancestors = ancestors.gather(1, parents[:, :, None].expand(n, g, cells))  # (N', G, S)
        live = ancestors.any(dim=1)  # (N', S)
        width = int(live.sum(dim=1).max())
        # Compact when dead cells outnumber live ones: attention then reads at most about twice the
        # cells it needs. Sentences that leave take their rows of cells with them (whole rows
        # copied, far cheaper than gathering cells).
        if cells - width < max(width, 4 * g):
            if sources is not None:
                for layer in self.layers:
                    layer.reorder_self(sources)
            self.ancestors = ancestors
            return
        sentence = torch.arange(n, device=index.device) if sources is None else sources
        order = self._keep_cells(
            live,
            sentence[:, None].expand(n, cells),
            torch.arange(cells, device=index.device).expand(n, cells),
        )
        self.ancestors = ancestors.gather(2, order[:, None, :].expand(n, g, width))

    def flatten(self) -> None:
        """Tree -> flat rows: each beam keeps the cells on its path, padded to the longest path
        (key_mask)."""
        n, g, cells = self.ancestors.shape
        paths = self.ancestors.reshape(n * g, cells)
        sentence = torch.arange(n, device=paths.device).repeat_interleave(g)
        order = self._keep_cells(
            paths,
            sentence[:, None].expand(n * g, cells),
            torch.arange(cells, device=paths.device).expand(n * g, cells),
        )
        key_mask = paths.gather(1, order)
        self.key_mask = None if bool(key_mask.all()) else key_mask
        self.ancestors = None

    def grow_tree(self) -> torch.Tensor:
        """Add this step's cell for every beam; return the self-attention mask (N, 1, G, S) for the
        step."""
        n, g, _ = self.ancestors.shape
        own = torch.eye(g, dtype=torch.bool, device=self.ancestors.device).expand(n, g, g)
        self.ancestors = torch.cat([self.ancestors, own], dim=2)
        self.length = self.ancestors.shape[2]
        return self.ancestors[:, None]
