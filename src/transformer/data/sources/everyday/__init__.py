"""Everyday Spanish -> English dialogue from installed packages.

bass.py     the subtitles of *Beneath a Steel Sky* (sky.dnr/sky.dsk, ScummVM's Huffman tree)
"""
