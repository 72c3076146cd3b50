"""`transformer info` and `attention`: looking inside a model directory; parsers beside handlers."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from ..config import ATTENTION_KINDS
from .captioning import caption_attention
from .common import (
    POSITIVE,
    UserError,
    add_decode_args,
    add_device_args,
    add_flag,
    check_picture,
    setup_device,
)
from .detection import PROBABILITY


def cmd_info(args: argparse.Namespace) -> None:
    """Print a model directory's config, parameter count and FLOPs per token (or per image)."""
    from ..model.accounting import count_parameters, flops_per_image, flops_per_token
    from ..model_dir import load_config, load_model

    config = load_config(args.model_dir)
    model = load_model(args.model_dir)
    print(f"model directory: {args.model_dir}")
    print("config:")
    for key, value in config.to_dict().items():
        print(f"  {key} = {value}")
    total = count_parameters(model)
    print(f"parameters: {total:,} ({total / 1e6:.2f}M; tied matrices counted once)")
    if config.detection is not None:
        d, flops = config.detection, flops_per_image(config)
        print(
            f"FLOPs per image ({d.grid} x {d.grid} feature map from a {d.backbone} backbone, "
            f"{d.n_queries} object queries): forward {flops['forward']:,} "
            f"({flops['forward'] / 1e9:.3f} GFLOP), training {flops['training']:,} "
            f"({flops['training'] / 1e9:.3f} GFLOP)"
        )
        return
    if config.vision is not None:
        v, flops = config.vision, flops_per_image(config, caption_tokens=16)
        caption = " and a caption of 16 tokens" if config.arch == "encoder-decoder" else ""
        print(
            f"FLOPs per image ({v.n_patches} patches of {v.patch_size} x {v.patch_size} + [CLS]"
            f"{caption}): "
            f"forward {flops['forward']:,} ({flops['forward'] / 1e9:.3f} GFLOP), "
            f"training {flops['training']:,} ({flops['training'] / 1e9:.3f} GFLOP)"
        )
        return
    flops = flops_per_token(config, args.seq_len)
    print(
        f"FLOPs per token at sequence length {args.seq_len}: "
        f"forward {flops['forward']:,} ({flops['forward'] / 1e9:.3f} GFLOP), "
        f"training {flops['training']:,} ({flops['training'] / 1e9:.3f} GFLOP)"
    )


def add_info_parser(sub: argparse._SubParsersAction) -> None:
    """`transformer info`."""
    p = sub.add_parser("info", help="print a model directory's config, parameters and FLOPs/token")
    p.add_argument("model_dir")
    add_flag(
        p,
        "--seq-len",
        type=int,
        default=128,
        bounds=POSITIVE,
        give="a positive sequence length",
        help="sequence length for the FLOP count (default 128; an image model counts per image)",
    )
    p.set_defaults(func=cmd_info)


def cmd_attention(args: argparse.Namespace) -> None:
    """Decode one text and plot one layer's attention weights as a heatmap (last layer, mean over
    heads by default), or an image encoder's [CLS] attention."""
    if importlib.util.find_spec("matplotlib") is None:
        raise UserError(
            "plotting needs matplotlib: pip install matplotlib (or the project's [viz] extra)"
        )
    from ..decoding.caption import is_captioner
    from ..decoding.pipeline import Pipeline
    from ..viz.attention import attention_map, plot_attention

    if Path(args.out).is_dir():
        raise UserError(
            f"--out {args.out} is a directory: give an image file name (.png, .svg or .pdf)"
        )
    check_picture("--out", args.out, "the heatmap", dir_exists=False)
    head = args.head
    if head not in ("mean", "all"):
        try:
            head = int(head)
        except ValueError:
            raise UserError(f"--head {head}: give a head number (from 0), mean or all") from None
    if sum(x is not None for x in (args.text, args.image, args.audio)) != 1:
        raise UserError(
            "give --text (a sentence or prompt), --image (for an image encoder or a detector) or "
            "--audio (for a speech model), one of them"
        )
    if args.detection and args.image is None:
        raise UserError("--detection draws where a detector's object queries look: give --image")
    pipeline = Pipeline.load(args.model_dir, setup_device(args))
    detector = pipeline.model.config.detection is not None
    if args.detection and not detector:
        raise UserError(
            f"--detection needs an object detector and {args.model_dir} is not one (no "
            "[model.detection]): drop --detection"
        )
    if args.threshold is not None and not detector:
        raise UserError("--threshold is for a detector's objects (--detection): drop it")
    if detector and args.image is None:
        raise UserError("this is an object detector: give --image FILE, not --text or --audio")
    if detector:
        return _detection_attention(args, pipeline)
    if args.image is not None and is_captioner(pipeline.model):
        return caption_attention(args, pipeline, head)
    if args.image is not None:
        return _image_attention(args, pipeline)
    if args.audio is not None:
        return _audio_attention(args, pipeline, head)
    if pipeline.model.config.audio is not None:
        raise UserError("this is a speech model: give --audio FILE.wav, not --text")
    if pipeline.model.config.vision is not None:
        raise UserError("this is an image encoder: give --image FILE, not --text")
    m = attention_map(
        pipeline, args.text, layer=args.layer, kind=args.kind, head=head, beam_size=args.beam_size
    )
    plot_attention(m.weights, m.columns, m.rows, args.out, title=m.title)
    print(f"wrote {args.out}: {m.title}")
    if m.kind != "encoder":
        print(f"output: {m.output_text}")


def add_attention_parser(sub: argparse._SubParsersAction) -> None:
    """`transformer attention`."""
    p = sub.add_parser(
        "attention", help="plot a heatmap of the attention weights while decoding a text"
    )
    p.add_argument("model_dir")
    p.add_argument("--text", help="the sentence to translate (or the prompt, for a language model)")
    p.add_argument(
        "--image",
        help="an image file, for an image encoder: [CLS] attention per head and the rollout; for "
        "a detector: each object's query's cross-attention (--detection); for a captioner: each "
        "caption token's cross-attention over the image",
    )
    p.add_argument(
        "--audio",
        help="a WAV file, for a speech model: the cross-attention over its spectrogram",
    )
    p.add_argument(
        "--detection",
        action="store_true",
        help="with --image, for a detector: each detected object's query, its cross-attention "
        "over the image and its box (a detector given --image does this anyway)",
    )
    add_flag(
        p,
        "--threshold",
        type=float,
        bounds=PROBABILITY,
        give="a probability",
        help="--detection: draw the objects whose probability is at least this (default 0.5)",
    )
    p.add_argument("--out", required=True, help="the image to write (.png, .svg or .pdf)")
    p.add_argument(
        "--layer", type=int, default=-1, help="layer, counted from 0 (default -1: the last)"
    )
    p.add_argument(
        "--head",
        default="mean",
        help="head number (from 0), mean or all (one panel per head; default mean)",
    )
    p.add_argument(
        "--kind",
        choices=list(ATTENTION_KINDS),
        help="cross: output over source (default for translation); self: decoder over its inputs "
        "(the only kind for language models); encoder: source over source",
    )
    add_decode_args(
        p, ("beam_size",), note="default: decode.json for translation, greedy for language models"
    )
    add_device_args(p)
    p.set_defaults(func=cmd_attention)


def _image_attention(args: argparse.Namespace, pipeline) -> None:
    """An image encoder's [CLS] attention per head of one layer, and the rollout over all layers."""
    import torch

    from ..data.images import read_image, to_pixels
    from ..viz.image_attention import image_attention, plot_image_attention

    v = pipeline.model.config.vision
    if v is None:
        raise UserError("this model reads text: give --text, not --image")
    image = torch.from_numpy(
        read_image(args.image, "L" if v.channels == 1 else "RGB", v.image_size)
    )
    device = next(pipeline.model.parameters()).device
    maps = image_attention(
        pipeline.model, to_pixels(image[None]).to(device), args.layer, pipeline.labels
    )
    guess = ", ".join(f"{label} {p:.1%}" for label, p in maps.probabilities)
    layers = f"layer {maps.layer} of 0-{maps.n_layers - 1}"
    title = f"{Path(args.image).name}: [CLS] attention, {layers}, and rollout" + (
        f"\nmodel: {guess}" if guess else ""
    )
    plot_image_attention(image, maps, args.out, title=title)
    print(
        f"wrote {args.out}: [CLS] attention per head, {layers}, and the rollout over all layers"
        + (f"; model: {guess}" if guess else "")
    )


def _detection_attention(args: argparse.Namespace, pipeline) -> None:
    """A detector's objects and where each one's query looked, in one decoder layer."""
    import torch

    from ..data.images import read_image_resized, to_pixels
    from ..viz.detection_attention import MAX_PANELS, detection_attention, plot_detection_attention

    d = pipeline.model.config.detection
    array, _ = read_image_resized(args.image, "L" if d.channels == 1 else "RGB", d.image_size)
    image = torch.from_numpy(array)
    device = next(pipeline.model.parameters()).device
    threshold = 0.5 if args.threshold is None else args.threshold
    result = detection_attention(
        pipeline.model, to_pixels(image[None]).to(device), pipeline.labels, threshold, args.layer
    )
    layers = f"layer {result.layer} of 0-{result.n_layers - 1}"
    what = f"cross-attention of each object's query, {layers}, mean of {result.n_heads} heads"
    title = f"{Path(args.image).name}: {what}"
    plot_detection_attention(result, image, args.out, title=title, labels=pipeline.labels)
    n = len(result.objects)
    found = (
        f"{n} object(s) at or above {threshold:g}"
        + (f", the {MAX_PANELS} most likely drawn" if n > MAX_PANELS else "")
        if n
        else f"no object at or above {threshold:g} (the best scored {result.best:.2f})"
    )
    print(f"wrote {args.out}: {what}; {found}")


def _audio_attention(args: argparse.Namespace, pipeline, head) -> None:
    """A speech model's cross-attention over the spectrogram of one WAV file."""
    from ..data.audio import read_wav
    from ..viz.audio_attention import audio_attention, plot_audio_attention

    if pipeline.model.config.audio is None:
        raise UserError("this model reads text: give --text, not --audio")
    m = audio_attention(pipeline, read_wav(args.audio), args.layer, head, args.beam_size)
    heads = {"mean": f"mean of {m.n_heads} heads", "all": f"{m.n_heads} heads"}.get(
        m.head, f"head {m.head}"
    )
    what = f"cross-attention, layer {m.layer} of 0-{m.n_layers - 1}, {heads}"
    plot_audio_attention(m, args.out, title=f"{Path(args.audio).name}: {what}")
    print(f"wrote {args.out}: {what}")
    print(f"output: {m.text}")


def register(sub: argparse._SubParsersAction) -> None:
    """`info` and `attention`."""
    add_info_parser(sub)
    add_attention_parser(sub)
