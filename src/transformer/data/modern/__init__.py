"""Spanish -> English corpora from modern human translations that Debian packages install; nothing
is downloaded.

    splits.py      what the builders share: hash splits by group, deduplication, atomic writing
    packages.py    the package, version and licence of a file (dpkg-query), for PROVENANCE.md
    ui_clean.py    the cleaning rules for one gettext message (accelerators, markup, placeholders)
    gettext_ui.py  `data ui-strings`: build_ui_corpus(out_dir), software messages from *.mo files
    sentences.py   sentence splitting and length-based sentence alignment (Gale & Church)
    debian.py      `data debian-descriptions`: build_debian_corpus(out_dir), package descriptions
    freedict.py    `data dictionary`: build_dictionary_corpus(out_dir), FreeDict word pairs
    wiki.py        `data wiki-leads`: monolingual Wikipedia lead sentences (back-translation)

Each builder writes OUT/{split}.spa and OUT/{split}.eng (line i of one translating line i of the
other) and OUT/PROVENANCE.md, and raises DataError with one line naming what to install when its
input is missing.
"""

from .debian import build_debian_corpus
from .freedict import build_dictionary_corpus
from .gettext_ui import build_ui_corpus
from .sentences import align_sentences, split_sentences
from .splits import Pair, assign, split_of
from .ui_clean import clean_pair
from .wiki import build_wiki_corpus

__all__ = [
    "Pair",
    "align_sentences",
    "assign",
    "build_debian_corpus",
    "build_dictionary_corpus",
    "build_ui_corpus",
    "build_wiki_corpus",
    "clean_pair",
    "split_of",
    "split_sentences",
]
