"""`transformer caption`: image to text with an image captioner (objective caption)."""

from __future__ import annotations

import argparse
import json

from ..config import (
    CAPTION_SETTINGS,
    Bounds,
)
from .common import (
    add_decode_args,
    add_device_args,
    add_flag,
    add_precision_arg,
    decode_overrides,
)
from .loading import (
    captioner,
    image_files,
)


def cmd_caption(args: argparse.Namespace) -> None:
    """A caption per image: the caption alone for one file, `file<TAB>caption` per line for
    several (or a folder); --json: a JSON object per file."""
    files = image_files(args.images, flag="")
    pipeline = captioner(args, "caption")
    captions = pipeline.caption(
        files, batch_size=args.batch_size, **decode_overrides(args, CAPTION_SETTINGS)
    )
    for path, text in zip(files, captions, strict=True):
        if args.json:
            print(json.dumps({"file": path, "caption": text}, ensure_ascii=False))
        else:
            print(text if len(files) == 1 else f"{path}\t{text}")


def register(sub: argparse._SubParsersAction) -> None:
    """`caption`."""
    p = sub.add_parser("caption", help="image to text: a caption of each image file")
    p.add_argument("model_dir")
    p.add_argument(
        "images", nargs="+", help="image files or folders of them (any size: resized to fit)"
    )
    p.add_argument(
        "--json", action="store_true", help="print a JSON object per file: file, caption"
    )
    add_flag(
        p,
        "--batch-size",
        type=int,
        default=64,
        bounds=Bounds(ge=1),
        give="a number of images",
        help="images decoded together (default 64)",
    )
    add_decode_args(p, CAPTION_SETTINGS)
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_caption)
