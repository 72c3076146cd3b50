"""Position information: sinusoidal (§3.5), learned, and rotary (RoPE, Su et al. 2021).

Legend (model/__init__.py): B batch, L length, T query length, S key length, C d_model, H heads,
D head dim; a table has one row per position (max_positions rows).
Positions are absolute and 0-based; incremental decoding passes the absolute step.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_table(n_positions: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """(n_positions, C) table of §3.5: PE(pos, 2i) = sin(pos / 10000^(2i/C)), PE(pos, 2i+1) =
    cos(same).

    layout="halves" puts all the sines first and all the cosines after (Marian, fairseq).
    """
    position = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)  # (n_positions, 1)
    inv_freq = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
    )
    angles = position * inv_freq  # (n_positions, C/2)
    table = torch.empty(n_positions, d_model, dtype=torch.float64)
    if layout == "interleaved":
        table[:, 0::2] = torch.sin(angles)
        table[:, 1::2] = torch.cos(angles)
    elif layout == "halves":
        table[:, : d_model // 2] = torch.sin(angles)
        table[:, d_model // 2 :] = torch.cos(angles)
    else:
        raise ValueError(f"unknown sinusoidal layout {layout!r}: use 'interleaved' or 'halves'")
    return table.float()


def reads_back(t: torch.Tensor, training: bool = False) -> bool:
    """Whether to read t's values back for a check (a clear error instead of an index error deep
    inside torch). On a GPU that read waits for the device, so it is skipped there while training
    (the run's own data, within data.max_len <= model.max_positions, checked when the run starts)
    and inside torch.compile (a graph break); on the CPU it is always done."""
    if torch.compiler.is_compiling():
        return False
    return t.device.type == "cpu" or not training


def check_positions(positions: torch.Tensor, max_positions: int, training: bool = False) -> None:
    """A clear error instead of an index error deep inside torch (see reads_back)."""
    if not reads_back(positions, training):
        return
    if positions.numel() and int(positions.max()) >= max_positions:
        raise ValueError(
            f"sequence position {int(positions.max())} is beyond max_positions={max_positions}: "
            "shorten the input or build the model with a larger max_positions"
        )


class SinusoidalPositions(nn.Module):
    """Fixed sinusoidal encodings (§3.5), added to the scaled token embeddings."""

    def __init__(self, d_model: int, max_positions: int, layout: str = "interleaved"):
        super().__init__()
        self.max_positions = max_positions
        # Not a parameter and not saved: it is a function of the config.
        self.register_buffer(
            "table", sinusoidal_table(max_positions, d_model, layout), persistent=False
        )

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        """(B, L) long -> (B, L, C)."""
        check_positions(positions, self.max_positions, self.training)
        return self.table[positions]


class LearnedPositions(nn.Module):
    """One learned vector per absolute position (BERT, GPT-2)."""

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        self.max_positions = max_positions
        self.weight = nn.Parameter(torch.empty(max_positions, d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        """(B, L) long -> (B, L, C)."""
        check_positions(positions, self.max_positions, self.training)
        return self.weight[positions]


class RotaryEmbedding(nn.Module):
    """Rotary position embedding: rotate each pair (x[2i], x[2i+1]) by angle pos * base^(-2i/D).

    Applied to queries and keys inside self-attention, so their dot product depends only on
    the relative position. Pairs are interleaved as in the RoFormer paper; Hugging Face's
    Llama pairs dimension i with i + D/2 instead ("rotate half"), which the importer maps
    by permuting the rows of the query and key projections.
    """

    def __init__(self, head_dim: int, max_positions: int, base: float = 10000.0):
        super().__init__()
        self.max_positions = max_positions
        self._memo: tuple | None = None  # (positions, dtype, version, cos, sin): the last lookup
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (D/2,)
        angles = (
            torch.arange(max_positions, dtype=torch.float64).unsqueeze(1) * inv_freq
        )  # (max_positions, D/2)
        # Per dimension: each pair's cosine twice, and its sine with the sign of the pair's slot, so
        # that rotating is x * cos + swap_pairs(x) * sin, four operations on whole tensors.
        sin = torch.sin(angles)
        self.register_buffer(
            "cos", torch.cos(angles).repeat_interleave(2, dim=-1).float(), persistent=False
        )
        self.register_buffer(
            "sin", torch.stack((-sin, sin), dim=-1).flatten(-2).float(), persistent=False
        )

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate x (B, H, L, D) at positions (B, L).

        Pair (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin): the same products and sums as the
        written-out rotation, so the same numbers in any dtype."""
        # On a GPU never (as while training): it would wait for the device in every layer; a
        # decoder's lengths are capped at max_positions before decoding starts.
        memo = self._memo
        if torch.compiler.is_compiling():  # a graph shares the lookup between layers itself
            cos, sin = self.lookup(positions, x.dtype)
        elif (
            memo is not None
            and memo[0] is positions
            and memo[1] == x.dtype
            and memo[2] == _version(positions)
        ):
            cos, sin = memo[3], memo[4]  # the layer before looked these up: same step
        else:
            check_positions(positions, self.max_positions, training=True)
            cos, sin = self.lookup(positions, x.dtype)
            # The layers share this module: at inference the next layer (and the keys after the
            # queries) reuses the lookup of the same positions tensor (held here, so its identity
            # is not recycled); training never keeps one.
            keep = not torch.is_grad_enabled()
            self._memo = (positions, x.dtype, _version(positions), cos, sin) if keep else None
        if x.requires_grad:
            return _Rotate.apply(x, cos, sin)
        return self.rotate(x, cos, sin)

    def lookup(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The cosines and signed sines (B, 1, L, D) of positions (B, L), unchecked."""
        return (
            self.cos[positions].unsqueeze(1).to(dtype),
            self.sin[positions].unsqueeze(1).to(dtype),
        )

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x (B, H, L, D) rotated by a lookup's cos and sin."""
        return x * cos + swap_pairs(x) * sin


def _version(t: torch.Tensor) -> int | None:
    """The tensor's in-place write counter (None for an inference-mode tensor, which cannot be
    written in place outside inference mode)."""
    return None if t.is_inference() else t._version


def swap_pairs(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (x2, x1) in each pair of the last dimension. Stacking the two strided halves is
    faster than flip on the CPU (docs/benchmarks/training.md, "fp32 training against the machine's
    product ceiling")."""
    pairs = x.unflatten(-1, (-1, 2))
    return torch.stack((pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)


class _Rotate(torch.autograd.Function):
    """The rotation with its backward written out: the gradient of x * cos + swap(x) * sin is
    g * cos + swap(g * sin) (the swap is its own transpose), three passes over g where autograd
    takes five (two products, the swap's backward, and the sum of the two paths)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(cos, sin)
        return x * cos + swap_pairs(x) * sin

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        cos, sin = ctx.saved_tensors
        return swap_pairs(grad * sin).addcmul_(grad, cos), None, None


def relative_bucket(
    relative: torch.Tensor, bidirectional: bool, buckets: int = 32, max_distance: int = 128
) -> torch.Tensor:
    """T5's bucket of each relative position (key position - query position), a long tensor of any
    shape.

    Bidirectional (encoder): half the buckets for keys before the query (and itself), half for
    keys after it. Causal (decoder): all buckets for the past; later keys (never attended) share
    bucket 0 with distance 0. Within a direction, distances 0 .. n/2 - 1 get a bucket each (n the
    direction's buckets) and longer ones share logarithmically wider buckets up to max_distance;
    farther keys share the last. The logarithm is taken in float32, as T5 and Hugging Face do,
    so the boundaries land on the same buckets.
    """
    if bidirectional:
        buckets //= 2
        side = (relative > 0).long() * buckets  # later keys use the second half
        distance = relative.abs()
    else:
        side = 0
        distance = (-relative).clamp(min=0)
    exact = buckets // 2
    far = (
        exact
        + (
            torch.log(distance.float() / exact) / math.log(max_distance / exact) * (buckets - exact)
        ).long()
    )
    far = far.clamp(max=buckets - 1)
    return side + torch.where(distance < exact, distance, far)


class RelativePositionBias(nn.Module):
    """T5's relative position bias: a learned scalar per bucket and head, added to the attention
    scores.

    One table per stack (the encoder's bidirectional, the decoder's causal), shared by its layers.
    """

    def __init__(
        self, n_heads: int, bidirectional: bool, buckets: int = 32, max_distance: int = 128
    ):
        super().__init__()
        self.bidirectional = bidirectional
        self.buckets = buckets
        self.max_distance = max_distance
        self.table = nn.Embedding(buckets, n_heads)

    def forward(self, relative: torch.Tensor) -> torch.Tensor:
        """relative (B, T, S) key position - query position, long -> bias (B, H, T, S)."""
        index = relative_bucket(relative, self.bidirectional, self.buckets, self.max_distance)
        return self.table(index).permute(0, 3, 1, 2)
