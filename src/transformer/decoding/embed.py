"""A dual encoder's embeddings (CLIP): what Pipeline.embed_texts and Pipeline.embed_images do.

Texts are lowercased (as the contrastive objective lowercases the names it trains on) and fed as
[CLS] text [SEP], cut to the text tower's max_positions; images are fitted to the model's channels
and size (data.image_tensors.fit_images: grey -> RGB, smaller images padded with their background
colour). Each embedding is a unit vector; the cosine of two is their dot product.
"""

from __future__ import annotations

import torch

from ..data.batching import pad_rows
from ..data.tokenizer import EncoderTokens
from ..model.contrastive import DualEncoder
from .inputs import Loaded, PipelineError, as_lines


def dual_encoder(pipeline: Loaded) -> DualEncoder:
    model = pipeline.model
    if not isinstance(model, DualEncoder):
        raise PipelineError(
            "this model has no text-image embeddings: embed needs a dual encoder trained with "
            'objective = "contrastive" ([model.contrastive])'
        )
    return model


@torch.no_grad()
def embed_texts(pipeline: Loaded, texts: list[str], batch_size: int) -> torch.Tensor:
    """Unit embeddings (N, E), float32 on the CPU, of N texts (see the module doc)."""
    model = dual_encoder(pipeline)
    texts = as_lines(texts)
    tokens = EncoderTokens(pipeline.source_tokenizer, pipeline.special_tokens)
    cfg, text = model.config, model.config.text_tower()
    limit = None if text.positional in ("none", "rope", "t5_bias") else text.max_positions - 2
    rows = [
        tokens.wrap(ids[:limit])
        for ids in pipeline.source_tokenizer.encode_batch([t.lower() for t in texts])
    ]
    device = next(model.parameters()).device
    out = [torch.zeros(0, cfg.contrastive.embed_dim)]
    for start in range(0, len(rows), batch_size):
        ids, mask = pad_rows(rows[start : start + batch_size], tokens.pad)  # (B, L)
        out.append(model.embed_texts(ids.to(device), mask.to(device)).float().cpu())
    return torch.cat(out)


@torch.no_grad()
def embed_images(pipeline: Loaded, images, batch_size: int) -> torch.Tensor:
    """Unit embeddings (N, E), float32 on the CPU, of N images: uint8 (N, C, H, W) pixels 0-255 of
    any square size and 1 or 3 channels, or a list of image files (see the module doc)."""
    from ..data.image_tensors import ImageError, fit_images, to_pixels

    model = dual_encoder(pipeline)
    v = model.config.vision
    if not isinstance(images, torch.Tensor):
        images = read_images(list(images), v.channels, v.image_size)
    if len(images) == 0:
        return torch.zeros(0, model.config.contrastive.embed_dim)
    if images.dtype != torch.uint8 or images.dim() != 4:
        raise PipelineError(
            f"images are {images.dtype} {tuple(images.shape)}: pass uint8 (N, C, H, W) pixels "
            "0-255 (or image files)"
        )
    try:
        images = fit_images(images, v.channels, v.image_size)
    except ImageError as e:
        raise PipelineError(str(e)) from None
    device = next(model.parameters()).device
    out = [torch.zeros(0, model.config.contrastive.embed_dim)]
    for start in range(0, len(images), batch_size):
        pixels = to_pixels(images[start : start + batch_size]).to(device)
        out.append(model.embed_images(pixels).float().cpu())
    return torch.cat(out)


def read_images(files: list, channels: int, image_size: int) -> torch.Tensor:
    """Square image files of any size as uint8 (N, channels, image_size, image_size): each read
    in grey "L" or RGB as the channels say, then fitted (data.image_tensors.fit_images)."""
    from PIL import Image, UnidentifiedImageError

    from ..data.image_tensors import fit_images
    from ..data.images import read_image

    pictures = [torch.zeros(0, channels, image_size, image_size, dtype=torch.uint8)]
    for file in files:
        try:
            with Image.open(file) as image:
                width, height = image.size
        except (UnidentifiedImageError, OSError) as e:
            raise PipelineError(f"{file} cannot be read as an image ({e})") from None
        if width != height:
            raise PipelineError(f"{file} is {width} x {height} pixels: give square images")
        pixels = torch.from_numpy(read_image(file, "L" if channels == 1 else "RGB", width))
        pictures.append(fit_images(pixels[None], channels, image_size))
    return torch.cat(pictures)
