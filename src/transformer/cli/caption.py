"""`transformer caption`: image to text with an image captioner (objective caption). The handler
is `caption`; its parser is derived from its signature (cli.args), the decoding settings' flags
from DecodeConfig (CAPTION_SETTINGS)."""

from __future__ import annotations

import argparse
import json
from typing import Annotated

from ..config import CAPTION_SETTINGS, DecodeConfig
from .args import Arg, Setting, Settings, command
from .common import ModelRun
from .loading import captioner, image_files


def caption(
    run: ModelRun,
    images: Annotated[
        list[str],
        Arg("image files or folders of them (any size: resized to fit)", positional=True),
    ],
    as_json: Annotated[
        bool, Arg("print a JSON object per file: file, caption", flag="--json")
    ] = False,
    batch_size: Annotated[int | None, Setting(DecodeConfig)] = None,
    decode: Annotated[dict, Settings(DecodeConfig, CAPTION_SETTINGS)] = None,
) -> None:
    """A caption per image: the caption alone for one file, `file<TAB>caption` per line for
    several (or a folder); --json: a JSON object per file."""
    files = image_files(images, flag="")
    pipeline = captioner(run, "caption")
    captions = pipeline.caption(files, batch_size=batch_size, **(decode or {}))
    for path, text in zip(files, captions, strict=True):
        if as_json:
            print(json.dumps({"file": path, "caption": text}, ensure_ascii=False))
        else:
            print(text if len(files) == 1 else f"{path}\t{text}")


def register(sub: argparse._SubParsersAction) -> None:
    """`caption`."""
    command(sub, "caption", caption, help="image to text: a caption of each image file")
