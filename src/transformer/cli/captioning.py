"""`transformer caption`, `evaluate --images` for a captioner and `attention --image` for one: image
captioning with an encoder-decoder over an image encoder (objective caption); the parser beside the
handler."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..config import CAPTION_SETTINGS, Bounds
from .common import (
    UserError,
    add_decode_args,
    add_device_args,
    add_flag,
    add_precision_arg,
    check_output,
    decode_overrides,
    load_pipeline,
    write_text,
)

SEARCH = ("beam_size", "length_penalty", "length_penalty_kind")
"""The decoding settings evaluate takes."""


def is_captioner_dir(path: str) -> bool:
    """Whether a model directory's config.json is an image captioner's (arch encoder-decoder with
    [model.vision]); False for anything unreadable (its own command then says what is wrong)."""
    file = Path(path) / "config.json"  # model.io.CONFIG_FILE
    try:
        values = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(values, dict)
        and values.get("arch") == "encoder-decoder"
        and values.get("vision") is not None
    )


def what_model(pipeline) -> tuple[str, str]:
    """(what the model is, the command that uses it) for a model that is not a captioner."""
    from ..model.transformer import DecoderOnly, EncoderDecoder, EncoderOnly

    model, cfg = pipeline.model, pipeline.model.config
    if cfg.detection is not None:
        return "an object detector", "detect"
    if cfg.audio is not None:
        return "a speech model", "transcribe"
    if getattr(pipeline, "pixels", None) is not None:
        return "an image generator", "generate --image"
    if isinstance(model, DecoderOnly):
        return "a language model", "generate"
    if isinstance(model, EncoderDecoder):
        return "a translation model", "translate"
    if isinstance(model, EncoderOnly) and cfg.vision is not None:
        return "an image classifier", "classify"
    return "an encoder", "classify"


def captioner(args: argparse.Namespace, command: str):
    """The model directory as a Pipeline, which must be an image captioner."""
    from ..decoding.caption import is_captioner

    pipeline = load_pipeline(args, command)
    if not is_captioner(pipeline.model):
        kind, use = what_model(pipeline)
        raise UserError(f"this is {kind}: use {use}, not {command}")
    return pipeline


def cmd_caption(args: argparse.Namespace) -> None:
    """A caption per image: the caption alone for one file, `file<TAB>caption` per line for
    several (or a folder); --json: a JSON object per file."""
    from .decoding import image_files

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


def evaluate_captions(args: argparse.Namespace) -> None:
    """`evaluate --images SPLIT` for a captioner: exact match and chrF of its captions against the
    images' label names (decode.json's search, or --beam-size); --output writes the captions."""
    from ..evaluation.captions import score_captions

    given = [
        flag
        for flag, value in (
            ("--text", args.text), ("--src", args.src), ("--ref", args.ref), ("--tsv", args.tsv),
            ("--pairs", args.pairs), ("--squad", args.squad), ("--audio", args.audio),
            ("--detection", args.detection), ("--plot", args.plot),
        )
        if value
    ]  # fmt: skip
    if given:
        raise UserError(
            f"give --images (a captioner's exact match and chrF) alone, without {given[0]}"
        )
    if not Path(args.images).exists():
        raise UserError(
            f"--images {args.images} not found: give a prepared split (.safetensors) or a folder "
            "of class folders"
        )
    if args.output:
        check_output(args.output)
    pipeline = captioner(args, "evaluate")
    scores, captions, _ = score_captions(pipeline, args.images, **decode_overrides(args, SEARCH))
    if args.output:
        write_text(args.output, captions)
    hits = round(scores.exact_match * scores.n)
    print(
        f"exact match {scores.exact_match:.2%} ({hits:,} of {scores.n:,} images of {args.images})"
    )
    print(scores.chrf_line)


def caption_attention(args: argparse.Namespace, pipeline, head) -> None:
    """`attention --image` for a captioner: the caption and, per token, the cross-attention of one
    decoder layer over the image."""
    import torch

    from ..data.images import read_image_resized
    from ..viz.caption_attention import caption_attention as attention
    from ..viz.caption_attention import plot_caption_attention

    v = pipeline.model.config.vision
    array, _ = read_image_resized(args.image, "L" if v.channels == 1 else "RGB", v.image_size)
    m = attention(pipeline, torch.from_numpy(array), args.layer, head, args.beam_size)
    heads = f"mean of {m.n_heads} heads" if m.head == "mean" else f"head {m.head}"
    what = f"cross-attention per caption token, layer {m.layer} of 0-{m.n_layers - 1}, {heads}"
    plot_caption_attention(m, args.out, title=f"{Path(args.image).name}: {m.text!r}\n{what}")
    print(f"wrote {args.out}: {what}")
    print(f"caption: {m.text}")


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
