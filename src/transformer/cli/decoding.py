"""`transformer translate`, `generate`, `classify` and `backtranslate`: each command's parser beside
its handler.

The decoding flags are derived from DecodeConfig's settings (common.add_decode_args), and each
command's list of them is written once: it makes the flags and picks the overrides.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import (
    IMAGE_SAMPLING_SETTINGS,
    SAMPLING_SETTINGS,
    TRANSLATE_SETTINGS,
    DecodeConfig,
    settings_of,
)
from ..config.decode import REPETITION_SETTINGS
from .common import (
    AT_LEAST_0,
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
    read_text,
    write_text,
)
from .lines import format_lines, read_lines, stream_lines

TRANSLATE = TRANSLATE_SETTINGS
GENERATE = (*SAMPLING_SETTINGS, "beam_size")
"""The decoding settings generate takes (a language model samples unless --beam is given)."""
SAMPLING = tuple(name for name in SAMPLING_SETTINGS if name not in REPETITION_SETTINGS)
"""The settings only sampling takes (the repetition guards apply to beam search too)."""


def cmd_translate(args: argparse.Namespace) -> None:
    """Translate lines (stdin or --input) into detokenised lines (stdout or --output), in input
    order.

    A file is translated in length-sorted batches. Standard input is translated as it arrives:
    what is waiting is batched, and each line typed at a terminal is answered at once. Lines
    longer than the model takes are truncated, and a note on stderr says which.
    """
    from ..decoding.pipeline import truncation_note
    from ..model.transformer import EncoderDecoder

    if args.output not in (None, "-"):
        check_output(args.output)
    if args.n_best is not None and args.beam_size is not None and args.n_best > args.beam_size:
        raise UserError(
            f"--n-best {args.n_best} is more than --beam {args.beam_size}: a beam returns at most "
            f"as many hypotheses as it keeps; give --beam {args.n_best} or more"
        )
    pipeline = load_pipeline(args, "translate")
    # checked before reading any input: stdin may be empty or slow
    if not isinstance(pipeline.model, EncoderDecoder):
        raise UserError("this is a language model: use generate, not translate")
    decode = decode_overrides(args, TRANSLATE)
    n_best = decode.get("n_best", pipeline.decode.n_best)
    beam = decode.get("beam_size", pipeline.decode.beam_size)
    # both flags together were checked above: here one of the two is the model's default
    if n_best > beam:
        if "n_best" in decode:
            raise UserError(
                f"--n-best {n_best} is more than the model's beam size {beam} (decode.json): "
                f"give --beam {n_best} or more"
            )
        raise UserError(
            f"--beam {beam} is less than the model's n_best={n_best} (decode.json): give --n-best "
            f"{beam}"
        )
    cut: list[int] = []
    done = 0

    def translate(lines: list[str]) -> list[str]:
        nonlocal done
        first = done
        if args.prefix:  # a text-to-text model's task; blank lines stay blank
            lines = [args.prefix + line if line.strip() else line for line in lines]
        outputs = pipeline.translate(
            lines,
            batch_tokens=args.batch_tokens,
            **decode,
            on_truncate=lambda numbers: cut.extend(first + n for n in numbers),
        )
        done += len(lines)
        # an empty line has no hypotheses: n_best empty ones keep n_best lines per line
        if n_best > 1:
            return [
                f"{first + i}\t{rank}\t{h}"
                for i, hyps in enumerate(outputs)
                for rank, h in enumerate(hyps or [""] * n_best, 1)
            ]
        return outputs

    if args.input not in (None, "-"):
        write_text(args.output, translate(read_lines(args.input, "--input")))
    elif args.output not in (None, "-"):
        write_text(args.output, [out for chunk in stream_lines() for out in translate(chunk)])
    else:
        for chunk in stream_lines():
            sys.stdout.write(format_lines(translate(chunk)))
            sys.stdout.flush()
    if cut:
        note("translate", truncation_note(cut, done, pipeline.max_source_tokens))


def add_batch_tokens_arg(p: argparse.ArgumentParser) -> None:
    """--batch-tokens of the commands that translate a file (translate, backtranslate)."""
    add_flag(
        p,
        "--batch-tokens",
        type=int,
        default=4000,
        bounds=POSITIVE,
        give="a positive number of tokens",
        help="source tokens per batch (default 4000)",
    )


def add_translate_parser(sub: argparse._SubParsersAction) -> None:
    """`transformer translate`."""
    p = sub.add_parser("translate", help="translate lines with an encoder-decoder model directory")
    p.add_argument("model_dir")
    add_decode_args(p, TRANSLATE)
    p.add_argument("--input", help="file of source lines (default: standard input)")
    p.add_argument("--output", help="file for the translations (default: standard output)")
    add_batch_tokens_arg(p)
    p.add_argument(
        "--prefix",
        help="put this before every input line: a text-to-text model's task, e.g. "
        "'translate Spanish to English: '",
    )
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_translate)


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


def add_generate_parser(sub: argparse._SubParsersAction) -> None:
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


def classify_lines(pipeline, lines: list[str], top_k: int, command: str) -> list:
    """Pipeline.classify over the non-blank lines (a blank line gets None), truncation noted on
    stderr."""
    from ..decoding.pipeline import truncation_note

    kept = [i for i, line in enumerate(lines) if line.strip()]
    cut: list[int] = []
    results = pipeline.classify([lines[i] for i in kept], top_k=top_k, on_truncate=cut.extend)
    if cut:
        limit = pipeline.model.config.max_positions - 2
        note(command, truncation_note([kept[n - 1] + 1 for n in cut], len(lines), limit))
    out: list = [None] * len(lines)
    for i, result in zip(kept, results, strict=True):
        out[i] = result
    return out


def cmd_classify(args: argparse.Namespace) -> None:
    """Label each line of text (stdin or --input): label<TAB>probability per line, the top K pairs
    with --top-k K."""
    if args.output not in (None, "-"):
        check_output(args.output)
    pipeline = load_pipeline(args, "classify")
    pairs = lambda r: "\t".join(f"{label}\t{p:.4f}" for label, p in r)  # noqa: E731
    if pipeline.model.config.vision is not None:
        if not args.input:
            raise UserError("give the images to classify: --input FILE... or a folder of them")
        files = image_files(args.input)
        results = pipeline.classify_images(files, top_k=args.top_k)
        write_text(
            args.output, [f"{file}\t{pairs(r)}" for file, r in zip(files, results, strict=True)]
        )
        return
    if args.input and len(args.input) > 1:
        raise UserError(f"--input takes one text file for a text classifier, not {len(args.input)}")
    lines = read_text(args.input[0] if args.input else None, "--input")
    results = classify_lines(pipeline, lines, args.top_k, "classify")
    write_text(args.output, ["" if r is None else pairs(r) for r in results])


def add_classify_parser(sub: argparse._SubParsersAction) -> None:
    """`transformer classify`."""
    p = sub.add_parser(
        "classify", help="label lines of text with an encoder classifier's model directory"
    )
    p.add_argument("model_dir")
    p.add_argument(
        "--input",
        nargs="+",
        help="file of texts, one per line (default: standard input); for an "
        "image classifier, image files or folders of them",
    )
    p.add_argument(
        "--output",
        help="file for label<TAB>probability lines (images: file<TAB>label<TAB>"
        "probability; default: standard output)",
    )
    add_flag(
        p,
        "--top-k",
        dest="top_k",
        type=int,
        default=1,
        bounds=AT_LEAST_0,
        give="a number of labels (0 = all)",
        help="label/probability pairs per line, most likely first (default 1; 0 = all labels)",
    )
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_classify)


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


# ---- backtranslate: synthetic pairs from monolingual target text (workflows.backtranslate) ----

BACKTRANSLATE = (
    *(name for name in TRANSLATE if name != "n_best"),
    *(name for name in SAMPLING if name != "max_new_tokens"),
)
"""backtranslate's decoding settings: one output per line, by search or sampling."""


def cmd_backtranslate(args: argparse.Namespace) -> None:
    """Translate monolingual target-language lines with a reverse model into aligned synthetic
    pairs (see transformer.workflows.backtranslate)."""
    from ..workflows.backtranslate import backtranslate, check_tag, search_kind

    decode = decode_overrides(args, BACKTRANSLATE)
    check_tag(args.tag)
    search = search_kind({"beam_size": 1, **decode})
    for flag, path in (("--out-src", args.out_src), ("--out-tgt", args.out_tgt)):
        if Path(path).is_dir() or not Path(path).resolve().parent.is_dir():
            raise UserError(f"{flag} {path}: give a file name in a directory that exists")
    if Path(args.out_src).resolve() == Path(args.out_tgt).resolve():
        raise UserError("--out-src and --out-tgt are the same file: give two file names")
    lines = read_lines(args.input, "--input")[: args.limit]
    if not any(line.strip() for line in lines):
        raise UserError(f"--input {args.input} has no text: give a file of sentences, one per line")
    from ..decoding.pipeline import truncation_note  # torch: checked all that needs no model
    from ..model.transformer import EncoderDecoder

    pipeline = load_pipeline(args, "backtranslate")
    if not isinstance(pipeline.model, EncoderDecoder):
        raise UserError(
            "this is a language model: back-translation needs an encoder-decoder trained from "
            "the target language to the source (e.g. configs/en-es.toml)"
        )

    def progress(report) -> None:
        rate = report.lines / max(report.seconds, 1e-9)
        left = (len(lines) - report.lines) / max(rate, 1e-9)
        when = f"about {left / 60:.0f} min left" if left >= 60 else f"{left:.0f} s left"
        note(
            "backtranslate", f"{report.lines:,} of {len(lines):,} lines, {rate:.1f} lines/s, {when}"
        )

    report = backtranslate(
        pipeline,
        lines,
        args.out_src,
        args.out_tgt,
        tag=args.tag,
        batch_tokens=args.batch_tokens,
        seed=args.seed,
        on_progress=progress,
        **decode,
    )
    if report.truncated:
        note(
            "backtranslate",
            truncation_note(report.truncated, report.lines, pipeline.max_source_tokens),
        )
    tagged = f", sources tagged {args.tag!r}" if args.tag else ""
    print(
        f"wrote {args.out_src} and {args.out_tgt}: {report.lines:,} pairs ({search}{tagged}, "
        f"{report.lines / max(report.seconds, 1e-9):.1f} lines/s); {report.blank:,} blank input "
        f"lines and {report.empty:,} empty translations written as pairs with an empty side, "
        "which training drops"
    )


def add_backtranslate_parser(sub: argparse._SubParsersAction) -> None:
    """`transformer backtranslate`."""
    p = sub.add_parser(
        "backtranslate",
        help="translate monolingual target-language text with a reverse model into aligned "
        "synthetic pairs (back-translation)",
    )
    p.add_argument("model_dir", help="a reverse model: English -> Spanish for Spanish -> English")
    p.add_argument("--input", required=True, help="file of target-language lines (e.g. English)")
    p.add_argument("--out-src", required=True, help="file for the synthetic sources (Spanish)")
    p.add_argument("--out-tgt", required=True, help="file for the input lines, unchanged")
    p.add_argument(
        "--tag",
        help="put this word and a space before every synthetic source, e.g. '<bt>' (tagged "
        "back-translation, Caswell et al. 2019)",
    )
    add_decode_args(
        p,
        BACKTRANSLATE,
        notes={
            "beam_size": "default 1, greedy, for speed; not the model's decode.json",
            **{
                name: "giving it samples instead of searching: Edunov et al. 2018"
                for name in ("temperature", "top_k", "top_p")
            },
        },
    )
    add_batch_tokens_arg(p)
    add_flag(
        p,
        "--limit",
        type=int,
        bounds=POSITIVE,
        give="a positive number of lines",
        help="translate only the first N lines of --input",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed of sampling (default 1)")
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_backtranslate)


def register(sub: argparse._SubParsersAction) -> None:
    """`translate`, `classify`, `generate` and `backtranslate`."""
    add_translate_parser(sub)
    add_classify_parser(sub)
    add_generate_parser(sub)
    add_backtranslate_parser(sub)
