"""`transformer detect`: objects in images with a detector (DETR, trained with objective =
"detection"). The handler is `detect`; its parser is derived from its signature (cli.args)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Annotated

from ..config import DecodeConfig
from .args import Arg, Setting, command
from .common import ModelRun, UserError
from .loading import detector


def detect(
    run: ModelRun,
    images: Annotated[
        list[str], Arg("image files (any size; resized to the model's)", positional=True)
    ],
    threshold: Annotated[float | None, Setting(DecodeConfig)] = None,
    out: Annotated[
        str | None,
        Arg("also write each image with its boxes drawn (PNG) and its JSON to this folder"),
    ] = None,
    batch_size: Annotated[int | None, Setting(DecodeConfig)] = None,
) -> None:
    """One JSON line per image: the file and its objects (label, score, box x0 y0 x1 y1 in its
    pixels); --out DIR also writes each image with its boxes drawn and the JSON beside it."""
    for image in images:
        if not Path(image).is_file():
            raise UserError(f"{image} not found: give image files (PNG, JPEG, ...)")
    pipeline = detector(run, "detect")
    found = pipeline.detect(images, threshold=threshold, batch_size=batch_size)
    folder = Path(out) if out else None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    for n, (image, objects) in enumerate(zip(images, found, strict=True)):
        record = {"file": image, "objects": [o.to_dict() for o in objects]}
        print(json.dumps(record, ensure_ascii=False))
        if folder is not None:
            stem = Path(image).stem
            stem = f"{stem}-{n + 1}" if stem in seen else stem  # two files of one name
            seen.add(stem)
            _write_drawn(image, objects, record, folder / stem)
    if folder is not None:
        print(f"wrote {len(found)} drawn image(s) and their JSON to {folder}")


def _write_drawn(image: str, objects, record: dict, stem: Path) -> None:
    """stem.png (the image with its boxes drawn) and stem.json."""
    from PIL import Image

    from ..files import atomic_write_text
    from ..viz.boxes import draw_boxes

    with Image.open(image) as picture:
        draw_boxes(picture.convert("RGB"), objects, stem.with_suffix(".png"))
    text = json.dumps(record, ensure_ascii=False, indent=1) + "\n"
    atomic_write_text(stem.with_suffix(".json"), text)


def register(sub: argparse._SubParsersAction) -> None:
    """`detect`."""
    command(
        sub,
        "detect",
        detect,
        help="object detection: the objects in each image, with boxes (JSON, pictures)",
    )
