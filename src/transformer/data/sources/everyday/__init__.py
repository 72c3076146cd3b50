"""Everyday Spanish -> English pairs: readers of translated game dialogue and their casing.

cataclysm.py  Cataclysm: DDA's es_ES and es_AR gettext catalogs: NPC dialogue and sentences
drascula.py   Drascula's text table in ScummVM's drascula.dat (en/es by group and index)
casing.py     soften_caps and sentence_case: CAPS emphasis and all-caps lines made ordinary
"""
