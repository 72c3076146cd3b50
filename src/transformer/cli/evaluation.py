"""`transformer evaluate`: BLEU and chrF, perplexity, a classifier's scores or a text-to-text
model's scores per task; the parser beside the handler."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import (
    ANSWER_SETTINGS,
    DOCUMENT_KINDS,
    IMAGE_SAMPLING_SETTINGS,
    PAIR_METRICS,
    Bounds,
)
from ..data.text import DataError
from .captioning import evaluate_captions
from .classifier_report import evaluate_classifier
from .common import (
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
from .contrastive import evaluate_contrastive
from .perplexity import evaluate_perplexity

SEARCH = ("beam_size", "length_penalty", "length_penalty_kind")
"""The decoding settings evaluate takes."""
SPEECH_SEARCH = ("speech_head", "ctc_weight")
"""And with --audio."""


def cmd_evaluate(args: argparse.Namespace) -> None:
    """Score a model on what it is evaluated by: the table of tasks names each task's inputs
    (transformer.tasks: --src/--ref, --pairs, --text, --tsv, --images, --squad, --audio,
    --detection); the input given must be one of the model's task's."""
    from ..tasks import TASKS

    inputs = {s.flag: s for task in TASKS.values() for s in task.evaluate}
    given = [flag for flag in inputs if getattr(args, flag[2:])]
    for flag, needs in COMPANIONS.items():
        if getattr(args, flag[2:].replace("-", "_")) and not set(needs) & set(given):
            raise UserError(f"{flag} {COMPANION_WHAT[flag]}: it goes with {' or '.join(needs)}")
    if not given or given == ["--src"] and not args.ref:
        names = [f"{f} and --ref" if f == "--src" else f for f in inputs]
        listed = [f"{n} ({s.short})" for n, s in zip(names, inputs.values(), strict=True)]
        raise UserError(f"give {', '.join(listed[:-1])} or {listed[-1]}")
    task = _model_task(args.model_dir, given[0])
    own = {s.flag: s for s in task.evaluate}
    if len(given) > 1:
        first = given[0]
        what = (own.get(first) or inputs[first]).what
        raise UserError(f"give {first} ({what}) alone, without {', '.join(given[1:])}")
    flag = given[0]
    if flag not in own:
        load_pipeline(args, "evaluate")  # a broken model directory is said first
        needs = " or ".join(
            t.described for t in TASKS.values() if flag in {s.flag for s in t.evaluate}
        )
        use = " or ".join(f"{s.flag} ({s.short})" for s in task.evaluate) or "nothing: train it on"
        raise UserError(
            f"{inputs[flag].short} ({flag}) needs {needs}; this is {task.described}: use {use}"
        )
    return _handler(task.name, flag)(args)


COMPANIONS = {
    "--per-query": ("--detection",),
    "--classifier": ("--images",),
    "--plot": ("--tsv", "--images"),
    "--ref": ("--src",),
}
"""Flags that only go with some inputs."""
COMPANION_WHAT = {
    "--per-query": "ranks a detector's predictions",
    "--classifier": "names an image generator's samples",
    "--plot": "draws a classifier's confusion matrix",
    "--ref": "holds the references of --src",
}


def _model_task(model_dir: str, flag: str):
    """The task of the model in model_dir (transformer.tasks); when it cannot be read, the first
    task scored by `flag` (its own loading then says what is wrong with the directory)."""
    from ..model.io import ModelFileError
    from ..model_dir import PIXELS_FILE, load_config
    from ..tasks import TASKS, model_task

    try:
        config = load_config(model_dir)
    except (ModelFileError, OSError, ValueError):
        return next(t for t in TASKS.values() if flag in {s.flag for s in t.evaluate})
    return model_task(config, (Path(model_dir) / PIXELS_FILE).is_file())


def _handler(task: str, flag: str):
    """What evaluate runs and prints for a task's input (every (task, input) of the table has
    one: tests/tasks/test_table.py)."""
    from .detection import evaluate_detection
    from .image_lm import evaluate_image_lm
    from .speech import evaluate_audio

    return {
        ("translation", "--src"): _evaluate_translations,
        ("translation", "--pairs"): _evaluate_pairs,
        ("language-modelling", "--text"): _evaluate_perplexity,
        ("text-classification", "--tsv"): evaluate_classifier,
        ("image-classification", "--images"): evaluate_classifier,
        ("captioning", "--images"): evaluate_captions,
        ("contrastive", "--images"): evaluate_contrastive,
        ("image-generation", "--images"): evaluate_image_lm,
        ("question-answering", "--squad"): _evaluate_squad,
        ("speech", "--audio"): evaluate_audio,
        ("detection", "--detection"): evaluate_detection,
    }[task, flag]


def _evaluate_translations(args: argparse.Namespace) -> None:
    if args.output:
        check_output(args.output)
    return _evaluate_text(args, load_pipeline(args, "evaluate"))


def _evaluate_perplexity(args: argparse.Namespace) -> None:
    return _evaluate_text(args, load_pipeline(args, "evaluate"))


def _evaluate_text(args: argparse.Namespace, pipeline) -> None:
    """Perplexity (--text, a language model) or BLEU and chrF (--src, --ref, a translation
    model); cmd_evaluate has checked that the model's task takes the input."""
    from ..decoding.pipeline import truncation_note
    from ..evaluation.metrics import bleu, chrf
    from ..evaluation.scoring import pair_scores

    if args.text:
        return evaluate_perplexity(args, pipeline)
    sources, references = read_text(args.src, "--src"), read_text(args.ref, "--ref")
    if len(sources) != len(references):
        raise UserError(
            f"--src has {len(sources):,} lines but --ref has {len(references):,}: they must be "
            "aligned line by line"
        )
    cut: list[int] = []
    hypotheses = pipeline.translate(
        sources, **decode_overrides(args, SEARCH), on_truncate=cut.extend
    )
    if cut:
        note("evaluate", truncation_note(cut, len(sources), pipeline.max_source_tokens))
    if args.output:
        write_text(args.output, hypotheses)
    if args.metric == "rouge":
        return print_pair_scores(
            {"-": {"lines": len(hypotheses), **pair_scores(hypotheses, references, "rouge")}}
        )
    for score in (bleu(hypotheses, references), chrf(hypotheses, references)):
        print(score)


def _evaluate_pairs(args: argparse.Namespace) -> None:
    """BLEU, chrF and exact matches per task of a text-to-text model on input<TAB>target lines."""
    from ..decoding.pipeline import truncation_note
    from ..evaluation.scoring import score_pairs
    from ..model.transformer import EncoderDecoder

    if not Path(args.pairs).is_file():
        raise UserError(f"--pairs {args.pairs} not found: give a file of input<TAB>target lines")
    if args.output:
        check_output(args.output)
    pipeline = load_pipeline(args, "evaluate")
    if not isinstance(pipeline.model, EncoderDecoder):
        raise UserError(
            "--pairs is for encoder-decoder (text-to-text) models: this model is not one"
        )
    cut: list[int] = []
    scores, outputs = score_pairs(
        pipeline,
        args.pairs,
        on_truncate=cut.extend,
        metric=args.metric,
        **decode_overrides(args, SEARCH),
    )
    if cut:
        note("evaluate", truncation_note(cut, len(outputs), pipeline.max_source_tokens))
    if args.output:
        write_text(args.output, outputs)
    print_pair_scores(scores)


def print_pair_scores(scores: dict[str, dict[str, float]]) -> None:
    """The table of score_pairs: a row per task, a column per score."""
    columns = [k for k in next(iter(scores.values())) if k not in ("lines", "exact")]
    names = dict(bleu="BLEU", chrf="chrF", rouge1="ROUGE-1", rouge2="ROUGE-2", rougeL="ROUGE-L")
    width = max(len(task) for task in scores)
    print(
        f"{'task':<{width}}  {'lines':>6}  "
        + "  ".join(f"{names[c]:>7}" for c in columns)
        + f"  {'exact':>6}"
    )
    for task, s in scores.items():
        print(
            f"{task:<{width}}  {s['lines']:>6,}  "
            + "  ".join(f"{s[c]:>7.2f}" for c in columns)
            + f"  {s['exact']:>5.1f}%"
        )


def _evaluate_squad(args: argparse.Namespace) -> None:
    """Exact match and F1 (SQuAD's) of a span-head model's answers, and verse-level F1 where the
    file gives verses."""
    from ..evaluation.scoring import score_squad
    from ..model.transformer import EncoderOnly

    if not Path(args.squad).is_file():
        raise UserError(f"--squad {args.squad} not found: give a SQuAD-format JSON file")
    if args.output:
        check_output(args.output)
    pipeline = load_pipeline(args, "evaluate")
    if not isinstance(pipeline.model, EncoderOnly) or pipeline.model.span_head is None:
        raise UserError(
            '--squad is for question answering: this model has no span head (objective = "qa")'
        )
    try:
        scores, answers = score_squad(
            pipeline, args.squad, **decode_overrides(args, ANSWER_SETTINGS)
        )
    except DataError as e:
        raise UserError(str(e)) from None
    if args.output:
        write_text(args.output, [" ".join(a.text.split()) for a in answers])
    verses = f"  verse F1 {scores['verse_f1']:.2f}" if "verse_f1" in scores else ""
    print(
        f"exact match {scores['exact_match']:.2f}  F1 {scores['f1']:.2f}{verses}  "
        f"({scores['questions']:,} questions of {args.squad})"
    )


def register(sub: argparse._SubParsersAction) -> None:
    """`evaluate`."""
    p = sub.add_parser(
        "evaluate", help="BLEU and chrF (--src, --ref) or perplexity (--text) of a model directory"
    )
    p.add_argument("model_dir")
    _text_flags(p)
    _other_inputs(p)
    _generator_flags(p)
    p.add_argument(
        "--output",
        help="also write the translations (with --tsv: the predicted labels; a captioner's "
        "--images: the captions) to this file",
    )
    add_decode_args(p, SEARCH)
    add_decode_args(p, SPEECH_SEARCH, note="with --audio; default from the model's decode.json")
    add_decode_args(p, ANSWER_SETTINGS)
    add_device_args(p)
    add_precision_arg(p)
    p.set_defaults(func=cmd_evaluate)


def _text_flags(p: argparse.ArgumentParser) -> None:
    """--src, --ref and --text with the stream's settings."""
    p.add_argument("--src", help="source lines to translate")
    p.add_argument("--ref", help="reference translations, aligned with --src")
    p.add_argument(
        "--text",
        help="text for a language model's loss and perplexity, per token and per character",
    )
    p.add_argument(
        "--documents",
        choices=DOCUMENT_KINDS,
        default="file",
        help="with --text: what a document of the stream is (default file: the whole text)",
    )
    add_flag(
        p,
        "--window",
        type=int,
        default=None,
        bounds=Bounds(ge=1),
        give="a number of tokens",
        help="with --text: tokens of context per window (default: the model's max_positions)",
    )
    add_flag(
        p,
        "--stride",
        type=int,
        default=None,
        bounds=Bounds(ge=1),
        give="a number of tokens",
        help="with --text: tokens each window moves and scores (default: the window, blocks side "
        "by side; less gives each scored token more context)",
    )
    p.add_argument(
        "--per-line",
        action="store_true",
        help="with --text: score each line on its own (a model trained with data.pack = false)",
    )


def _other_inputs(p: argparse.ArgumentParser) -> None:
    """The other inputs (--tsv, --pairs, --squad, --audio, --detection, --images) and what goes with
    them."""
    p.add_argument(
        "--tsv",
        help="label<TAB>text lines: a classifier's accuracy, macro-F1, per-class scores, "
        "confusion matrix",
    )
    p.add_argument(
        "--pairs",
        help="input<TAB>target lines: a text-to-text model's BLEU, chrF and exact matches "
        "per task (the input's text before its first ': ')",
    )
    p.add_argument(
        "--squad",
        help="questions on contexts in SQuAD's JSON format: a question-answering model's exact "
        "match and F1 (and verse-level F1 where the file gives verses)",
    )
    p.add_argument(
        "--audio",
        help="a folder of WAV files with transcripts.tsv (file<TAB>transcript): a speech model's "
        "word error rate per clip and overall",
    )
    p.add_argument(
        "--detection",
        help="a folder of images with COCO annotations (annotations.json): a detector's COCO "
        "mAP@[.5:.95], AP50, AP75",
    )
    p.add_argument(
        "--per-query",
        action="store_true",
        help="with --detection: rank one prediction per object query (its most likely class), as "
        "DETR's paper, instead of the 100 most likely (query, class) pairs per image",
    )
    p.add_argument(
        "--metric",
        choices=PAIR_METRICS,
        default="bleu",
        help="with --pairs or --src/--ref: bleu (BLEU and chrF, default) or rouge (ROUGE-1/2/L "
        "F1, for summaries)",
    )
    p.add_argument(
        "--images",
        help="labelled images (a prepared .safetensors split or a folder of class "
        "folders): an image classifier's accuracy, macro-F1, per-class scores, "
        "confusion matrix; an image captioner's exact match and chrF against the label names",
    )
    p.add_argument(
        "--plot",
        help="with --tsv or --images: draw the confusion matrix to this image (.png, .svg, .pdf)",
    )


def _generator_flags(p: argparse.ArgumentParser) -> None:
    """An image generator's samples, with --images --classifier."""
    generator = p.add_argument_group("an image generator, with --images")
    generator.add_argument(
        "--classifier",
        help="an image classifier's model directory: sample --samples images of each label and "
        "report the share it recognises",
    )
    add_flag(
        generator,
        "--samples",
        type=int,
        default=50,
        bounds=Bounds(ge=1),
        give="a number of images",
        help="with --classifier: images sampled per label (default 50)",
    )
    add_flag(
        generator,
        "--limit",
        type=int,
        default=None,
        bounds=Bounds(ge=1),
        give="a number of images",
        help="score the first N images of --images only (default: all)",
    )
    generator.add_argument("--seed", type=int, help="with --classifier: the samples' seed")
    add_decode_args(
        generator,
        IMAGE_SAMPLING_SETTINGS,
        note="with --classifier: the samples'; default from the model's decode.json",
    )
