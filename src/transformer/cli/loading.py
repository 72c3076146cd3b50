"""What the commands over a model directory share, below them: the image files a command was
given, and each family's check that the model directory is one of it (a captioner, a detector, a
speech model, a dual encoder) with the one-line error naming the command to use instead. Each
takes a ModelRun (a command's typed arguments)."""

from __future__ import annotations

from pathlib import Path

from .common import ModelRun, UserError, load_pipeline


def image_files(paths: list[str], flag: str = "--input") -> list[str]:
    """Image files named, and those inside named folders (recursively, sorted); errors name them
    after `flag` (empty: positional arguments)."""
    from ..data.images import IMAGE_SUFFIXES

    files = []
    for name in paths:
        path, named = Path(name), f"{flag} {name}".strip()
        if path.is_dir():
            found = sorted(str(f) for f in path.rglob("*") if f.suffix.lower() in IMAGE_SUFFIXES)
            if not found:
                raise UserError(f"{named} has no image file ({'/'.join(IMAGE_SUFFIXES)})")
            files += found
        elif path.is_file():
            files.append(name)
        else:
            raise UserError(f"{named} not found: give image files or folders of them")
    return files


def captioner(run: ModelRun, command: str):
    """An image captioner's Pipeline."""
    from ..tasks import captioning

    return load_pipeline(run, command, captioning.TASK)


def detector(run: ModelRun, command: str):
    """A detector's Pipeline."""
    from ..tasks import detection

    return load_pipeline(run, command, detection.TASK)


def speech_pipeline(run: ModelRun, command: str):
    """A speech model's Pipeline."""
    from ..tasks import speech

    return load_pipeline(run, command, speech.TASK)


def dual_encoder(run: ModelRun, command: str):
    """A text-image dual encoder's Pipeline."""
    from ..tasks import contrastive

    return load_pipeline(run, command, contrastive.TASK)
