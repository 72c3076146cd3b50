"""`transformer generate`: continue a prompt with a language model (or answer it with --chat), or
generate images with an image generator. The decoding flags are derived from DecodeConfig's
settings."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import (
    IMAGE_SAMPLING_SETTINGS,
    SAMPLING_SETTINGS,
    DecodeConfig,
    settings_of,
)
from ..config.decode import REPETITION_SETTINGS
from .common import (
    POSITIVE,
    UserError,
    add_decode_args,
    add_device_args,
    add_flag,
    add_precision_arg,
    check_output,
    decode_overrides,
    load_pipeline,
    note,
)

GENERATE = (*SAMPLING_SETTINGS, "beam_size")
"""The decoding settings generate takes (a language model samples unless --beam is given)."""


SAMPLING = tuple(name for name in SAMPLING_SETTINGS if name not in REPETITION_SETTINGS)
"""The settings only sampling takes (the repetition guards apply to beam search too)."""


def cmd_generate(args: argparse.Namespace) -> None:
    """Continue a prompt with a language model (or answer it with --chat); an encoder-decoder
    (text-to-text) model answers it as translate would, after --prefix."""
    from ..model.transformer import EncoderDecoder

    image_flags = [
        flag
        for flag, value in (("--label", args.label), ("--text", args.text), ("--n", args.n))
        if value is not None
    ] + (["--out"] if args.out else [])
    if args.image:
        return _generate_images(args)
    if args.guidance_scale is not None:
        image_flags.append("--guidance-scale")
    if image_flags:
        raise UserError(f"{', '.join(image_flags)}: these are for images; add --image")
    if args.prompt is None:
        raise UserError("give --prompt TEXT (or --image, for a model that generates images)")
    pipeline = load_pipeline(args, "generate")
    if pipeline.pixels is not None:
        raise UserError("this model generates images: use --image (and --label or --text)")
    if isinstance(pipeline.model, EncoderDecoder):
        flags = {name: f.metadata["flag"] for name, f in settings_of(DecodeConfig).items()}
        sampling = [flags[name] for name in SAMPLING if getattr(args, name) is not None]
        sampling += (["--seed"] if args.seed is not None else []) + (
            ["--chat"] if args.chat else []
        )
        if sampling:
            raise UserError(
                f"{', '.join(sampling)}: an encoder-decoder answers with beam search (--beam) as "
                "translate does; sampling and chat are for language models"
            )
        cut = f"the prompt was cut to the model's {pipeline.max_source_tokens} tokens"
        print(
            pipeline.translate(
                [(args.prefix or "") + args.prompt],
                **decode_overrides(args, ("beam_size", *REPETITION_SETTINGS)),
                on_truncate=lambda _: note("generate", cut),
            )[0]
        )
        return
    if args.prefix:
        raise UserError(
            "--prefix names a text-to-text model's task: it is for encoder-decoder models"
        )
    print(
        pipeline.generate(
            args.prompt,
            chat=args.chat,
            seed=args.seed,
            **decode_overrides(args, GENERATE),
            on_truncate=lambda message: note("generate", message),
        )
    )


def _generate_images(args: argparse.Namespace) -> None:
    """Sample --n images (of --label, of --text, or unconditional) into a grid PNG (--out)."""
    from ..decoding.pipeline import PipelineError
    from ..viz.samples import image_grid

    for flag, value in (("--prompt", args.prompt), ("--prefix", args.prefix)):
        if value is not None:
            raise UserError(f"{flag} is for text: an image is generated from --label or --text")
    if args.chat or args.beam_size is not None:
        raise UserError("--chat and --beam are for text: images are sampled")
    flags = {name: f.metadata["flag"] for name, f in settings_of(DecodeConfig).items()}
    given = [
        flags[name]
        for name in GENERATE
        if name not in IMAGE_SAMPLING_SETTINGS and getattr(args, name) is not None
    ]
    if given:
        raise UserError(f"{', '.join(given)}: for text; an image has a fixed number of pixels")
    if not args.out:
        raise UserError("give --out FILE.png: the sampled images are written there as a grid")
    check_output(args.out)
    if Path(args.out).suffix.lower() != ".png":
        raise UserError(f"--out {args.out}: write the grid as a .png file")
    n = 16 if args.n is None else args.n
    pipeline = load_pipeline(args, "generate")
    try:
        images = pipeline.generate_images(
            n, args.label, args.text, args.seed, **decode_overrides(args, IMAGE_SAMPLING_SETTINGS)
        )
    except PipelineError as e:
        raise UserError(str(e)) from None
    per_row = min(n, args.per_row)
    image_grid(images, per_row, out=args.out)
    what = f"of {args.label!r}" if args.label else f"of {args.text!r}" if args.text else ""
    print(f"wrote {n} image(s) {what} to {args.out}".replace("  ", " "))


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer generate`."""
    p = sub.add_parser(
        "generate",
        help="continue a prompt with a language model directory (or answer it "
        "with a text-to-text model), or sample images (--image) from an image generator",
    )
    p.add_argument("model_dir")
    p.add_argument("--prompt", help="the text to continue (or the question, with --chat)")
    p.add_argument(
        "--prefix",
        help="an encoder-decoder (text-to-text) model: put this task prefix before the prompt",
    )
    p.add_argument(
        "--chat", action="store_true", help="apply the model's chat template (imported chat models)"
    )
    add_decode_args(
        p, GENERATE, notes={"beam_size": "beam search with this width instead of sampling"}
    )
    p.add_argument("--seed", type=int, help="random seed, for reproducible samples")
    images = p.add_argument_group("images (a model trained with objective image_lm)")
    images.add_argument("--image", action="store_true", help="sample images instead of text")
    images.add_argument("--label", help="the class to draw (a class-conditional model)")
    images.add_argument("--text", help="the name to draw (a model conditioned on names)")
    add_decode_args(images, ("guidance_scale",))
    add_flag(
        images,
        "--n",
        type=int,
        bounds=POSITIVE,
        give="a number of images",
        help="how many images (default 16)",
    )
    add_flag(
        images,
        "--per-row",
        type=int,
        default=8,
        bounds=POSITIVE,
        give="a number of images",
        help="images per row of the grid (default 8)",
    )
    images.add_argument("--out", help="the grid of sampled images, a .png file")
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_generate)
