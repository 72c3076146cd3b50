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


# Integer 0/1 masks (Hugging Face tokenizers' attention_mask) equal bool masks in every family and
# attention path; float masks, wrong shapes and other values are clear errors.
import pytest  # noqa: E402

import transformer  # noqa: E402
from transformer.config import cpu_tiny  # noqa: E402
from transformer.model.masks import as_token_mask  # noqa: E402

MASK_DTYPES = [torch.bool, torch.int64, torch.int32, torch.uint8, torch.int8]


def _call(model, arch, ids, mask, tgt_mask=None):
    if arch == "encoder-decoder":
        return model(ids, ids[:, :3], src_mask=mask, tgt_mask=tgt_mask)
    return model(ids, attention_mask=mask)


@pytest.mark.parametrize("impl", ["fused", "textbook"])
@pytest.mark.parametrize("arch", ["encoder-decoder", "encoder", "decoder"])
@pytest.mark.parametrize("dtype", MASK_DTYPES, ids=str)
def test_integer_masks_equal_bool_masks(arch, impl, dtype):
    torch.manual_seed(0)
    model = transformer.build_model(cpu_tiny(vocab_size=40, arch=arch, attention_impl=impl)).eval()
    ids = torch.randint(4, 40, (3, 6))
    real = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0]], dtype=torch.bool)
    tgt = real[:, :3].flip(0)  # the decoder side padded too (encoder-decoder)
    expected = _call(model, arch, ids, real, tgt)
    got = _call(model, arch, ids, real.to(dtype), tgt.to(dtype))
    assert torch.equal(got, expected)
    # the mask really is used: padding changes the real rows' outputs when it is not masked
    assert not torch.allclose(_call(model, arch, ids, None, tgt)[1], expected[1])


def test_encoder_decoder_decode_takes_integer_masks_too():
    torch.manual_seed(0)
    model = transformer.build_model(cpu_tiny(vocab_size=40)).eval()
    src, tgt = torch.randint(4, 40, (2, 5)), torch.randint(4, 40, (2, 4))
    src_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    memory, mask = model.encode(src, src_mask)
    assert mask.dtype == torch.bool
    assert torch.equal(model.decode(tgt, memory, src_mask), model.decode(tgt, memory, src_mask.bool()))


@pytest.mark.parametrize("arch, name", [("encoder", "attention_mask"), ("decoder", "attention_mask"),
                                        ("encoder-decoder", "src_mask")])
def test_bad_masks_are_clear_errors(arch, name):
    model = transformer.build_model(cpu_tiny(vocab_size=40, arch=arch)).eval()
    ids = torch.randint(4, 40, (2, 5))
    for mask, message in [
        (torch.ones(2, 5), r"has dtype torch.float32: pass a \(B, L\) = \(2, 5\) tensor of bool or integer 0/1, "
                           r"True/1 = real token"),
        (torch.ones(2, 4, dtype=torch.bool), r"has shape \(2, 4\): pass a \(B, L\) = \(2, 5\) tensor"),
        (torch.ones(2, 1, 1, 5, dtype=torch.bool), r"has shape \(2, 1, 1, 5\)"),
        (torch.full((2, 5), 2), r"holds the value 2: pass"),
        (torch.full((2, 5), -1), r"holds the value -1: pass"),
        ([[1, 1, 1, 1, 1]] * 2, r"is a list: pass"),
    ]:
        with pytest.raises(ValueError, match=rf"^{name} " + message):
            _call(model, arch, ids, mask)


def test_as_token_mask_passes_bool_through_and_converts_integers():
    m = torch.tensor([[True, False]])
    assert as_token_mask(m, (1, 2), "mask") is m
    assert as_token_mask(None, (1, 2), "mask") is None
    assert as_token_mask(torch.tensor([[1, 0]]), (1, 2), "mask").tolist() == [[True, False]]
    assert as_token_mask(torch.zeros(0, 0, dtype=torch.long), (0, 0), "mask").shape == (0, 0)
