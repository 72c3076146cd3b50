"""The synthetic speech builder's old home: now transformer.data.sources.speech; its public names
are re-exported so that old imports keep working."""

from .sources.speech import *  # noqa: F403
