"""An encoder-decoder's side of Pipeline: source lines encoded (cut to max_positions) and
translated in batches of similar length, by search or by sampling. The rules are
transformer.decoding.pipeline's module docstring's; Pipeline's methods call these functions.

A model trained with data.protect_markup (its source tokenizer holds the slot tokens) reads each
line masked (transformer.data.markup.protect) and each output, every n-best hypothesis and sampled
translation alike, has its slots put back (markup.restore: each placeholder and tag of the line
exactly once), unless decode.keep_markup is false. The server's continuous batching masks and
restores with the same two functions (mask_lines, unmask)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch

from ..config import ConfigError, DecodeConfig
from ..data.markup import Slot, protect, restore
from .generate import sampling_settings
from .inputs import PipelineError, as_lines, batches_by_tokens, truncation_note
from .sampling import sample


def mask_lines(
    pipeline, lines: list[str], settings: DecodeConfig
) -> tuple[list[str], list[list[Slot]] | None]:
    """(the lines as the model reads them, each line's slots): masked when the model was trained
    with data.protect_markup and settings.keep_markup is on; else as they are, and None."""
    if not settings.keep_markup or not getattr(pipeline.source_tokenizer, "protects_markup", False):
        return lines, None
    masked = [protect(line) for line in lines]
    return [m for m, _ in masked], [slots for _, slots in masked]


def unmask(text: str, slots: list[list[Slot]] | None, i: int) -> str:
    """Line i's output with its slots put back (markup.restore); as it is when slots is None."""
    return text if slots is None else restore(text, slots[i]).strip()


def encode_sources(
    pipeline, lines: list[str], truncate: bool = True
) -> tuple[list[list[int]], list[int]]:
    """Source lines -> token ids, and the 1-based numbers of the lines cut to max_positions."""
    encoded = pipeline.source_tokenizer.encode_batch(as_lines(lines))
    eos = (
        [pipeline.model.config.eos_id] if pipeline.decode.add_eos else []
    )  # T5 and Marian end each source with </s>
    limit = pipeline.max_source_tokens
    room = None if limit is None else limit - len(eos)
    cut = [
        number
        for number, ids in enumerate(encoded, start=1)
        if room is not None and len(ids) > room
    ]
    if cut and not truncate:
        raise PipelineError(
            f"input line {cut[0]} has {len(encoded[cut[0] - 1]) + len(eos)} tokens, more than "
            f"the model's max_positions={limit}: split the line into shorter sentences"
        )
    for number in cut:
        encoded[number - 1] = encoded[number - 1][:room]
    if eos:
        encoded = [ids + eos if ids else ids for ids in encoded]  # an empty line stays empty
    return encoded, cut


def translate(
    pipeline,
    lines: list[str],
    batch_tokens: int = 4000,
    truncate: bool = True,
    on_truncate: Callable[[list[int]], None] | None = None,
    generator: torch.Generator | None = None,
    **decode,
) -> list[str] | list[list[str]]:
    """Pipeline.translate's body: each line's translation (or n best), in input order."""
    pipeline.expect("translate")
    lines = as_lines(lines)
    settings = pipeline.settings(**decode)
    if isinstance(batch_tokens, bool) or not isinstance(batch_tokens, int) or batch_tokens < 1:
        raise ConfigError(
            f"batch_tokens={batch_tokens!r} is not valid: it must be a positive number of tokens"
        )
    masked, slots = mask_lines(pipeline, lines, settings)
    encoded, cut = pipeline.encode_sources(masked, truncate)
    if cut and on_truncate is not None:
        on_truncate(cut)
    elif cut:  # stacklevel 3: the caller of Pipeline.translate
        warnings.warn(truncation_note(cut, len(lines), pipeline.max_source_tokens), stacklevel=3)
    if generator is not None and settings.n_best > 1:
        raise ConfigError(f"n_best={settings.n_best}: sampling gives one translation a line")
    outputs: list = [[] if settings.n_best > 1 else "" for _ in lines]
    order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: len(encoded[i]))
    decode_ids = pipeline.target_tokenizer.decode
    for batch in batches_by_tokens(order, [len(ids) for ids in encoded], batch_tokens):
        sources = [encoded[i] for i in batch]
        ids = (  # (B, T) or (B, n, T)
            pipeline.search(sources, settings)
            if generator is None
            else sample_translations(pipeline, sources, settings, generator)
        )
        for row, i in zip(ids.tolist(), batch, strict=True):
            if settings.n_best > 1:
                outputs[i] = [unmask(decode_ids(h).strip(), slots, i) for h in row]
            else:
                outputs[i] = unmask(decode_ids(row).strip(), slots, i)
    return outputs


def sample_translations(
    pipeline, sources: list[list[int]], s: DecodeConfig, generator: torch.Generator
) -> torch.Tensor:
    """One sampled translation (B, T) per source, as long as search would allow."""
    longest = max(len(ids) for ids in sources)
    return sample(
        pipeline.model,
        sources,
        max_new_tokens=max(1, math.floor(s.max_len_a * longest + s.max_len_b)),
        generator=generator,
        min_new_tokens=s.min_len,
        **sampling_settings(s),
    )
