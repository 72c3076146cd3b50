"""Back-translation (Sennrich et al. 2016): synthetic parallel data from monolingual target-side
text. A reverse model (English -> Spanish, a model directory trained here, e.g. on
configs/en-es.toml) translates English sentences into Spanish; each synthetic Spanish line is
paired with its original English line, to add to a Spanish -> English model's training data.

Rules:
- Line i of the source file (synthetic Spanish) and line i of the target file (the input's
  line i, unchanged) are a pair, for every input line given.
- With a tag, each synthetic source is written as TAG + " " + translation (tagged
  back-translation, Caswell et al. 2019), so the model can tell synthetic sources from real
  ones; untagged input at test time then asks for the real kind of output.
- A blank input line gives a blank pair; a translation that comes out empty is written empty,
  without the tag. Training drops a pair with an empty side, so neither costs anything and the
  files stay aligned with the input.
- Search (`search_kind`): greedy (beam_size 1) unless told otherwise, for speed; beam search
  with beam_size > 1; sampling (Edunov et al. 2018: sampled back-translations beat beam ones
  at scale) when temperature, top_k or top_p is given: each token drawn from
  softmax(logits / temperature), restricted to the top_k and then the top_p nucleus
  (decoding.sampling), at most floor(max_len_a * S + max_len_b) tokens, S the longest source in
  its batch. Sampling is seeded: the same input, seed, batch_tokens and device give the same
  output. Beam search and sampling together are refused.
- The tag and the tokenizer: the tag is plain text, cut like any other. The project's byte-level
  BPE splits letters from punctuation before merging and never merges across the split, so
  "<bt>" is always '<', 'bt', '>' at the start of a line (trained on data that holds the tag;
  '<', 'b', 't', '>' otherwise): the same tokens on every tagged line, never <unk>. The word
  tokenizer cuts it the same way; unigram and char give '<', 'b', 't', '>'. A tag need not be
  one token to be learned, only consistent (the Bible's `<kjv> ` tags work the same way).
- Both files are written under temporary names, a chunk at a time, and renamed onto their names
  only when every line is done: a failure leaves the files that were there before.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..files import atomic_write

if TYPE_CHECKING:  # torch is imported inside the functions that run a model: the checks don't
    from ..decoding.pipeline import Pipeline

SAMPLING_KEYS = ("temperature", "top_k", "top_p")
"""Decoding settings that turn sampling on (transformer.config.DecodeConfig)."""
CHUNK_LINES = 2000
"""Lines translated between two progress reports (and written to the temporary files)."""


class BacktranslateError(ValueError):
    """A request that cannot work: a bad tag, or beam search with sampling."""


@dataclass
class Report:
    """What a back-translation run did."""

    lines: int = 0
    """Pairs written (= input lines used)."""
    blank: int = 0
    """Blank input lines (written as blank pairs)."""
    empty: int = 0
    """Non-blank lines whose translation came out empty (written with an empty source)."""
    truncated: list[int] = field(default_factory=list)
    """1-based numbers of the lines cut to the model's max_positions."""
    seconds: float = 0.0


def check_tag(tag: str | None) -> None:
    """A tag is one non-empty word: no spaces, tabs or line breaks inside it."""
    if tag is not None and (not tag or tag != "".join(tag.split())):
        raise BacktranslateError(
            f"--tag {tag!r}: give one word without spaces, e.g. <bt> (it is followed by a space)"
        )


def search_kind(decode: dict) -> str:
    """ "greedy", "beam N" or "sampling (...)" for these decoding overrides (the module's rules)."""
    given = {key: decode[key] for key in SAMPLING_KEYS if key in decode}
    beam = decode.get("beam_size", 1)
    if given and beam > 1:
        names = ", ".join(f"{key}={value}" for key, value in given.items())
        raise BacktranslateError(
            f"beam_size {beam} with {names}: sampling draws one token per step, it has no beam; "
            "give one or the other"
        )
    if given:
        return "sampling (" + ", ".join(f"{k}={v}" for k, v in given.items()) + ")"
    return "greedy" if beam == 1 else f"beam {beam}"


def synthetic_source(translation: str, tag: str | None) -> str:
    """A translation as one line, with the tag and a space before it (not before an empty one)."""
    line = " ".join(translation.split())  # line breaks inside (any kind) become spaces
    return f"{tag} {line}" if tag and line else line


def backtranslate_pairs(
    pipeline: Pipeline,
    lines: list[str],
    tag: str | None = None,
    batch_tokens: int = 4000,
    seed: int = 1,
    report: Report | None = None,
    on_progress: Callable[[Report], None] | None = None,
    chunk_lines: int = CHUNK_LINES,
    **decode,
) -> Iterator[tuple[str, str]]:
    """(synthetic source, original line) for each line, in order, a chunk at a time; `report` is
    updated as they come and on_progress(report) called after each chunk. decode: the
    DecodeConfig overrides (beam_size default 1; temperature, top_k or top_p: sampling)."""
    import torch

    check_tag(tag)
    decode = {"beam_size": 1, **decode, "n_best": 1}
    sampling = search_kind(decode).startswith("sampling")
    generator = torch.Generator(device=next(pipeline.model.parameters()).device)
    generator.manual_seed(seed)
    report = Report() if report is None else report
    start = time.perf_counter()

    def cut(numbers: list[int]) -> None:  # 1-based numbers within the chunk that starts at first
        report.truncated.extend(first + n for n in numbers)

    for first in range(0, len(lines), chunk_lines):
        chunk = lines[first : first + chunk_lines]
        texts = [line if line.strip() else "" for line in chunk]  # a blank line stays blank
        outputs = pipeline.translate(
            texts,
            batch_tokens=batch_tokens,
            on_truncate=cut,
            generator=generator if sampling else None,
            **decode,
        )
        for line, output in zip(chunk, outputs, strict=True):
            source = synthetic_source(output, tag)
            report.blank += not line.strip()
            report.empty += bool(line.strip()) and not source
            report.lines += 1
            yield source, line
        report.seconds = time.perf_counter() - start
        if on_progress is not None:
            on_progress(report)


def write_pairs(
    out_src: str | os.PathLike, out_tgt: str | os.PathLike, pairs: Iterable[tuple[str, str]]
) -> None:
    """Source and target lines into two files, each under a temporary name until all are
    written, then renamed (files.atomic_write)."""

    def write_both(tmp_src: str) -> None:
        def write_target(tmp_tgt: str) -> None:
            with (
                Path(tmp_src).open("w", encoding="utf-8", newline="\n") as src,
                Path(tmp_tgt).open("w", encoding="utf-8", newline="\n") as tgt,
            ):
                for source, target in pairs:
                    src.write(source + "\n")
                    tgt.write(target + "\n")

        atomic_write(out_tgt, write_target)

    atomic_write(out_src, write_both)


def backtranslate(
    pipeline: Pipeline,
    lines: list[str],
    out_src: str | os.PathLike,
    out_tgt: str | os.PathLike,
    tag: str | None = None,
    batch_tokens: int = 4000,
    seed: int = 1,
    on_progress: Callable[[Report], None] | None = None,
    **decode,
) -> Report:
    """Translate `lines` (the target language) with a reverse model and write the aligned pairs:
    out_src the synthetic sources (tagged), out_tgt the lines unchanged (the module's rules)."""
    report = Report()
    pairs = backtranslate_pairs(
        pipeline, lines, tag, batch_tokens, seed, report, on_progress, **decode
    )
    write_pairs(out_src, out_tgt, pairs)
    return report
