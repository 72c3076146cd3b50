"""The task datasets' old home: their builders are now transformer.data.sources.reviews and
.summaries; re-exported so that old imports keep working."""

from ..sources.reviews import build_reviews_corpus
from ..sources.summaries import build_summaries_corpus

__all__ = ["build_reviews_corpus", "build_summaries_corpus"]
