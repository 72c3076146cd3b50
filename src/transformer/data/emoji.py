"""The emoji builder's old home: now transformer.data.sources.emoji; its public names
are re-exported so that old imports keep working."""

from .sources.emoji import *  # noqa: F403
