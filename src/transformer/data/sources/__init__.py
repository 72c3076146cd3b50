"""Dataset builders: one module (or folder) per source that a package installed; nothing is
downloaded. Each builder is a plain function that reads the installed files and writes a dataset
folder (its splits and a PROVENANCE.md), returning a report dict of counts; `transformer data`
(transformer.cli.data) is one table over them.

    bible/          SWORD Bible modules: `data bible`, `bible-genre`, `bible-t2t` (verse pairs,
                    verses by genre, a text-to-text mixture); the SWORD reader and verse alignment
    commentary.py   `data commentary-headings` / `commentary-qa`: Matthew Henry's headings with
                    the verses they cover (summarization; question answering in SQuAD's format)
    gettext_ui.py   `data ui-strings`: Spanish -> English software messages from *.mo catalogs
                    (ui_clean.py: the cleaning rules for one message)
    debian.py       `data debian-descriptions`: package descriptions from apt's Translation indexes
    freedict.py     `data dictionary`: FreeDict Spanish -> English word pairs
    manuals/        `data manuals`: sentences of six manuals Debian ships in both languages
    phrases/        `data phrases`: voice-assistant skills' phrases
    apertium.py     `data apertium-bt`: everyday English back-translated by Apertium (tagged)
    everyday/       `data dialogue`: translated games' dialogue; `data vocabulary`: GCompris's
                    and KDE's vocabulary (children's software); `data everyday-english`:
                    chit-chat, WordNet examples (for apertium-bt)
    wiki.py         `data wiki-leads`: monolingual Wikipedia lead sentences (back-translation)
    summaries.py    `data wiki-summaries`: Wikipedia leads -> first sentence or title
    reviews.py      `data movie-reviews`: review snippets labelled positive / negative
    speech.py       `data speech`: Bible clauses spoken by espeak-ng and flite (speech synthesis)
    canvases.py     `data detection`: Fashion-MNIST items on canvases with COCO boxes
    fashion_mnist.py  `data fashion-mnist`: Fashion-MNIST's IDX files as prepared splits
    emoji.py        `data emoji`: Noto Color Emoji glyphs labelled with their Unicode names
    copy.py         `data copy`: the synthetic copy task (target = source)

What the builders share: splits.py (hash splits by group, deduplication, atomic writing),
sentences.py (sentence splitting and Gale & Church alignment), packages.py (a file's package,
version and licence, for PROVENANCE.md), debs.py (Debian packages unpacked under a private root
without installing them, with dpkg's records, so a builder's `root` reads them as installed). A
builder raises DataError with one line naming what to install when its input is missing.
"""
