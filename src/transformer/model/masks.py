"""Attention masks as pure functions. Convention everywhere: True = may attend.

Legend (model/__init__.py): B batch, T query length, S key length, L a token mask's length.
A (B, L) *token mask* says which positions hold real tokens; an attention mask is
(B, 1, T, S) and broadcasts over the heads.
"""

from __future__ import annotations

import torch


def padding_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, L) ids -> (B, L) bool, True where the token is not padding."""
    return ids != pad_id


def as_token_mask(
    mask: torch.Tensor | None, shape: tuple[int, ...], name: str
) -> torch.Tensor | None:
    """Check a user's (B, L) token mask and return it as bool (True/1 = real token, False/0 =
    padding).

    Accepts bool masks and integer 0/1 masks (Hugging Face tokenizers' `attention_mask`);
    anything else is a ValueError that names the expected shape and meaning. A bool mask costs
    a shape check only (no read of its values), so the decoding step's masks pay nothing.
    """
    if mask is None:
        return None
    expected = (
        f"a (B, L) = {tuple(shape)} tensor of bool or integer 0/1, "
        "True/1 = real token, False/0 = padding"
    )
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"{name} is a {type(mask).__name__}: pass {expected}")
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(mask.shape)}: pass {expected} (the ids' shape)")
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point() or mask.is_complex():
        raise ValueError(
            f"{name} has dtype {mask.dtype}: pass {expected} (an additive float mask is not "
            "accepted; "
            "use mask > 0 or mask == 0 as you mean it)"
        )
    if mask.numel() and not bool(((mask == 0) | (mask == 1)).all()):
        bad = int(mask[(mask != 0) & (mask != 1)][0])
        raise ValueError(f"{name} holds the value {bad}: pass {expected}")
    return mask.bool()


def causal_mask(
    t: int, s: int | None = None, offset: int = 0, device: torch.device | None = None
) -> torch.Tensor:
    """(T, S) bool: query i (at absolute position offset + i) may attend key j iff j <= offset + i.

    With a KV cache the keys are the `offset` cached positions followed by the T new ones,
    so S = offset + T by default.
    """
    s = offset + t if s is None else s
    query = torch.arange(t, device=device).unsqueeze(1) + offset  # (T, 1)
    key = torch.arange(s, device=device).unsqueeze(0)  # (1, S)
    return key <= query


def attention_mask(
    key_mask: torch.Tensor | None,
    t: int,
    causal: bool = False,
    offset: int = 0,
) -> torch.Tensor | None:
    """Combine a (B, S) key mask and causality into a (B, 1, T, S) mask, or None if nothing is
    hidden.

    `offset` is the number of keys already cached before these T queries (causal case).
    """
    if key_mask is None and not causal:
        return None
    mask = None
    if causal:
        s = key_mask.shape[1] if key_mask is not None else offset + t
        device = key_mask.device if key_mask is not None else None
        mask = causal_mask(t, s, offset=s - t, device=device)[None, None]  # (1, 1, T, S)
    if key_mask is not None:
        keys = key_mask[:, None, None, :]  # (B, 1, 1, S)
        mask = keys if mask is None else mask & keys
    return mask


def positions_from_mask(token_mask: torch.Tensor) -> torch.Tensor:
    """(B, L) bool -> (B, L) long: each real token's position counted from the row's first real
    token.

    Left-padded prompts thus start at position 0, like unpadded ones; padding gets position 0.
    """
    return (token_mask.long().cumsum(-1) - 1).clamp(min=0)
