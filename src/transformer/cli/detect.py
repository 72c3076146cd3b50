"""`transformer detect`: objects in images with a detector (DETR, trained with objective =
"detection")."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..config import (
    Bounds,
)
from .common import (
    PROBABILITY,
    UserError,
    add_device_args,
    add_flag,
    add_precision_arg,
)
from .loading import (
    detector,
)


def cmd_detect(args: argparse.Namespace) -> None:
    """One JSON line per image: the file and its objects (label, score, box x0 y0 x1 y1 in its
    pixels); --out DIR also writes each image with its boxes drawn and the JSON beside it."""
    for image in args.images:
        if not Path(image).is_file():
            raise UserError(f"{image} not found: give image files (PNG, JPEG, ...)")
    pipeline = detector(args, "detect")
    found = pipeline.detect(args.images, threshold=args.threshold, batch_size=args.batch_size)
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    for n, (image, objects) in enumerate(zip(args.images, found, strict=True)):
        record = {"file": image, "objects": [o.to_dict() for o in objects]}
        print(json.dumps(record, ensure_ascii=False))
        if out is not None:
            stem = Path(image).stem
            stem = f"{stem}-{n + 1}" if stem in seen else stem  # two files of one name
            seen.add(stem)
            _write_drawn(image, objects, record, out / stem)
    if out is not None:
        print(f"wrote {len(found)} drawn image(s) and their JSON to {out}")


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
    p = sub.add_parser(
        "detect", help="object detection: the objects in each image, with boxes (JSON, pictures)"
    )
    p.add_argument("model_dir")
    p.add_argument("images", nargs="+", help="image files (any size; resized to the model's)")
    add_flag(
        p,
        "--threshold",
        type=float,
        default=0.5,
        bounds=PROBABILITY,
        give="a probability",
        help="report objects whose probability is at least this (default 0.5)",
    )
    p.add_argument(
        "--out", help="also write each image with its boxes drawn (PNG) and its JSON to this folder"
    )
    add_flag(
        p,
        "--batch-size",
        type=int,
        default=64,
        bounds=Bounds(ge=1),
        give="a number of images",
        help="images run together (default 64)",
    )
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_detect)
