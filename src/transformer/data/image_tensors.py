"""Image tensors once read: uint8 images to the pixels the image encoder reads, training-time
augmentation, and fitting image sets of other sizes and channel counts to a config's; and
ImageError, the one error of image data.
"""

from __future__ import annotations

import torch


class ImageError(ValueError):
    """Image data is missing or malformed; the message names the file."""


def to_pixels(images: torch.Tensor) -> torch.Tensor:
    """uint8 images (0-255) -> float pixels in [-1, 1] (x / 127.5 - 1: Hugging Face ViT's processor,
    rescale 1/255 then normalise with mean 0.5 and std 0.5), what the image encoder reads."""
    return images.float() / 127.5 - 1.0


def augment(images: torch.Tensor, pad: int, flip: bool, generator: torch.Generator) -> torch.Tensor:
    """Random crop with padding (pad zeros on each side, crop back to the size at a random offset
    per image) and random horizontal flips (each image with probability 1/2), on uint8
    (B, C, H, W)."""
    b, _, h, w = images.shape
    if pad:
        padded = torch.nn.functional.pad(images, (pad, pad, pad, pad))
        dy = torch.randint(0, 2 * pad + 1, (b,), generator=generator)
        dx = torch.randint(0, 2 * pad + 1, (b,), generator=generator)
        rows = (dy[:, None] + torch.arange(h)[None, :])[:, None, :, None]  # (B, 1, H, 1)
        cols = (dx[:, None] + torch.arange(w)[None, :])[:, None, None, :]  # (B, 1, 1, W)
        batch = torch.arange(b)[:, None, None, None]
        channel = torch.arange(images.size(1))[None, :, None, None]
        images = padded[batch, channel, rows, cols]
    if flip:
        mirror = torch.rand(b, generator=generator) < 0.5
        images = torch.where(mirror[:, None, None, None], images.flip(-1), images)
    return images


def fit_images(images: torch.Tensor, channels: int, image_size: int) -> torch.Tensor:
    """uint8 (N, C, H, H) -> uint8 (N, channels, image_size, image_size), so that image sets of
    other shapes can be trained on together. The rules, in this order:

    - channels: grey -> RGB repeats the channel; RGB -> grey is the luma of ITU-R BT.601,
      (299 R + 587 G + 114 B + 500) // 1000; the same count is kept as it is.
    - size: a smaller image is padded, centred ((image_size - H) // 2 above and left, the rest
      below and right), with its background colour: per image and channel, the median of its
      outermost ring of pixels (torch.median's, the lower of the two middle values), so
      Fashion-MNIST's black stays black and a coloured backdrop stays its colour; nothing is
      resampled. A larger image is scaled down (bilinear, antialiased, rounded).
    """
    n, c, h, w = images.shape
    if images.dtype != torch.uint8 or h != w:
        raise ImageError(
            f"images of {images.dtype} {tuple(images.shape)}: fitting takes square uint8 images"
        )
    if c != channels:
        if c == 1 and channels == 3:
            images = images.expand(n, 3, h, w).clone()
        elif c == 3 and channels == 1:
            luma = images.long() * torch.tensor([299, 587, 114]).view(1, 3, 1, 1)
            images = ((luma.sum(1, keepdim=True) + 500) // 1000).to(torch.uint8)
        else:
            raise ImageError(f"images of {c} channels cannot be fitted to {channels}")
    if h < image_size:
        ring = torch.cat(
            [images[..., 0, :], images[..., -1, :], images[..., 1:-1, 0], images[..., 1:-1, -1]],
            dim=-1,
        )  # (N, channels, 4H - 4)
        background = ring.median(dim=-1).values  # (N, channels)
        top = (image_size - h) // 2
        out = background[:, :, None, None].expand(n, channels, image_size, image_size).clone()
        out[:, :, top : top + h, top : top + h] = images
        return out
    if h > image_size:
        scaled = torch.nn.functional.interpolate(
            images.float(), size=(image_size, image_size), mode="bilinear", antialias=True
        )
        return scaled.round().clamp(0, 255).to(torch.uint8)
    return images
