"""The copy task's builder's old home: now transformer.data.sources.copy; its public names
are re-exported so that old imports keep working."""

from .sources.copy import *  # noqa: F403
