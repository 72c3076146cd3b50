"""Fitting image sets of other shapes to a model's (data.image_tensors.fit_images), against hand-computed
pixels: grey -> RGB, padding with the background colour, RGB -> grey, scaling down."""

from __future__ import annotations

import pytest
import torch

from transformer.data.image_tensors import ImageError, fit_images


def test_grey_becomes_rgb_padded_with_its_border_median():
    grey = torch.tensor([[[[9, 9, 9], [9, 50, 9], [9, 9, 200]]]], dtype=torch.uint8)  # (1, 1, 3, 3)
    fitted = fit_images(grey, 3, 5)
    # the ring is 9 x 7 and 200: median 9; 5 - 3 = 2: one row and column each side
    expected = torch.tensor(
        [[9, 9, 9, 9, 9], [9, 9, 9, 9, 9], [9, 9, 50, 9, 9], [9, 9, 9, 200, 9], [9, 9, 9, 9, 9]],
        dtype=torch.uint8,
    )
    assert fitted.shape == (1, 3, 5, 5)
    for c in range(3):
        assert torch.equal(fitted[0, c], expected)


def test_padding_is_centred_with_the_extra_pixel_below_and_right_and_per_channel():
    image = torch.zeros(1, 3, 2, 2, dtype=torch.uint8)
    image[0, 0] = 10  # red backdrop 10, green 0, blue 0 except one pixel
    image[0, 2, 1, 1] = 255
    fitted = fit_images(image, 3, 5)  # 3 more: 1 above and left, 2 below and right
    assert fitted[0, 0].unique().tolist() == [10]
    assert fitted[0, 2, 2, 2] == 255 and fitted[0, 2].sum() == 255
    assert fitted[0, 1].sum() == 0


def test_fashion_mnist_shape_becomes_32_by_32_rgb_with_black_borders():
    images = torch.zeros(2, 1, 28, 28, dtype=torch.uint8)
    images[:, :, 10:20, 10:20] = 180
    fitted = fit_images(images, 3, 32)
    assert fitted.shape == (2, 3, 32, 32)
    assert torch.equal(fitted[:, :, 2:30, 2:30], images.expand(2, 3, 28, 28))
    assert fitted[:, :, :2].sum() == fitted[:, :, 30:].sum() == 0


def test_rgb_to_grey_is_bt601_luma_and_larger_images_shrink():
    rgb = torch.tensor([100, 200, 50], dtype=torch.uint8).view(1, 3, 1, 1).expand(1, 3, 4, 4)
    grey = fit_images(rgb.contiguous(), 1, 4)
    assert grey.unique().tolist() == [(299 * 100 + 587 * 200 + 114 * 50 + 500) // 1000]  # 153
    assert fit_images(rgb.contiguous(), 3, 2).shape == (1, 3, 2, 2)
    assert fit_images(rgb.contiguous(), 3, 2).unique().tolist() == [50, 100, 200]
    same = torch.randint(0, 255, (2, 3, 4, 4), dtype=torch.uint8)
    assert fit_images(same, 3, 4) is same


def test_bad_images_are_one_line_errors():
    with pytest.raises(ImageError, match="square uint8"):
        fit_images(torch.zeros(1, 1, 2, 3, dtype=torch.uint8), 1, 4)
    with pytest.raises(ImageError, match="2 channels cannot be fitted to 3"):
        fit_images(torch.zeros(1, 2, 2, 2, dtype=torch.uint8), 3, 4)
