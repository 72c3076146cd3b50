"""Attention weights collected during decoding, per layer and head, following the rows they belong
to.

Legend (model/__init__.py): B cache rows (B' of them written at a step), H heads, T steps, S source
length; spelled out: layers (decoder layers) and keys (self-attention keys: the cache's columns).
"""

from __future__ import annotations

import torch


class AttentionHistory:
    """Per-row (B, layers, H, T, keys) self- and (B, layers, H, T, S) cross-attention weights,
    reordered with the rows.

    Row t holds the weights of the query that predicted output token t; the decoders return rows
    for the output tokens only (none for the query that predicted </s>, zeros past a hypothesis's
    length, as the ids are padded). Self-attention keys are
    the cache's columns: for an encoder-decoder <s> then the output; for a decoder-only model
    the left-padded prompt then the output.
    """

    def __init__(
        self,
        rows: int,
        n_layers: int,
        n_heads: int,
        max_steps: int,
        self_keys: int,
        source_length: int | None,
        device,
    ):
        self.self = torch.zeros(rows, n_layers, n_heads, max_steps, self_keys, device=device)
        self.cross = (
            None
            if source_length is None
            else torch.zeros(rows, n_layers, n_heads, max_steps, source_length, device=device)
        )

    def write(self, step: int, weights: dict, rows: torch.Tensor | None = None) -> None:
        """Store one step's weights ({"self": [(B', H, keys)...], "cross": [...]}) for `rows` (all
        when None)."""
        sw = torch.stack(weights["self"], dim=1).float()  # (B', layers, H, keys)
        target = slice(None) if rows is None else rows
        self.self[target, :, :, step, : sw.shape[-1]] = sw
        if self.cross is not None:
            self.cross[target, :, :, step] = torch.stack(
                weights["cross"], dim=1
            ).float()  # (B', layers, H, S)

    def reorder(self, index: torch.Tensor) -> None:
        self.self = self.self.index_select(0, index)
        if self.cross is not None:
            self.cross = self.cross.index_select(0, index)

    def take(self, row: int, steps: int) -> dict:
        """One row's first `steps` rows of weights: {"self": (layers, H, T, keys), "cross":
        (layers, H, T, S) or None}."""
        return {
            "self": self.self[row, :, :, :steps].clone(),
            "cross": None if self.cross is None else self.cross[row, :, :, :steps].clone(),
        }


def stack_attention(items: list[dict], steps: int, self_keys: int) -> dict:
    """Per-hypothesis weights -> {"self": (B, layers, H, T, keys), "cross": (B, layers, H, T, S) or
    None}, zero-padded."""

    def pad(t: torch.Tensor, last: int | None) -> torch.Tensor:
        out = t.new_zeros(*t.shape[:2], steps, t.shape[3] if last is None else last)
        rows, cols = min(t.shape[2], steps), min(t.shape[3], out.shape[3])
        out[:, :, :rows, :cols] = t[:, :, :rows, :cols]
        return out

    self_w = torch.stack([pad(it["self"], self_keys) for it in items])
    cross = (
        None if items[0]["cross"] is None else torch.stack([pad(it["cross"], None) for it in items])
    )
    return {"self": self_w, "cross": cross}
