"""`transformer evaluate`: BLEU and chrF, perplexity, a classifier's scores or a text-to-text
model's scores per task. The handler is `evaluate`; its parser is derived from its signature
(cli.args, the flags in evaluate_flags), and it runs cmd_evaluate on the namespace the printers
read."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Annotated

from ..config import (
    ANSWER_SETTINGS,
    IMAGE_SAMPLING_SETTINGS,
    DecodeConfig,
)
from ..data.text import DataError
from . import evaluate_flags as F
from .args import Settings, command
from .captioning import evaluate_captions
from .classifier_report import evaluate_classifier
from .common import (
    ModelRun,
    UserError,
    check_output,
    decode_overrides,
    load_pipeline,
    note,
    read_text,
    write_text,
)
from .contrastive import evaluate_contrastive
from .perplexity import evaluate_perplexity

SEARCH = ("beam_size", "length_penalty", "length_penalty_kind", "keep_markup")
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
        ("language-modelling", "--chat"): _evaluate_chat,
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
    from ..decoding.inputs import truncation_note
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
        print_pair_scores(
            {"-": {"lines": len(hypotheses), **pair_scores(hypotheses, references, "rouge")}}
        )
    else:
        for score in (bleu(hypotheses, references), chrf(hypotheses, references)):
            print(score)
    if line := placeholders_line(sources, hypotheses):
        print(line)


def placeholders_line(sources: list[str], hypotheses: list[str]) -> str | None:
    """The line "placeholders kept: ..." over the source lines with placeholders or markup
    (data.markup's spans: each must come out as often as it went in); None when no line has
    one."""
    from ..data.markup import kept_share

    kept, lines = kept_share(sources, hypotheses)
    if not lines:
        return None
    return (
        f"placeholders kept: {kept / lines:.1%} ({kept:,} of the {lines:,} lines with "
        "placeholders or markup keep every one exactly)"
    )


def _evaluate_pairs(args: argparse.Namespace) -> None:
    """BLEU, chrF and exact matches per task of a text-to-text model on input<TAB>target lines."""
    from ..decoding.inputs import truncation_note
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


def _evaluate_chat(args: argparse.Namespace) -> None:
    """A chat model's replies to conversations, scored against their last (assistant) turn."""
    from ..data.chat import ChatDataError
    from ..evaluation.scoring import score_chat

    if args.output:
        check_output(args.output)
    pipeline = load_pipeline(args, "evaluate")
    if not pipeline.chat:
        raise UserError(
            "--chat needs a chat model (its chat_template.json): this language model has none; "
            "score it with --text"
        )
    search = decode_overrides(args, SEARCH)
    beam = {"beam_size": search["beam_size"]} if search.get("beam_size") else {}
    try:
        scores, replies = score_chat(pipeline, args.chat, args.metric, **beam)
    except (ChatDataError, DataError) as e:
        raise UserError(str(e)) from None
    if args.output:
        write_text(args.output, [" ".join(r.split()) for r in replies])
    print_pair_scores({"-": scores})


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
    """Exact match and F1 (SQuAD's) of a question-answering model's answers, and verse-level F1
    where the file gives verses."""
    from ..evaluation.scoring import score_squad
    from ..model.transformer import EncoderOnly

    if not Path(args.squad).is_file():
        raise UserError(f"--squad {args.squad} not found: give a SQuAD-format JSON file")
    if args.output:
        check_output(args.output)
    pipeline = load_pipeline(args, "evaluate")
    model = pipeline.model
    if not isinstance(model, EncoderOnly) or not (model.span_head or model.config.sentence_head):
        raise UserError(
            "--squad is for question answering: this model has no span or sentence head "
            '(objective = "qa" or "qa_sentences")'
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


GROUPS = ("search", "speech", "answers", "sampling")
"""evaluate's parameters that take decoding settings."""
EVALUATE_SETTINGS = (SEARCH, SPEECH_SEARCH, ANSWER_SETTINGS, IMAGE_SAMPLING_SETTINGS)
SPEECH_NOTE = "with --audio; default from the model's decode.json"
SAMPLES_NOTE = "with --classifier: the samples'; default from the model's decode.json"


def evaluate(
    run: ModelRun,
    src: F.SRC = None,
    ref: F.REF = None,
    text: F.TEXT = None,
    documents: F.DOCUMENTS = "file",
    window: F.WINDOW = None,
    stride: F.STRIDE = None,
    per_line: F.PER_LINE = False,
    tsv: F.TSV = None,
    pairs: F.PAIRS = None,
    chat: F.CHAT = None,
    squad: F.SQUAD = None,
    audio: F.AUDIO = None,
    detection: F.DETECTION = None,
    per_query: F.PER_QUERY = False,
    metric: F.METRIC = "bleu",
    images: F.IMAGES_IN = None,
    plot: F.PLOT = None,
    classifier: F.CLASSIFIER = None,
    samples: F.SAMPLES = 50,
    limit: F.LIMIT = None,
    seed: F.SEED = None,
    sampling: Annotated[
        dict, Settings(DecodeConfig, IMAGE_SAMPLING_SETTINGS, note=SAMPLES_NOTE, group=F.GENERATOR)
    ] = None,
    output: F.OUTPUT = None,
    search: Annotated[dict, Settings(DecodeConfig, SEARCH)] = None,
    speech: Annotated[dict, Settings(DecodeConfig, SPEECH_SEARCH, note=SPEECH_NOTE)] = None,
    answers: Annotated[dict, Settings(DecodeConfig, ANSWER_SETTINGS)] = None,
) -> None:
    """Score a model on what it is evaluated by (cmd_evaluate): BLEU and chrF (--src, --ref),
    perplexity (--text), or the scores of the model's task on its input. The decoding settings
    (search, speech, answers, sampling) are those given, by name; the others keep the model's."""
    flags = {k: v for k, v in locals().items() if k not in ("run", *GROUPS)}
    return cmd_evaluate(_namespace(run, flags, search, speech, answers, sampling))


def _namespace(run: ModelRun, flags: dict, *groups: dict | None) -> argparse.Namespace:
    """The namespace the printers read (args.<flag>, decode_overrides): where to run, the flags,
    and every decoding setting evaluate takes (None where not given)."""
    settings = {name: None for names in EVALUATE_SETTINGS for name in names}
    for group in groups:
        settings.update(group or {})
    return argparse.Namespace(**dataclasses.asdict(run), **flags, **settings)


def register(sub: argparse._SubParsersAction) -> None:
    """`evaluate`, its parser derived from `evaluate`'s signature."""
    command(
        sub,
        "evaluate",
        evaluate,
        help="BLEU and chrF (--src, --ref) or perplexity (--text) of a model directory",
    )
