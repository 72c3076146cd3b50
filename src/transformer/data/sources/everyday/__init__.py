"""Everyday Spanish -> English data from installed packages (children's software, vocabulary
lists, chat corpora), and everyday English for back-translation.

    gcompris.py    the Qt .qm reader and GCompris's instruction and vocabulary pairs
    kvtml.py       KDE's kvtml vocabulary lists: word and definition pairs
    vocabulary.py  `data vocabulary`: the two above as train/valid/test
    english.py     `data everyday-english`: chit-chat, WordNet examples and chatterbot lines
                   (English only: the input of `data apertium-bt`)
"""
