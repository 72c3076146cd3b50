"""`transformer data manuals`: Spanish -> English sentence pairs of manual prose, from the six
Debian manuals that ship the same pages in both languages.

    catalog.py   the six manuals (MANUALS) and each one's pages in both languages
    blocks.py    the text blocks of one page: Mallard, HTML, man pages (roff)
    pairing.py   a document's blocks paired (by id, position or length), cut into sentences,
                 filtered
    corpus.py    build_manuals_corpus: the splits, the per-manual cap, PROVENANCE.md
"""
