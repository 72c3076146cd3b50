"""`transformer generate`: continue a prompt with a language model (or answer it with --chat), or
generate images with an image generator. The decoding flags are derived from DecodeConfig's
settings."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from ..config import (
    IMAGE_SAMPLING_SETTINGS,
    SAMPLING_SETTINGS,
    DecodeConfig,
    settings_of,
)
from ..config.decode import REPETITION_SETTINGS
from ..data.lines import note
from ..files import check_output
from .args import Arg, Setting, Settings, command
from .common import POSITIVE, ModelRun, UserError, load_pipeline

GENERATE = (*SAMPLING_SETTINGS, "beam_size")
"""The decoding settings generate takes (a language model samples unless --beam is given)."""


IMAGES = "images (a model trained with objective image_lm)"
"""The --help section of generate --image's flags."""
SAMPLING = tuple(name for name in SAMPLING_SETTINGS if name not in REPETITION_SETTINGS)
"""The settings only sampling takes (the repetition guards apply to beam search too)."""


PROMPT = Annotated[str | None, Arg("the text to continue (or the question, with --chat)")]
PREFIX = Annotated[
    str | None,
    Arg("an encoder-decoder (text-to-text) model: put this task prefix before the prompt"),
]
DECODE = Annotated[
    dict,
    Settings(
        DecodeConfig,
        GENERATE,
        notes={"beam_size": "beam search with this width instead of sampling"},
    ),
]
LABEL = Annotated[str | None, Arg("the class to draw (a class-conditional model)", group=IMAGES)]
TEXT = Annotated[str | None, Arg("the name to draw (a model conditioned on names)", group=IMAGES)]
GUIDANCE_SCALE = Annotated[
    float | None,
    Setting(DecodeConfig, note="default from the model's decode.json", group=IMAGES),
]
N = Annotated[
    int | None,
    Arg("how many images (default 16)", POSITIVE, "a number of images", group=IMAGES),
]
COMPILE = Annotated[str | None, Setting(DecodeConfig, note="default from the model's decode.json")]
PER_ROW = Annotated[
    int,
    Arg("images per row of the grid (default 8)", POSITIVE, "a number of images", group=IMAGES),
]


def generate(
    run: ModelRun,
    prompt: PROMPT = None,
    prefix: PREFIX = None,
    chat: Annotated[bool, Arg("apply the model's chat template (imported chat models)")] = False,
    decode: DECODE = None,
    seed: Annotated[int | None, Arg("random seed, for reproducible samples")] = None,
    image: Annotated[bool, Arg("sample images instead of text", group=IMAGES)] = False,
    label: LABEL = None,
    text: TEXT = None,
    guidance_scale: GUIDANCE_SCALE = None,
    n: N = None,
    per_row: PER_ROW = 8,
    out: Annotated[str | None, Arg("the grid of sampled images, a .png file", group=IMAGES)] = None,
    compile: COMPILE = None,
) -> None:
    """Continue a prompt with a language model (or answer it with --chat); an encoder-decoder
    (text-to-text) model answers it as translate would, after --prefix."""
    from ..model.transformer import EncoderDecoder

    decode = decode or {}
    image_flags = [
        flag
        for flag, value in (("--label", label), ("--text", text), ("--n", n))
        if value is not None
    ] + (["--out"] if out else [])
    if image:
        if guidance_scale is not None:
            decode = {**decode, "guidance_scale": guidance_scale}
        images = Images(label, text, n, per_row, out)
        return _generate_images(run, images, prompt, prefix, chat, seed, decode)
    if guidance_scale is not None:
        image_flags.append("--guidance-scale")
    if image_flags:
        raise UserError(f"{', '.join(image_flags)}: these are for images; add --image")
    if prompt is None:
        raise UserError("give --prompt TEXT (or --image, for a model that generates images)")
    pipeline = load_pipeline(run, "generate", compile=compile)
    if pipeline.pixels is not None:
        raise UserError("this model generates images: use --image (and --label or --text)")
    if isinstance(pipeline.model, EncoderDecoder):
        flags = {name: f.metadata["flag"] for name, f in settings_of(DecodeConfig).items()}
        sampling = [flags[name] for name in SAMPLING if name in decode]
        sampling += (["--seed"] if seed is not None else []) + (["--chat"] if chat else [])
        if sampling:
            raise UserError(
                f"{', '.join(sampling)}: an encoder-decoder answers with beam search (--beam) as "
                "translate does; sampling and chat are for language models"
            )
        cut = f"the prompt was cut to the model's {pipeline.max_source_tokens} tokens"
        print(
            pipeline.translate(
                [(prefix or "") + prompt],
                **{k: v for k, v in decode.items() if k in ("beam_size", *REPETITION_SETTINGS)},
                on_truncate=lambda _: note("generate", cut),
            )[0]
        )
        return
    if prefix:
        raise UserError(
            "--prefix names a text-to-text model's task: it is for encoder-decoder models"
        )
    print(
        pipeline.generate(
            prompt,
            chat=chat,
            seed=seed,
            **decode,
            on_truncate=lambda message: note("generate", message),
        )
    )


@dataclass(frozen=True)
class Images:
    """What generate --image draws: of --label or --text (or unconditional), --n of them,
    --per-row to a row of the grid written to --out."""

    label: str | None
    text: str | None
    n: int | None
    per_row: int
    out: str | None


def _generate_images(
    run: ModelRun,
    images: Images,
    prompt: str | None,
    prefix: str | None,
    chat: bool,
    seed: int | None,
    decode: dict,
) -> None:
    """Sample --n images (of --label, of --text, or unconditional) into a grid PNG (--out)."""
    from ..decoding.inputs import PipelineError
    from ..viz.samples import image_grid

    for flag, value in (("--prompt", prompt), ("--prefix", prefix)):
        if value is not None:
            raise UserError(f"{flag} is for text: an image is generated from --label or --text")
    if chat or "beam_size" in decode:
        raise UserError("--chat and --beam are for text: images are sampled")
    flags = {name: f.metadata["flag"] for name, f in settings_of(DecodeConfig).items()}
    given = [
        flags[name] for name in GENERATE if name not in IMAGE_SAMPLING_SETTINGS and name in decode
    ]
    if given:
        raise UserError(f"{', '.join(given)}: for text; an image has a fixed number of pixels")
    if not images.out:
        raise UserError("give --out FILE.png: the sampled images are written there as a grid")
    check_output(images.out)
    if Path(images.out).suffix.lower() != ".png":
        raise UserError(f"--out {images.out}: write the grid as a .png file")
    n = 16 if images.n is None else images.n
    pipeline = load_pipeline(run, "generate")
    try:
        drawn = pipeline.generate_images(
            n,
            images.label,
            images.text,
            seed,
            **{k: v for k, v in decode.items() if k in IMAGE_SAMPLING_SETTINGS},
        )
    except PipelineError as e:
        raise UserError(str(e)) from None
    per_row = min(n, images.per_row)
    image_grid(drawn, per_row, out=images.out)
    what = f"of {images.label!r}" if images.label else f"of {images.text!r}" if images.text else ""
    print(f"wrote {n} image(s) {what} to {images.out}".replace("  ", " "))


def register(sub: argparse._SubParsersAction) -> None:
    """`transformer generate`."""
    command(
        sub,
        "generate",
        generate,
        help="continue a prompt with a language model directory (or answer it with a text-to-text "
        "model), or sample images (--image) from an image generator",
    )
