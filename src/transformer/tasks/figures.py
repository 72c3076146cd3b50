"""The attention figure of each kind of model, as a Task record holds it: the input that
`transformer attention` gives it, and the function that draws it (viz.views, imported when a
figure is drawn: viz stands on Pipeline, which reads this table)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Figure:
    """A task's attention figure: the flag of the one input it reads, what that input is, and
    the drawing (pipeline, the input, viz.views.View) -> the lines to print."""

    flag: str
    """--text, --image or --audio."""
    what: str
    """What to give with the flag, as an error says it ("FILE", "FILE.wav"; "": a text)."""
    draw: Callable[[Any, str, Any], list[str]]

    @property
    def give(self) -> str:
        return f"{self.flag} {self.what}".strip()


def _text(pipeline, text: str, view) -> list[str]:
    from ..viz.views import text_view

    return text_view(pipeline, text, view)


def _image(pipeline, image: str, view) -> list[str]:
    from ..viz.views import image_view

    return image_view(pipeline, image, view)


def _caption(pipeline, image: str, view) -> list[str]:
    from ..viz.views import caption_view

    return caption_view(pipeline, image, view)


def _detection(pipeline, image: str, view) -> list[str]:
    from ..viz.views import detection_view

    return detection_view(pipeline, image, view)


def _audio(pipeline, audio: str, view) -> list[str]:
    from ..viz.views import audio_view

    return audio_view(pipeline, audio, view)


TEXT = Figure("--text", "", _text)
"""Where a translation's or a language model's output looked, token by token."""
IMAGE = Figure("--image", "FILE", _image)
"""An image encoder's [CLS] attention and its rollout."""
CAPTION = Figure("--image", "FILE", _caption)
"""A caption's tokens over the image."""
DETECTION = Figure("--image", "FILE", _detection)
"""A detector's object queries over the image."""
AUDIO = Figure("--audio", "FILE.wav", _audio)
"""A transcript's tokens over the spectrogram."""
