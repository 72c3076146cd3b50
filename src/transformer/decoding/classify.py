"""An encoder classifier's labels for texts or images: what Pipeline.classify and
Pipeline.classify_images do (a text is fed as [CLS] text [SEP], batched by tokens; images in
batches of batch_size)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

from ..config import ConfigError
from ..data.batching import pad_rows
from ..data.tokenizer import EncoderTokens
from ..model.transformer import EncoderOnly
from .inputs import Loaded, PipelineError, as_lines, batches_by_tokens, truncation_note


@torch.no_grad()
def classify_texts(
    pipeline: Loaded,
    lines: list[str],
    top_k: int = 1,
    batch_tokens: int = 4000,
    truncate: bool = True,
    on_truncate: Callable[[list[int]], None] | None = None,
) -> list[list[tuple[str, float]]]:
    """The top_k (label, probability) pairs of each line (see Pipeline.classify)."""
    model = pipeline.model
    if (
        not isinstance(model, EncoderOnly)
        or model.pooler is None
        or model.pooler.classifier is None
    ):
        raise PipelineError(
            "this model is not a classifier: classify needs an encoder trained with "
            'objective = "classify"'
        )
    labels = pipeline.labels or [str(i) for i in range(model.config.n_classes)]
    if len(labels) != model.config.n_classes:
        raise PipelineError(
            f"labels.json names {len(labels)} labels but the model has "
            f"{model.config.n_classes} classes"
        )
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ConfigError(f"top_k={top_k!r} is not valid: give a number of labels (0 = all)")
    lines = as_lines(lines)
    tokens = EncoderTokens(pipeline.source_tokenizer, pipeline.special_tokens)
    limit = None if model.config.positional in ("none", "rope") else model.config.max_positions - 2
    encoded = pipeline.source_tokenizer.encode_batch(lines)
    cut = [n for n, ids in enumerate(encoded, start=1) if limit is not None and len(ids) > limit]
    if cut and not truncate:
        raise PipelineError(
            f"input line {cut[0]} has {len(encoded[cut[0] - 1])} tokens, more than the model's "
            f"{limit} (max_positions - 2 for [CLS] and [SEP]): shorten it"
        )
    if cut:
        (
            on_truncate
            or (lambda c: warnings.warn(truncation_note(c, len(lines), limit), stacklevel=4))
        )(cut)
    rows = [tokens.wrap(ids[:limit] if limit is not None else ids) for ids in encoded]
    device = next(model.parameters()).device
    k = len(labels) if top_k == 0 else min(top_k, len(labels))
    out: list = [None] * len(rows)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    for batch in batches_by_tokens(order, [len(r) for r in rows], batch_tokens):
        ids, mask = pad_rows([rows[i] for i in batch], tokens.pad)
        probs = model.classify(ids.to(device), mask.to(device)).float().softmax(-1)
        values, indices = probs.topk(k, dim=-1)
        for j, i in enumerate(batch):
            out[i] = [
                (labels[c], float(v))
                for v, c in zip(values[j].tolist(), indices[j].tolist(), strict=True)
            ]
    return out


@torch.no_grad()
def classify_images(
    pipeline: Loaded, images, top_k: int, batch_size: int
) -> list[list[tuple[str, float]]]:
    """The top_k (label, probability) pairs of each image (see Pipeline.classify_images)."""
    import numpy as np

    from ..data.image_tensors import to_pixels
    from ..data.images import read_image

    model = pipeline.model
    v = model.config.vision
    pipeline.expect("classify")
    if v is None or model.pooler is None or model.pooler.classifier is None:
        raise PipelineError(
            "this model is not an image classifier: classify_images needs an image encoder "
            '(model.vision) trained with objective = "classify"'
        )
    if not isinstance(images, torch.Tensor):
        mode = "L" if v.channels == 1 else "RGB"
        images = torch.from_numpy(np.stack([read_image(f, mode, v.image_size) for f in images]))
    if images.dtype != torch.uint8:
        raise PipelineError(f"images are {images.dtype}: pass uint8 pixels 0-255 (or image files)")
    labels = pipeline.labels or [str(i) for i in range(model.config.n_classes)]
    k = len(labels) if top_k == 0 else min(top_k, len(labels))
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(images), batch_size):
        probs = (
            model.classify(to_pixels(images[start : start + batch_size]).to(device))
            .float()
            .softmax(-1)
        )
        values, indices = probs.topk(k, dim=-1)
        out += [
            [(labels[c], float(p)) for p, c in zip(vs, cs, strict=True)]
            for vs, cs in zip(values.tolist(), indices.tolist(), strict=True)
        ]
    return out
