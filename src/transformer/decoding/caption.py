"""Images to text with an image captioner (arch encoder-decoder with model.vision): what
Pipeline.caption does.

The rules:
- Input: uint8 pixels (N, channels, size, size) at the model's shape, or image files (paths or
  binary file objects) of any size and mode, converted to the model's mode ("L" for 1 channel, RGB
  for 3) and resized bilinearly to its size (data.images.read_image_resized), as training saw them.
- The decoder starts from the model's start token over the encoder's 1 + P positions ([CLS] and
  the patches, none masked); beam_size 1 is greedy, else beam search; the output is bounded by
  max_len_a x (1 + P) + max_len_b tokens (a captioner's decode.json sets max_len_a = 0).
- Images are decoded in batches of batch_size, in input order; one caption each.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from ..data.image_tensors import to_pixels
from ..data.images import read_image_resized
from ..model.transformer import EncoderDecoder
from .inputs import PipelineError


def is_captioner(model) -> bool:
    """An encoder-decoder over an image encoder (objective caption)."""
    return isinstance(model, EncoderDecoder) and model.config.vision is not None


def as_images(images, channels: int, size: int) -> torch.Tensor:
    """uint8 (N, channels, size, size) from a tensor of that shape or from image files."""
    if isinstance(images, (str, os.PathLike)):
        images = [images]
    if isinstance(images, torch.Tensor):
        want = (channels, size, size)
        if images.dtype != torch.uint8 or images.dim() != 4 or tuple(images.shape[1:]) != want:
            raise PipelineError(
                f"images are {images.dtype} {tuple(images.shape)}: pass uint8 pixels 0-255 of "
                f"shape (N, {channels}, {size}, {size}), or image files"
            )
        return images
    files = list(images)
    if not files:
        raise PipelineError("no images to caption: give at least one image file or tensor")
    mode = "L" if channels == 1 else "RGB"
    return torch.from_numpy(np.stack([read_image_resized(f, mode, size)[0] for f in files]))


@torch.no_grad()
def caption_images(pipeline, images, batch_size: int, **decode) -> list[str]:
    """See the module docstring and Pipeline.caption."""
    model = pipeline.model
    if not is_captioner(model):
        raise PipelineError(
            "this model does not caption images: caption needs an image captioner (an "
            'encoder-decoder with [model.vision], trained with objective = "caption")'
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise PipelineError(f"batch_size={batch_size!r} is not valid: give a positive number")
    settings = pipeline.settings(**decode)
    if settings.n_best > 1:
        raise PipelineError(f"n_best={settings.n_best}: caption gives one caption an image")
    v = model.config.vision
    images = as_images(images, v.channels, v.image_size)
    device = next(model.parameters()).device
    captions: list[str] = []
    for start in range(0, len(images), batch_size):
        pixels = to_pixels(images[start : start + batch_size]).to(device)
        ids = pipeline.search(pixels, settings)  # (B, T)
        captions += [pipeline.target_tokenizer.decode(row).strip() for row in ids.tolist()]
    return captions
