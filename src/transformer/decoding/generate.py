"""A language model's side of Pipeline: a prompt's ids, fitting it to the position table, and
continuing it (sampling, also past max_positions, or beam search). The rules are
transformer.decoding.pipeline's module docstring's; Pipeline's methods call these functions."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

from ..config import DecodeConfig
from .beam import beam_search
from .inputs import PipelineError
from .sampling import sample


def sampling_settings(s: DecodeConfig) -> dict:
    """What `sample` takes from decode settings besides lengths: the draw and the guards."""
    return dict(
        temperature=s.temperature,
        top_k=s.top_k,
        top_p=s.top_p,
        no_repeat_ngram_size=s.no_repeat_ngram_size,
        repetition_penalty=s.repetition_penalty,
    )


def prompt_ids(pipeline, prompt: str | list[dict], chat: bool = False) -> list[int]:
    """A prompt's token ids: the chat template applied when chat=True (to one user turn, or to a
    list of messages), <s> first when the pipeline's defaults say so."""
    if chat:
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        return pipeline.target_tokenizer.encode(pipeline.apply_chat_template(messages))
    ids = pipeline.target_tokenizer.encode(prompt)
    return [pipeline.model.config.bos_id] + ids if pipeline.decode.add_bos else ids


def fit_prompt(pipeline, ids: list[int], max_new_tokens: int, truncate: bool = True) -> list[int]:
    """The end of a prompt that leaves room for max_new_tokens (at least half the table stays
    the prompt's); a leading <s> is kept. Unchanged when it fits or the model has no position
    table; PipelineError instead of cutting when truncate is False."""
    limit = pipeline.max_source_tokens
    if limit is None:
        return ids
    room = max(limit - max_new_tokens + 1, limit // 2, 1)  # N new tokens need P + N - 1 <= limit
    if len(ids) <= room:
        return ids
    if not truncate:
        raise PipelineError(
            f"the prompt has {len(ids)} tokens; with {max_new_tokens} new ones it needs more "
            f"than the model's max_positions={limit}: shorten it"
        )
    bos = pipeline.model.config.bos_id
    head = ids[:1] if pipeline.decode.add_bos and ids[:1] == [bos] else []
    return head + ids[len(ids) - room + len(head) :]


def generate(
    pipeline,
    prompt: str | list[dict],
    chat: bool = False,
    seed: int | None = None,
    truncate: bool = True,
    on_truncate: Callable[[str], None] | None = None,
    on_token: Callable[[int], None] | None = None,
    **decode,
) -> str:
    """Pipeline.generate's body: the new text continuing (or, chat=True, answering) a prompt."""
    pipeline.expect("generate")
    if not isinstance(prompt, str) and not (chat and isinstance(prompt, list)):
        raise TypeError(
            f"the prompt is {type(prompt).__name__}, not str: generate continues one text; "
            "for several, call it once per prompt"
        )
    beam_size = decode.pop("beam_size", 1)  # language models sample unless a beam is asked for
    s = pipeline.settings(
        **{**decode, "beam_size": beam_size, "n_best": 1}
    )  # beam_size checked like the rest
    if on_token is not None and beam_size > 1:
        raise PipelineError("beam search cannot stream its tokens: on_token needs beam_size 1")
    on_step = None
    if on_token is not None:
        eos = pipeline.model.config.eos_id

        def on_step(rows, tokens):
            token = int(tokens[0])
            if token != eos:
                on_token(token)

    full = pipeline.prompt_ids(prompt, chat)
    ids = [pipeline.fit_prompt(full, s.max_new_tokens, truncate)]
    if len(ids[0]) < len(full):
        message = (
            f"the prompt has {len(full):,} tokens, more than fit with {s.max_new_tokens} new "
            f"ones in the model's max_positions={pipeline.max_source_tokens}: kept its last "
            f"{len(ids[0]):,} tokens"
        )
        if on_truncate is not None:
            on_truncate(message)
        else:
            warnings.warn(message, stacklevel=3)  # points at the caller of Pipeline.generate
    if beam_size > 1:
        out = beam_search(
            pipeline.model,
            ids,
            beam_size=beam_size,
            length_penalty=s.length_penalty,
            length_penalty_kind=s.length_penalty_kind,
            length_counts_eos=s.length_counts_eos,
            max_len_a=0,
            max_len_b=s.max_new_tokens,
            no_repeat_ngram_size=s.no_repeat_ngram_size,
            repetition_penalty=s.repetition_penalty,
        )
        return pipeline.target_tokenizer.decode(out[0].tolist())
    generator = torch.Generator(device=next(pipeline.model.parameters()).device)
    if seed is None:
        generator.seed()  # a fresh seed for this generator only; global RNG untouched
    else:
        generator.manual_seed(seed)
    return pipeline.target_tokenizer.decode(sample_long(pipeline, ids[0], s, generator, on_step))


def sample_long(pipeline, context: list[int], s, generator, on_step) -> list[int]:
    """Sampled new tokens of one prompt, as many as s.max_new_tokens asks even past the model's
    max_positions: when the context is full, sampling goes on from its last half (max_positions //
    2 tokens, the KV cache filled anew), as nanoGPT's sampler crops its context; the repetition
    guards see that window."""
    limit = pipeline.max_source_tokens
    new: list[int] = []
    while True:
        want = s.max_new_tokens - len(new)
        room = want if limit is None else min(want, limit - len(context) + 1)
        out = sample(
            pipeline.model,
            [context],
            max_new_tokens=room,
            generator=generator,
            on_step=on_step,
            **sampling_settings(s),
        )
        got = out[0].tolist()  # one row: no padding
        new += got
        if limit is None or len(got) < room or len(new) >= s.max_new_tokens:
            return new  # </s>, or as many as asked
        context = (context + got)[-max(1, limit // 2) :]
