"""The Bible builders' old home: now transformer.data.sources.bible (and sources.commentary); its
names are re-exported so that old imports keep working."""

from ..sources.bible import *  # noqa: F403
