"""Images as tokens (data/pixels.py): quantisation against its formula, the palette's digits, the
condition's tokens, the training sequences' targets, bits per dimension."""

from __future__ import annotations

import math

import pytest
import torch

from transformer.data.pixels import (
    PAD,
    PIXEL_OFFSET,
    START,
    ImageTokens,
    PixelTokenError,
    names_alphabet,
    sequences,
)


def test_grey_levels_follow_the_formula_and_come_back_to_their_bin():
    tokens = ImageTokens(4, 1, 16)
    values = torch.randint(0, 256, (3, 1, 4, 4), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    ids = tokens.quantise(values)
    assert ids.shape == (3, 16)
    assert torch.equal(ids - PIXEL_OFFSET, (values.long() // 16).reshape(3, 16))
    back = tokens.pixels(ids)
    assert back.dtype == torch.uint8 and back.shape == values.shape
    assert torch.equal(back.long() // 16, values.long() // 16)  # the same bin
    assert torch.equal(back.long() % 16, torch.full_like(back.long(), 8))  # its centre
    assert torch.equal(tokens.quantise(back), ids)


def test_rgb_palette_is_the_levels_as_digits():
    tokens = ImageTokens(2, 3, 8)  # the 9-bit palette
    assert tokens.n_colours == 512
    image = torch.tensor([[[[255, 0], [32, 100]], [[0, 255], [64, 100]], [[0, 0], [96, 100]]]],
                         dtype=torch.uint8)  # fmt: skip
    ids = tokens.quantise(image)[0] - PIXEL_OFFSET
    r, g, b = image[0].long() // 32
    assert ids.tolist() == ((r * 8 + g) * 8 + b).reshape(-1).tolist()
    assert ids[0] == 7 * 64 and ids[1] == 7 * 8  # pure red, pure green
    assert torch.equal(tokens.quantise(tokens.pixels(ids[None] + PIXEL_OFFSET)), ids[None] + PIXEL_OFFSET)


def test_layout_conditions_and_suppressed_ids():
    tokens = ImageTokens(2, 1, 4, labels=("coat", "bag"), chars=names_alphabet(["Red Apple"]))
    assert tokens.chars == " adelpr"
    assert tokens.label_offset == PIXEL_OFFSET + 4
    assert tokens.prefix(label="bag") == [tokens.label_offset + 1] == tokens.prefix(label=1)
    assert tokens.prefix() == [START]
    apple = tokens.prefix(name="red apple!")
    assert apple[-1] == START and apple[-2] == 1  # "!" is unknown, then <s>
    assert tokens.vocab_size == PIXEL_OFFSET + 4 + 2 + 7
    pixels = set(range(PIXEL_OFFSET, PIXEL_OFFSET + 4))
    assert set(tokens.non_pixel_ids()) == set(range(tokens.vocab_size)) - pixels
    with pytest.raises(PixelTokenError, match="unknown label 'shoe': this model knows coat, bag"):
        tokens.prefix(label="shoe")
    with pytest.raises(PixelTokenError, match="not conditioned on names"):
        ImageTokens(2, 1, 4).prefix(name="x")
    with pytest.raises(PixelTokenError, match="not both"):
        tokens.prefix(label="bag", name="bag")
    assert ImageTokens.from_dict(tokens.to_dict()) == tokens


def test_sequences_predict_every_pixel_once_after_its_condition():
    tokens = ImageTokens(2, 1, 4, chars="ab")
    images = torch.tensor([[[[0, 64], [128, 255]]], [[[255, 255], [0, 0]]]], dtype=torch.uint8)
    prefixes = [[START], tokens.prefix(name="ab")]  # 1 and 3 tokens
    inputs, targets = sequences(tokens, images, prefixes)
    assert inputs.shape == targets.shape == (2, 3 + 4 - 1)
    pixels = tokens.quantise(images)
    for row, prefix in enumerate(prefixes):
        n = len(prefix)
        full = prefix + pixels[row].tolist()
        assert inputs[row, : n + 3].tolist() == full[:-1]
        real = targets[row] != PAD
        assert targets[row, real].tolist() == pixels[row].tolist()  # every pixel, in order
        assert real.nonzero()[0].item() == n - 1  # the condition's last token predicts pixel 1


def test_bits_per_dim():
    tokens = ImageTokens(28, 1, 16)
    uniform = 784 * math.log(16)  # nats of one image under a uniform model
    assert tokens.bits_per_dim(2 * uniform, 2) == pytest.approx(4.0)
    assert tokens.bits_per_dim_8bit(4.0) == pytest.approx(8.0)  # uniform over 256 values
    rgb = ImageTokens(2, 3, 8)
    assert rgb.bits_per_dim(4 * math.log(512), 1) == pytest.approx(3.0)  # 9 bits a pixel


def test_bad_images_and_layouts():
    with pytest.raises(PixelTokenError, match=r"uint8 \(N, 1, 4, 4\)"):
        ImageTokens(4, 1, 16).quantise(torch.zeros(1, 1, 4, 4))
    with pytest.raises(PixelTokenError, match="grey \\(1\\) or RGB \\(3\\)"):
        ImageTokens(4, 2, 16)
