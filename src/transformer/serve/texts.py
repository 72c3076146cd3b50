"""A request's texts as the model's lines and back, and the one way the server translates them:
/v1/translate (routes.py) and LibreTranslate's /translate (libretranslate.py) both call
translate_texts, so a text gets the same answer from either."""

from __future__ import annotations

import re

from fastapi import Request

from ..decoding.inputs import PipelineError
from ..decoding.pipeline import Pipeline
from .errors import ApiError
from .state import State


async def translate_texts(
    state: State, pipeline: Pipeline, request: Request, texts: list[str], settings: dict
) -> tuple[list, list[int]]:
    """(each text's translation, or its n_best translations; the indices of the texts cut to the
    model's max_positions). settings: decoding overrides (None values are left out). Raises
    ApiError: 413 past --max-lines, 422 for settings the model refuses."""
    lines, breaks = split_lines(texts)
    max_lines = state.config.max_lines
    if len(lines) > max_lines:
        raise ApiError(
            413,
            "too_many_lines",
            f"the request has {len(lines)} lines (a line break starts a new one), more than this "
            f"server takes in one request ({max_lines}; see --max-lines): send them in several "
            "requests",
        )
    settings = {k: v for k, v in settings.items() if v is not None}
    try:
        s = pipeline.settings(**settings)
    except (PipelineError, ValueError) as e:
        raise ApiError(422, "invalid_request", str(e)) from None
    job = state.translation_job(lines, s)  # validated once, above
    outputs, cut = await state.submit(job, request)
    state.metrics.translated(len(lines))
    owner = [i for i, text_breaks in enumerate(breaks) for _ in range(len(text_breaks) + 1)]
    return join_lines(outputs, breaks, s.n_best), sorted({owner[n] for n in cut})


LINE_BREAK = re.compile(r"(\r\n|\r|\n)")


def split_lines(texts: list[str]) -> tuple[list[str], list[list[str]]]:
    """The lines of all the texts, in order (each text split at \\r\\n, \\n and \\r: the model
    translates line by line), and each text's line breaks, for join_lines."""
    lines, breaks = [], []
    for text in texts:
        parts = LINE_BREAK.split(text)  # line, break, line, ..., line
        lines += parts[::2]
        breaks.append(parts[1::2])
    return lines, breaks


def join_lines(outputs: list, breaks: list[list[str]], n_best: int) -> list:
    """Each text's translation: its lines' translations joined by its own line breaks (an empty
    line stays empty). With n_best > 1, a text's hypothesis i joins its lines' i-th best (an empty
    text has n_best empty ones)."""
    joined, start = [], 0
    for text_breaks in breaks:
        mine = outputs[start : start + len(text_breaks) + 1]
        start += len(mine)
        ends = [*text_breaks, ""]
        if n_best == 1:
            joined.append("".join(line + end for line, end in zip(mine, ends, strict=True)))
        else:
            best = [hypotheses or [""] * n_best for hypotheses in mine]  # empty lines give []
            joined.append(
                [
                    "".join(line[i] + end for line, end in zip(best, ends, strict=True))
                    for i in range(n_best)
                ]
            )
    return joined
