"""Corpora from the SWORD Bible modules that Debian packages (public domain texts).

    sword.py        read a module with pysword, strip the OSIS markup (read_module)
    align.py        pair two texts' verses, drop misaligned chapters, split by chapter
    verse_align.py  the verse-level check inside a chapter (Gale & Church style)
    parallel.py     `data bible`: build_bible_corpus("spa", "eng", out_dir), verse pairs
    genre.py        `data bible-genre`: build_genre_corpus("eng", out_dir), verses by genre
    t2t.py          `data bible-t2t`: build_t2t_corpus("spa", "eng", out_dir), tasks by prefix
    commentary.py   `data commentary-headings` / `commentary-qa`: Matthew Henry's headings with
                    the verses they cover (summarization; question answering in SQuAD's format)

Every builder writes {train,valid,test} files of whole chapters (the same chapters for every
builder), the verse references beside them (.ids), and a PROVENANCE.md.
"""

from .align import Alignment, Chapter, align, misalignment, split_of
from .genre import GENRE_OF, GENRES, GenreSplits, build_genre_corpus, genre_splits
from .parallel import build_bible_corpus, target_tag
from .sword import (
    INSTALL_ALL,
    MODULES,
    SWORD_DIRS,
    BibleError,
    Module,
    Verse,
    clean_osis,
    find_sword_dir,
    read_module,
    undo_drop_cap,
)
from .t2t import build_t2t_corpus, t2t_prefixes

__all__ = [
    "GENRES",
    "GENRE_OF",
    "INSTALL_ALL",
    "MODULES",
    "SWORD_DIRS",
    "Alignment",
    "BibleError",
    "Chapter",
    "GenreSplits",
    "Module",
    "Verse",
    "align",
    "build_bible_corpus",
    "build_genre_corpus",
    "build_t2t_corpus",
    "clean_osis",
    "find_sword_dir",
    "genre_splits",
    "misalignment",
    "read_module",
    "split_of",
    "t2t_prefixes",
    "target_tag",
    "undo_drop_cap",
]
