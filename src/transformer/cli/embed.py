"""`transformer embed`: embeddings of texts and images with a text-image dual encoder (CLIP,
trained with objective = "contrastive")."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import (
    UserError,
    add_device_args,
    add_precision_arg,
)
from .loading import (
    dual_encoder,
)


def cmd_embed(args: argparse.Namespace) -> None:
    """One JSON line per input, texts first: {"text": T, "embedding": [...]} or {"image": F,
    "embedding": [...]}, the unit vector the dual encoder gives it."""
    texts, images = args.text or [], args.image or []
    if not texts and not images:
        raise UserError("give --text TEXT (one or more) or --image FILE (one or more) to embed")
    for image in images:
        if not Path(image).is_file():
            raise UserError(f"--image {image} not found: give image files (PNG, JPEG, ...)")
    pipeline = dual_encoder(args, "embed")
    out = []
    if texts:
        out += [("text", t, v) for t, v in zip(texts, pipeline.embed_texts(texts), strict=True)]
    if images:
        out += [("image", f, v) for f, v in zip(images, pipeline.embed_images(images), strict=True)]
    for kind, source, vector in out:
        values = [round(x, 6) for x in vector.tolist()]
        print(json.dumps({kind: source, "embedding": values}, ensure_ascii=False))


def register(sub: argparse._SubParsersAction) -> None:
    """`embed`."""
    p = sub.add_parser(
        "embed",
        help="a text-image dual encoder's embeddings of texts or images, one JSON line each",
    )
    p.add_argument("model_dir")
    p.add_argument("--text", action="append", help="a text to embed (repeat the flag for several)")
    p.add_argument(
        "--image",
        nargs="+",
        action="extend",
        help="image files to embed (square; fitted to the model's channels and size)",
    )
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_embed)
