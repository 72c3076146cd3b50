"""The flags of `transformer evaluate` that are not settings, one annotated type each (cli.args
derives a flag from each): its inputs, the stream's window, what goes with an input, and an image
generator's samples (the "an image generator, with --images" section)."""

from __future__ import annotations

from typing import Annotated, Literal

from ..config import DOCUMENT_KINDS, PAIR_METRICS, Bounds
from .args import Arg

GENERATOR = "an image generator, with --images"
"""The --help section of an image generator's flags."""
TOKENS = "a number of tokens"
IMAGES = "a number of images"

SRC = Annotated[str | None, Arg("source lines to translate")]
REF = Annotated[str | None, Arg("reference translations, aligned with --src")]
TEXT = Annotated[
    str | None,
    Arg("text for a language model's loss and perplexity, per token and per character"),
]
DOCUMENTS = Annotated[
    Literal[DOCUMENT_KINDS],
    Arg("with --text: what a document of the stream is (default file: the whole text)"),
]
WINDOW = Annotated[
    int | None,
    Arg(
        "with --text: tokens of context per window (default: the model's max_positions)",
        Bounds(ge=1),
        TOKENS,
    ),
]
STRIDE = Annotated[
    int | None,
    Arg(
        "with --text: tokens each window moves and scores (default: the window, blocks side "
        "by side; less gives each scored token more context)",
        Bounds(ge=1),
        TOKENS,
    ),
]
PER_LINE = Annotated[
    bool,
    Arg("with --text: score each line on its own (a model trained with data.text.pack = false)"),
]
TSV = Annotated[
    str | None,
    Arg(
        "label<TAB>text lines: a classifier's accuracy, macro-F1, per-class scores, "
        "confusion matrix"
    ),
]
PAIRS = Annotated[
    str | None,
    Arg(
        "input<TAB>target lines: a text-to-text model's BLEU, chrF and exact matches "
        "per task (the input's text before its first ': ')"
    ),
]
CHAT = Annotated[
    str | None,
    Arg(
        'conversations, JSONL of {"messages": [...]} ending with the assistant\'s turn: a chat '
        "model's replies, greedy, scored against that turn (BLEU and chrF, or --metric rouge)"
    ),
]
SQUAD = Annotated[
    str | None,
    Arg(
        "questions on contexts in SQuAD's JSON format: a question-answering model's exact "
        "match and F1 (and verse-level F1 where the file gives verses)"
    ),
]
AUDIO = Annotated[
    str | None,
    Arg(
        "a folder of WAV files with transcripts.tsv (file<TAB>transcript): a speech model's "
        "word error rate per clip and overall"
    ),
]
DETECTION = Annotated[
    str | None,
    Arg(
        "a folder of images with COCO annotations (annotations.json): a detector's COCO "
        "mAP@[.5:.95], AP50, AP75"
    ),
]
PER_QUERY = Annotated[
    bool,
    Arg(
        "with --detection: rank one prediction per object query (its most likely class), as "
        "DETR's paper, instead of the 100 most likely (query, class) pairs per image"
    ),
]
METRIC = Annotated[
    Literal[PAIR_METRICS],
    Arg(
        "with --pairs, --chat or --src/--ref: bleu (BLEU and chrF, default) or rouge (ROUGE-1/2/L "
        "F1, for summaries)"
    ),
]
IMAGES_IN = Annotated[
    str | None,
    Arg(
        "labelled images (a prepared .safetensors split or a folder of class "
        "folders): an image classifier's accuracy, macro-F1, per-class scores, "
        "confusion matrix; an image captioner's exact match and chrF against the label names"
    ),
]
PLOT = Annotated[
    str | None,
    Arg("with --tsv or --images: draw the confusion matrix to this image (.png, .svg, .pdf)"),
]
CLASSIFIER = Annotated[
    str | None,
    Arg(
        "an image classifier's model directory: sample --samples images of each label and "
        "report the share it recognises",
        group=GENERATOR,
    ),
]
SAMPLES = Annotated[
    int,
    Arg(
        "with --classifier: images sampled per label (default 50)",
        Bounds(ge=1),
        IMAGES,
        group=GENERATOR,
    ),
]
LIMIT = Annotated[
    int | None,
    Arg(
        "score the first N images of --images only (default: all)",
        Bounds(ge=1),
        IMAGES,
        group=GENERATOR,
    ),
]
SEED = Annotated[int | None, Arg("with --classifier: the samples' seed", group=GENERATOR)]
OUTPUT = Annotated[
    str | None,
    Arg(
        "also write the translations (with --tsv: the predicted labels; a captioner's "
        "--images: the captions) to this file"
    ),
]
