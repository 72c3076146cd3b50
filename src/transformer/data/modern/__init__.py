"""The Spanish -> English builders' old home: their modules are now in transformer.data.sources
(gettext_ui, debian, freedict, wiki, and the shared splits, sentences, ui_clean); these names are
re-exported so that old imports keep working."""

from ..sources.debian import build_debian_corpus
from ..sources.freedict import build_dictionary_corpus
from ..sources.gettext_ui import build_ui_corpus
from ..sources.sentences import align_sentences, split_sentences
from ..sources.splits import Pair, assign, split_of
from ..sources.ui_clean import clean_pair
from ..sources.wiki import build_wiki_corpus

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
