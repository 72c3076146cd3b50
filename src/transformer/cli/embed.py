"""`transformer embed`: embeddings of texts and images with a text-image dual encoder (CLIP,
trained with objective = "contrastive"). The handler is `embed`; its parser is derived from its
signature (cli.args)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Annotated

from .args import Arg, command
from .common import ModelRun, UserError
from .loading import dual_encoder


def embed(
    run: ModelRun,
    text: Annotated[list[str] | None, Arg("a text to embed (repeat the flag for several)")] = None,
    image: Annotated[
        list[str] | None,
        Arg("image files to embed (square; fitted to the model's channels and size)", several=True),
    ] = None,
) -> None:
    """One JSON line per input, texts first: {"text": T, "embedding": [...]} or {"image": F,
    "embedding": [...]}, the unit vector the dual encoder gives it."""
    texts, images = text or [], image or []
    if not texts and not images:
        raise UserError("give --text TEXT (one or more) or --image FILE (one or more) to embed")
    for file in images:
        if not Path(file).is_file():
            raise UserError(f"--image {file} not found: give image files (PNG, JPEG, ...)")
    pipeline = dual_encoder(run, "embed")
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
    command(
        sub,
        "embed",
        embed,
        help="a text-image dual encoder's embeddings of texts or images, one JSON line each",
    )
