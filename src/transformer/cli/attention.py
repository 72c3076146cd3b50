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
from .args import Arg, Setting, command
from .common import (
    MODEL_DIR,
    UserError,
    Where,
    check_picture,
    pick_device,
)


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
    from ..decoding.caption import is_captioner
    from ..decoding.pipeline import Pipeline
    from ..viz.attention import attention_map, plot_attention

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
    if detector and figure.image is None:
        raise UserError("this is an object detector: give --image FILE, not --text or --audio")
    if detector:
        return _detection_attention(figure, pipeline)
    if figure.image is not None and is_captioner(pipeline.model):
        return caption_attention(figure, pipeline, head)
    if figure.image is not None:
        return _image_attention(figure, pipeline)
    if figure.audio is not None:
        return _audio_attention(figure, pipeline, head)
    if pipeline.model.config.audio is not None:
        raise UserError("this is a speech model: give --audio FILE.wav, not --text")
    if pipeline.model.config.vision is not None:
        raise UserError("this is an image encoder: give --image FILE, not --text")
    m = attention_map(
        pipeline,
        figure.text,
        layer=figure.layer,
        kind=figure.kind,
        head=head,
        beam_size=figure.beam_size,
    )
    plot_attention(m.weights, m.columns, m.rows, figure.out, title=m.title)
    print(f"wrote {figure.out}: {m.title}")
    if m.kind != "encoder":
        print(f"output: {m.output_text}")


def _image_attention(figure: Figure, pipeline) -> None:
    """An image encoder's [CLS] attention per head of one layer, and the rollout over all layers."""
    import torch

    from ..data.images import read_image, to_pixels
    from ..viz.image_attention import image_attention, plot_image_attention

    v = pipeline.model.config.vision
    if v is None:
        raise UserError("this model reads text: give --text, not --image")
    image = torch.from_numpy(
        read_image(figure.image, "L" if v.channels == 1 else "RGB", v.image_size)
    )
    device = next(pipeline.model.parameters()).device
    maps = image_attention(
        pipeline.model, to_pixels(image[None]).to(device), figure.layer, pipeline.labels
    )
    guess = ", ".join(f"{label} {p:.1%}" for label, p in maps.probabilities)
    layers = f"layer {maps.layer} of 0-{maps.n_layers - 1}"
    title = f"{Path(figure.image).name}: [CLS] attention, {layers}, and rollout" + (
        f"\nmodel: {guess}" if guess else ""
    )
    plot_image_attention(image, maps, figure.out, title=title)
    print(
        f"wrote {figure.out}: [CLS] attention per head, {layers}, and the rollout over all layers"
        + (f"; model: {guess}" if guess else "")
    )


def _detection_attention(figure: Figure, pipeline) -> None:
    """A detector's objects and where each one's query looked, in one decoder layer."""
    import torch

    from ..data.images import read_image_resized, to_pixels
    from ..viz.detection_attention import MAX_PANELS, detection_attention, plot_detection_attention

    d = pipeline.model.config.detection
    array, _ = read_image_resized(figure.image, "L" if d.channels == 1 else "RGB", d.image_size)
    image = torch.from_numpy(array)
    device = next(pipeline.model.parameters()).device
    threshold = pipeline.settings(
        **({} if figure.threshold is None else {"threshold": figure.threshold})
    ).threshold
    result = detection_attention(
        pipeline.model, to_pixels(image[None]).to(device), pipeline.labels, threshold, figure.layer
    )
    layers = f"layer {result.layer} of 0-{result.n_layers - 1}"
    what = f"cross-attention of each object's query, {layers}, mean of {result.n_heads} heads"
    title = f"{Path(figure.image).name}: {what}"
    plot_detection_attention(result, image, figure.out, title=title, labels=pipeline.labels)
    n = len(result.objects)
    found = (
        f"{n} object(s) at or above {threshold:g}"
        + (f", the {MAX_PANELS} most likely drawn" if n > MAX_PANELS else "")
        if n
        else f"no object at or above {threshold:g} (the best scored {result.best:.2f})"
    )
    print(f"wrote {figure.out}: {what}; {found}")


def _audio_attention(figure: Figure, pipeline, head) -> None:
    """A speech model's cross-attention over the spectrogram of one WAV file."""
    from ..data.audio import read_wav
    from ..viz.audio_attention import audio_attention, plot_audio_attention

    if pipeline.model.config.audio is None:
        raise UserError("this model reads text: give --text, not --audio")
    m = audio_attention(pipeline, read_wav(figure.audio), figure.layer, head, figure.beam_size)
    heads = {"mean": f"mean of {m.n_heads} heads", "all": f"{m.n_heads} heads"}.get(
        m.head, f"head {m.head}"
    )
    what = f"cross-attention, layer {m.layer} of 0-{m.n_layers - 1}, {heads}"
    plot_audio_attention(m, figure.out, title=f"{Path(figure.audio).name}: {what}")
    print(f"wrote {figure.out}: {what}")
    print(f"output: {m.text}")


def caption_attention(figure: Figure, pipeline, head) -> None:
    """`attention --image` for a captioner: the caption and, per token, the cross-attention of one
    decoder layer over the image."""
    import torch

    from ..data.images import read_image_resized
    from ..viz.caption_attention import caption_attention as attention
    from ..viz.caption_attention import plot_caption_attention

    v = pipeline.model.config.vision
    array, _ = read_image_resized(figure.image, "L" if v.channels == 1 else "RGB", v.image_size)
    m = attention(pipeline, torch.from_numpy(array), figure.layer, head, figure.beam_size)
    heads = f"mean of {m.n_heads} heads" if m.head == "mean" else f"head {m.head}"
    what = f"cross-attention per caption token, layer {m.layer} of 0-{m.n_layers - 1}, {heads}"
    plot_caption_attention(m, figure.out, title=f"{Path(figure.image).name}: {m.text!r}\n{what}")
    print(f"wrote {figure.out}: {what}")
    print(f"caption: {m.text}")


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer attention`."""
    command(
        sub,
        "attention",
        attention,
        help="plot a heatmap of the attention weights while decoding a text",
    )
