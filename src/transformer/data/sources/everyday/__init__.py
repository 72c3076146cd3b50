"""Everyday Spanish -> English from installed (or unpacked) packages: dialogue, children's
vocabulary, and everyday English to back-translate.

bass.py        the subtitles of *Beneath a Steel Sky* (sky.dnr/sky.dsk, ScummVM's Huffman tree)
cataclysm.py   *Cataclysm: DDA*'s es_ES and es_AR catalogs, filtered to dialogue and sentences
drascula.py    *Drascula*'s text table in scummvm-data's drascula.dat
casing.py      all-caps emphasis and shouted lines put in the case people write
dialogue.py    `data dialogue`: the games' pairs, recased, split by scene
gcompris.py    GCompris's Qt catalog (.qm): children's instructions and words
kvtml.py       KDE's vocabulary lists (kvtml), es and en files of the same template
vocabulary.py  `data vocabulary`: GCompris and kvtml, split by activity and list
english.py     `data everyday-english`: chats, WordNet's examples and chit-chat lines, for
               `data apertium-bt`
"""
