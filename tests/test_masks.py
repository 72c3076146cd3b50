"""Mask functions: True = may attend."""

import torch

from transformer.model.masks import attention_mask, causal_mask, padding_mask, positions_from_mask


def test_causal_mask_with_and_without_cache_offset():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    # Two cached keys, two new queries at positions 2 and 3.
    assert causal_mask(2, offset=2).tolist() == [[True, True, True, False], [True, True, True, True]]


def test_padding_and_combined_masks():
    ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
    keys = padding_mask(ids, pad_id=0)
    assert keys.tolist() == [[True, True, False], [True, False, False]]
    assert attention_mask(None, 3) is None
    assert attention_mask(keys, 2).shape == (2, 1, 1, 3)
    combined = attention_mask(keys, 3, causal=True)
    assert combined.shape == (2, 1, 3, 3)
    assert combined[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert combined[1, 0, :, 1:].any().item() is False


def test_positions_count_from_the_first_real_token():
    mask = torch.tensor([[False, False, True, True], [True, True, True, False]])
    assert positions_from_mask(mask).tolist() == [[0, 0, 0, 1], [0, 1, 2, 2]]
