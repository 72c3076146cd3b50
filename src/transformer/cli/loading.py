"""What the commands over a model directory share, below them: the image files a command was
given, and each family's check that the model directory is one of it (a captioner, a detector, a
speech model, a dual encoder) with the one-line error naming the command to use instead. Each
takes a ModelRun (a command's typed arguments) or the parsed flags (evaluate's parts)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .common import (
    ModelRun,
    UserError,
    load_pipeline,
)


def image_files(paths: list[str], flag: str = "--input") -> list[str]:
    """Image files named, and those inside named folders (recursively, sorted); errors name them
    after `flag` (empty: positional arguments)."""
    from ..data.images import IMAGE_SUFFIXES

    files = []
    for name in paths:
        path, named = Path(name), f"{flag} {name}".strip()
        if path.is_dir():
            found = sorted(str(f) for f in path.rglob("*") if f.suffix.lower() in IMAGE_SUFFIXES)
            if not found:
                raise UserError(f"{named} has no image file ({'/'.join(IMAGE_SUFFIXES)})")
            files += found
        elif path.is_file():
            files.append(name)
        else:
            raise UserError(f"{named} not found: give image files or folders of them")
    return files


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


def captioner(args: argparse.Namespace | ModelRun, command: str):
    """The model directory as a Pipeline, which must be an image captioner."""
    from ..decoding.caption import is_captioner

    pipeline = load_pipeline(args, command)
    if not is_captioner(pipeline.model):
        kind, use = what_model(pipeline)
        raise UserError(f"this is {kind}: use {use}, not {command}")
    return pipeline


def detector(args: argparse.Namespace | ModelRun, command: str):
    from ..model.detection import DetectionTransformer

    pipeline = load_pipeline(args, command)
    if not isinstance(pipeline.model, DetectionTransformer):
        raise UserError(
            f"{args.model_dir} is not a detector: {command} needs a model trained with objective "
            '= "detection" ([model.detection])'
        )
    return pipeline


def speech_pipeline(args: argparse.Namespace | ModelRun, command: str):
    pipeline = load_pipeline(args, command)
    if pipeline.model.config.audio is None:
        raise UserError(
            f"{args.model_dir} is not a speech model: {command} needs one that reads audio (import "
            'Whisper with transformer import-hf, or train one with objective = "speech")'
        )
    return pipeline


def is_contrastive(model_dir: str) -> bool:
    """Whether a model directory's config.json describes a dual encoder (False when unreadable:
    the other commands then say what is wrong with it)."""
    from ..model.io import ModelFileError
    from ..model_dir import load_config

    try:
        return load_config(model_dir).contrastive is not None
    except ModelFileError:
        return False


def dual_encoder(args: argparse.Namespace | ModelRun, command: str):
    pipeline = load_pipeline(args, command)
    if pipeline.model.config.contrastive is None:
        raise UserError(
            f"{args.model_dir} is not a dual encoder: {command} needs a model trained with "
            'objective = "contrastive" ([model.contrastive])'
        )
    return pipeline
