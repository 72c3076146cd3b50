"""`transformer attention`: where a model looks, as a figure: a text's attention, an image's, a
caption's over its image, a detector's queries, a transcript's over the audio. The handler is
`attention`; its parser is derived from its signature (cli.args): the Figure to draw, then where to
run."""

from __future__ import annotations

import argparse
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from ..config import (
    ATTENTION_KINDS,
    DecodeConfig,
)
from ..files import check_picture
from .args import Arg, Setting, command
from .common import MODEL_DIR, UserError, Where


@dataclass(frozen=True)
class Figure:
    """What `attention` draws: the model directory, one input (--text, --image or --audio), the
    figure's file and which attention (layer, head, kind, the search that makes the output)."""

    model_dir: MODEL_DIR
    out: Annotated[str, Arg("the image to write (.png, .svg or .pdf)")]
    text: Annotated[
        str | None, Arg("the sentence to translate (or the prompt, for a language model)")
    ] = None
    image: Annotated[
        str | None,
        Arg(
            "an image file, for an image encoder: [CLS] attention per head and the rollout; for a "
            "detector: each object's query's cross-attention (--detection); for a captioner: each "
            "caption token's cross-attention over the image"
        ),
    ] = None
    audio: Annotated[
        str | None,
        Arg("a WAV file, for a speech model: the cross-attention over its spectrogram"),
    ] = None
    detection: Annotated[
        bool,
        Arg(
            "with --image, for a detector: each detected object's query, its cross-attention over "
            "the image and its box (a detector given --image does this anyway)"
        ),
    ] = False
    threshold: Annotated[
        float | None, Setting(DecodeConfig, note="--detection: the objects drawn")
    ] = None
    layer: Annotated[int, Arg("layer, counted from 0 (default -1: the last)")] = -1
    head: Annotated[
        str, Arg("head number (from 0), mean or all (one panel per head; default mean)")
    ] = "mean"
    kind: Annotated[
        Literal[ATTENTION_KINDS] | None,
        Arg(
            "cross: output over source (default for translation); self: decoder over its inputs "
            "(the only kind for language models); encoder: source over source"
        ),
    ] = None
    beam_size: Annotated[
        int | None,
        Setting(
            DecodeConfig, note="default: decode.json for translation, greedy for language models"
        ),
    ] = None


def attention(figure: Figure, where: Where) -> None:
    """Decode one text and plot one layer's attention weights as a heatmap (last layer, mean over
    heads by default), or an image encoder's [CLS] attention."""
    if importlib.util.find_spec("matplotlib") is None:
        raise UserError(
            "plotting needs matplotlib: pip install matplotlib (or the project's [viz] extra)"
        )
    from ..decoding.pipeline import Pipeline, pick_device
    from ..tasks import TASKS
    from ..viz.views import View

    if Path(figure.out).is_dir():
        raise UserError(
            f"--out {figure.out} is a directory: give an image file name (.png, .svg or .pdf)"
        )
    check_picture("--out", figure.out, "the heatmap", dir_exists=False)
    head = figure.head
    if head not in ("mean", "all"):
        try:
            head = int(head)
        except ValueError:
            raise UserError(f"--head {head}: give a head number (from 0), mean or all") from None
    if sum(x is not None for x in (figure.text, figure.image, figure.audio)) != 1:
        raise UserError(
            "give --text (a sentence or prompt), --image (for an image encoder or a detector) or "
            "--audio (for a speech model), one of them"
        )
    if figure.detection and figure.image is None:
        raise UserError("--detection draws where a detector's object queries look: give --image")
    pipeline = Pipeline.load(figure.model_dir, pick_device(where.device, where.threads))
    detector = pipeline.model.config.detection is not None
    if figure.detection and not detector:
        raise UserError(
            f"--detection needs an object detector and {figure.model_dir} is not one (no "
            "[model.detection]): drop --detection"
        )
    if figure.threshold is not None and not detector:
        raise UserError("--threshold is for a detector's objects (--detection): drop it")
    task = pipeline.task
    drawn = task.attention
    if drawn is None:
        having = " or ".join(t.described for t in TASKS.values() if t.attention is not None)
        raise UserError(f"this is {task.described}: attention draws the attention of {having}")
    given, value = next(
        (flag, value)
        for flag, value in (
            ("--text", figure.text),
            ("--image", figure.image),
            ("--audio", figure.audio),
        )
        if value is not None
    )
    if given != drawn.flag:
        raise UserError(f"this is {task.described}: give {drawn.give}, not {given}")
    view = View(figure.out, figure.layer, head, figure.kind, figure.beam_size, figure.threshold)
    for line in drawn.draw(pipeline, value, view):
        print(line)


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer attention`."""
    command(
        sub,
        "attention",
        attention,
        help="plot a heatmap of the attention weights while decoding a text",
    )
