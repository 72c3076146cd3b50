"""The detection canvases builder's old home: now transformer.data.sources.canvases; its public
names are re-exported so that old imports keep working."""

from .sources.canvases import *  # noqa: F403
