"""Files sent inside JSON requests: base64-encoded, decoded here on the event loop before a job is
queued, so that a bad file is a 422 naming it (`images[1] ...`) and never reaches the worker.

The rules:
- Every file is base64 (standard alphabet, padded); anything else is a 422 naming the field.
- An image's size is read from its header before its pixels are decoded: a classifier's image of
  another size than the model's, or a detector's image of more than MAX_IMAGE_PIXELS pixels, is
  refused without decoding it (a decompression bomb costs nothing), and so are a detector's images
  of more than MAX_REQUEST_PIXELS in all.
- Any error of the image decoder is a 422 naming the image: a file it fails on is not an image.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings

import numpy as np
import torch

from .errors import ApiError

MAX_IMAGE_PIXELS = 4096 * 4096
"""Pixels in one image sent to a detector at most (it is resized to the model's size anyway); a
larger one is a 413."""
MAX_REQUEST_PIXELS = 4 * MAX_IMAGE_PIXELS
"""Pixels in all the images of one /v1/detect request at most (a PNG of one colour compresses
1000-fold: 1 MiB of them could hold billions of pixels to decode); 413 beyond."""


def base64_file(item: str, name: str, what: str) -> bytes:
    """A request's base64-encoded file; a 422 naming it when it is not base64."""
    try:
        return base64.b64decode(item, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(
            422, "invalid_request", f"{name} is not base64: send {what} base64-encoded"
        ) from None


def image_size(raw: bytes, name: str) -> tuple[int, int]:
    """(width, height) from an image file's header, its pixels not decoded; a 422 naming it when it
    is not an image file."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(raw)) as image:  # reads the header only
                return image.size
    except Exception as e:  # noqa: BLE001 - any decoder error: not a readable image file
        raise ApiError(422, "invalid_request", f"{name} cannot be read as an image ({e})") from None


def decode_images(items: list[str], vision) -> torch.Tensor:
    """Base64 image files -> uint8 (N, C, H, W); a bad one is a 422 naming its index. An image of
    another size is refused from its header, not decoded (a decompression bomb costs nothing), and
    so is a file the decoder fails on, whatever its error."""
    from ..data.images import read_image

    mode, size = ("L" if vision.channels == 1 else "RGB"), vision.image_size
    images = []
    for i, item in enumerate(items):
        name = f"images[{i}]"
        raw = base64_file(item, name, "each image file")
        width, height = image_size(raw, name)
        if (width, height) != (size, size):
            raise ApiError(
                422,
                "invalid_request",
                f"{name} is {width} x {height} pixels; the model takes {size} x {size}: resize it",
            )
        images.append(torch.from_numpy(_decoded(read_image, raw, mode, size, name)))
    return torch.stack(images)


def decode_any_size(
    items: list[str], channels: int, size: int
) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
    """Base64 image files of any size (a detector's input) -> each resized to uint8 (channels,
    size, size) as Pipeline.detect resizes a file (data.images.read_image_resized), and each
    original (width, height). Every header is read before any image is decoded: a bad file is a
    422 naming its index; one of more than MAX_IMAGE_PIXELS pixels, or more than
    MAX_REQUEST_PIXELS in all, a 413. (Seconds of work for a large request: call it on a thread,
    not the event loop.)"""
    from ..data.images import read_image_resized

    raws, sizes = [], []
    for i, item in enumerate(items):
        name = f"images[{i}]"
        raw = base64_file(item, name, "each image file")
        width, height = image_size(raw, name)
        if width * height > MAX_IMAGE_PIXELS:
            raise ApiError(
                413,
                "image_too_large",
                f"{name} is {width} x {height} pixels, more than this server decodes "
                f"({MAX_IMAGE_PIXELS:,} pixels): send it smaller",
            )
        raws.append(raw)
        sizes.append((width, height))
    total = sum(w * h for w, h in sizes)
    if total > MAX_REQUEST_PIXELS:
        raise ApiError(
            413,
            "image_too_large",
            f"the images have {total:,} pixels in all, more than this server decodes for one "
            f"request ({MAX_REQUEST_PIXELS:,}): send fewer or smaller ones",
        )
    mode = "L" if channels == 1 else "RGB"
    images = [
        _decoded(read_image_resized, raw, mode, size, f"images[{i}]")[0]
        for i, raw in enumerate(raws)
    ]
    return images, sizes


def _decoded(read, raw: bytes, mode: str, size: int, name: str):
    """read(the file, mode, size, name) (data.images' read_image or read_image_resized), any error
    of the image decoder a 422 naming the image."""
    from ..data.image_tensors import ImageError

    try:
        return read(io.BytesIO(raw), mode, size, name=name)
    except ImageError as e:
        raise ApiError(422, "invalid_request", str(e)) from None
    except Exception as e:  # noqa: BLE001 - any decoder error: not a readable image file
        raise ApiError(422, "invalid_request", f"{name} cannot be read as an image ({e})") from None
