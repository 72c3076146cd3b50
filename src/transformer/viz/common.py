"""What every figure shares: the formats a picture is written in, and writing a matplotlib figure
atomically."""

from __future__ import annotations

import os
from pathlib import Path

from ..files import PICTURE_FORMATS, atomic_write


def figure_format(out: str | os.PathLike) -> str:
    """The format out's suffix names (png, svg, pdf), or a ValueError saying which are written."""
    fmt = Path(out).suffix[1:].lower()
    if fmt not in PICTURE_FORMATS:
        raise ValueError(
            f"{out}: pictures are written as .png, .svg or .pdf; give a file name with one of those"
        )
    return fmt


def save_figure(fig, out: str | os.PathLike) -> Path:
    """Write a matplotlib figure to out (its parent created, the file written atomically) and close
    it."""
    import matplotlib.pyplot as plt

    out = Path(out)
    try:
        fmt = figure_format(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, lambda tmp: fig.savefig(tmp, format=fmt))
    finally:
        plt.close(fig)
    return out
